#include "sim/shard.h"

#include <stdlib.h>
#include <string.h>

#include "planner/derive.h"
#include "sim/kernel.h"

void ck_shard_free(ck_shard *s)
{
    free(s->tensors);
    free(s->node_tensor);
    free(s->node_unit);
    free(s->units);
    memset(s, 0, sizeof *s);
}

/* Node k's tensors appended in flat order, each given its shard position and its place in
 * its unit's buffer (the unit's trainable tensors are laid out before its frozen ones). */
static void add_node(ck_shard *s, const ck_model *m, size_t k, const size_t *param_off, int run)
{
    const ck_node *n = &m->nodes[k];
    ck_shard_unit *u = &s->units[s->node_unit[k]];
    if (u->runs[run][1] == 0)
        u->runs[run][0] = s->n_tensors;
    s->node_tensor[k] = s->n_tensors;
    for (size_t i = 0; i < n->info.n_param_tensors; i++) {
        const ck_param *p = &n->info.params[i];
        if (p->tied || p->numel == 0)
            continue;
        ck_shard_tensor *t = &s->tensors[s->n_tensors++];
        *t = (ck_shard_tensor){.first = param_off[k] + p->offset, .numel = p->numel,
                               .share = ck_derive_share(p->numel, s->ranks), .at = s->n_shard,
                               .in_unit = run == 0 ? u->grads : u->params, .unit = s->node_unit[k]};
        s->n_shard += t->share;
        u->params += p->numel;
        u->grads += run == 0 ? p->numel : 0;
    }
    u->runs[run][1] = s->n_tensors;
}

/* The trainable nodes' tensors, then the frozen ones' (the executor's flat order): every
 * unit's trainable tensors are placed before its frozen ones, which follow them in its
 * buffer. */
static int lay_out(ck_shard *s, const ck_model *m, const size_t *param_off, ck_err *err)
{
    for (int run = 0; run < 2; run++) {
        for (size_t k = 0; k < m->n_nodes; k++) {
            if (m->nodes[k].trainable != (run == 0))
                continue;
            for (size_t i = 0; i < m->nodes[k].info.n_param_tensors; i++)
                if (m->nodes[k].info.params[i].tied && s->zero >= 2)
                    return ck_err_fail(err, CK_ERR_INPUT, "%s: node %s's parameter is tied to "
                                       "node %s's: ZeRO-%u cannot be executed with tied "
                                       "parameters (their gradients and gathers cross units)",
                                       m->file, m->nodes[k].name, m->nodes[m->nodes[k].tied_to].name,
                                       s->zero);
            add_node(s, m, k, param_off, run);
        }
        if (run == 0) {
            s->n_trainable_tensors = s->n_tensors;
            s->n_trainable_shard = s->n_shard;
        }
    }
    return CK_OK;
}

int ck_shard_create(const ck_model *m, const ck_layout *l, uint64_t rank, const size_t *param_off,
                    ck_shard *out, ck_err *err)
{
    memset(out, 0, sizeof *out);
    out->ranks = ck_layout_ranks(l);
    out->rank = rank;
    out->zero = l->zero;
    size_t n_tensors = 0;
    for (size_t k = 0; k < m->n_nodes; k++)
        n_tensors += m->nodes[k].info.n_param_tensors;
    size_t *first = malloc((m->n_groups + 1) * sizeof *first);
    out->tensors = calloc(n_tensors + 1, sizeof *out->tensors);
    out->node_tensor = calloc(m->n_nodes, sizeof *out->node_tensor);
    out->node_unit = calloc(m->n_nodes, sizeof *out->node_unit);
    out->units = calloc(m->n_groups + 1, sizeof *out->units);
    if (!first || !out->tensors || !out->node_tensor || !out->node_unit || !out->units) {
        free(first);
        return ck_err_oom(err);
    }
    out->n_units = ck_derive_units(m, first);
    for (size_t u = 0; u < out->n_units; u++)
        for (size_t k = first[u]; k < first[u + 1]; k++)
            out->node_unit[k] = u;
    free(first);
    return lay_out(out, m, param_off, err);
}

bool ck_shard_owns(const ck_shard *s, const ck_shard_tensor *t, uint64_t e, uint64_t *at)
{
    if (e / t->share != s->rank)
        return false;
    *at = t->at + e - s->rank * t->share;
    return true;
}

void ck_shard_owned(const ck_shard *s, const ck_shard_tensor *t, uint64_t *first, uint64_t *end)
{
    uint64_t a = s->rank * t->share, b = a + t->share;
    *first = a < t->numel ? a : t->numel;
    *end = b < t->numel ? b : t->numel;
}

bool ck_shard_flat(const ck_shard *s, uint64_t at, uint64_t *flat)
{
    size_t lo = 0, hi = s->n_tensors; /* the last tensor whose share begins at or before at */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->tensors[mid].at <= at)
            lo = mid;
        else
            hi = mid;
    }
    if (s->n_tensors == 0)
        return false;
    const ck_shard_tensor *t = &s->tensors[lo];
    uint64_t e = s->rank * t->share + (at - t->at);
    *flat = t->first + e;
    return at - t->at < t->share && e < t->numel;
}

const ck_shard_tensor *ck_shard_param(const ck_shard *s, const ck_model *m, size_t k, size_t i)
{
    const ck_op_info *info = &m->nodes[k].info;
    size_t t = s->node_tensor[k];
    for (size_t j = 0; j < i; j++)
        t += !info->params[j].tied && info->params[j].numel > 0;
    return info->params[i].tied || info->params[i].numel == 0 ? NULL : &s->tensors[t];
}

float ck_shard_average(const void *blocks, ck_dtype d, uint64_t n_ranks, uint64_t stride, uint64_t j)
{
    float sum = ck_kernel_load(d, blocks, (size_t)j);
    for (uint64_t r = 1; r < n_ranks; r++)
        sum += ck_kernel_load(d, blocks, (size_t)(r * stride + j));
    return sum / (float)n_ranks;
}

/* An all-gather of `bytes` a rank into a fresh buffer the caller frees (scratch: like the
 * communication library's own buffers, not counted in the rank's memory). */
static int gather_fresh(const ck_shard_comm *c, uint64_t ranks, const void *send, uint64_t bytes,
                        void **recv, ck_err *err)
{
    uint64_t total = bytes * ranks;
    *recv = malloc(total > 0 ? (size_t)total : 1);
    if (!*recv)
        return ck_err_oom(err);
    return c->allgather(c->ctx, send, bytes, *recv, err);
}

int ck_shard_allreduce(const ck_shard_comm *c, uint64_t ranks, void *grads, ck_dtype d, uint64_t n,
                       ck_err *err)
{
    void *recv;
    int rc = gather_fresh(c, ranks, grads, n * ck_dtype_bytes(d), &recv, err);
    for (uint64_t j = 0; j < n && rc == CK_OK; j++)
        ck_kernel_store(d, grads, (size_t)j, ck_shard_average(recv, d, ranks, n, j));
    free(recv);
    return rc;
}

int ck_shard_reduce_scatter(const ck_shard *s, const ck_shard_comm *c, size_t u, const void *buf,
                            void *grads, ck_dtype d, ck_err *err)
{
    const ck_shard_unit *unit = &s->units[u];
    if (unit->grads == 0)
        return CK_OK;
    void *recv;
    int rc = gather_fresh(c, s->ranks, buf, unit->grads * ck_dtype_bytes(d), &recv, err);
    for (size_t i = unit->runs[0][0]; i < unit->runs[0][1] && rc == CK_OK; i++) {
        const ck_shard_tensor *t = &s->tensors[i];
        uint64_t a, b;
        ck_shard_owned(s, t, &a, &b);
        for (uint64_t e = a; e < b; e++)
            ck_kernel_store(d, grads, (size_t)(t->at + e - a),
                            ck_shard_average(recv, d, s->ranks, unit->grads, t->in_unit + e));
    }
    free(recv);
    return rc;
}

/* The tensors of runs (n_runs [first, end) ranges of tensors[]) gathered whole into dest,
 * at their in_unit offsets when in_unit, else their flat ones. Each rank sends its shares,
 * from the shard array `from` or, when NULL, from its own part of the flat array dest. */
static int gather_runs(const ck_shard *s, const ck_shard_comm *c, const size_t (*runs)[2], size_t n_runs,
                       const void *from, void *dest, bool in_unit, ck_dtype d, ck_err *err)
{
    uint64_t b = ck_dtype_bytes(d), per_rank = 0;
    for (size_t r = 0; r < n_runs; r++)
        for (size_t i = runs[r][0]; i < runs[r][1]; i++)
            per_rank += s->tensors[i].share;
    if (per_rank == 0)
        return CK_OK;
    unsigned char *send = calloc((size_t)(per_rank * b), 1), *recv = NULL, *out = dest;
    if (!send)
        return ck_err_oom(err);
    uint64_t p = 0;
    for (size_t r = 0; r < n_runs; r++)
        for (size_t i = runs[r][0]; i < runs[r][1]; i++) {
            const ck_shard_tensor *t = &s->tensors[i];
            uint64_t first, end;
            ck_shard_owned(s, t, &first, &end);
            const unsigned char *src = from ? (const unsigned char *)from + t->at * b
                                            : out + (t->first + first) * b;
            memcpy(send + p * b, src, (size_t)((from ? t->share : end - first) * b));
            p += t->share;
        }
    int rc = gather_fresh(c, s->ranks, send, per_rank * b, (void **)&recv, err);
    p = 0;
    for (size_t r = 0; r < n_runs && rc == CK_OK; r++)
        for (size_t i = runs[r][0]; i < runs[r][1]; i++) {
            const ck_shard_tensor *t = &s->tensors[i];
            uint64_t base = in_unit ? t->in_unit : t->first;
            for (uint64_t k = 0; k < s->ranks && k * t->share < t->numel; k++) {
                uint64_t n = t->numel - k * t->share < t->share ? t->numel - k * t->share : t->share;
                memcpy(out + (base + k * t->share) * b, recv + (k * per_rank + p) * b, (size_t)(n * b));
            }
            p += t->share;
        }
    free(send);
    free(recv);
    return rc;
}

int ck_shard_gather_unit(const ck_shard *s, const ck_shard_comm *c, size_t u, const void *shard,
                         void *buf, ck_dtype d, ck_err *err)
{
    return gather_runs(s, c, s->units[u].runs, 2, shard, buf, true, d, err);
}

int ck_shard_gather_all(const ck_shard *s, const ck_shard_comm *c, const void *from, void *whole,
                        ck_dtype d, ck_err *err)
{
    const size_t all[1][2] = {{0, s->n_tensors}};
    return gather_runs(s, c, all, 1, from, whole, false, d, err);
}
