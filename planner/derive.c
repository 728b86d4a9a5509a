#include "planner/derive.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/size.h"

void ck_cost_model_default(ck_cost_model *cm)
{
    cm->gemm_flops = 100e9;
    cm->mem_bandwidth = 20e9;
}

static double op_time(const ck_cost_model *cm, uint64_t flops, uint64_t bytes)
{
    return (double)flops / cm->gemm_flops + (double)bytes / cm->mem_bandwidth;
}

static bool is_held(const ck_model *m, size_t tensor)
{
    return tensor != 0 && tensor < m->n_inputs;
}

static int overflow(const ck_model *m, const char *what, ck_err *err)
{
    return ck_fail(err, CK_ERR_INPUT, "%s: %s overflows 64 bits", m->file, what);
}

/* Marks (mark[t] = stamp) the tensors nodes [first, end) save and sums them once each;
 * internal tensors belong to one node and are always distinct. */
static bool saved_union(const ck_model *m, size_t first, size_t end, size_t *mark, size_t stamp,
                        uint64_t *out)
{
    uint64_t sum = 0;
    for (size_t k = first; k < end; k++) {
        const ck_node *n = &m->nodes[k];
        for (size_t s = 0; s < n->info.n_saved; s++) {
            const ck_saved *sv = &n->info.saved[s];
            if (sv->kind != CK_SAVE_INTERNAL) {
                size_t t = sv->kind == CK_SAVE_OUTPUT ? n->output : n->inputs[sv->input];
                if (is_held(m, t) || mark[t] == stamp)
                    continue;
                mark[t] = stamp;
            }
            if (!ck_add(sum, sv->bytes, &sum))
                return false;
        }
    }
    *out = sum;
    return true;
}

int ck_model_saved_bytes(const ck_model *m, size_t first, size_t end, uint64_t *out, ck_err *err)
{
    if (first > end || end > m->n_nodes)
        return ck_fail(err, CK_ERR_RUNTIME, "saved bytes of nodes [%zu, %zu): the model has %zu nodes",
                       first, end, m->n_nodes);
    size_t *mark = calloc(m->n_tensors, sizeof *mark);
    if (!mark)
        return ck_fail_oom(err);
    bool ok = saved_union(m, first, end, mark, 1, out);
    free(mark);
    return ok ? CK_OK : overflow(m, "the saved bytes", err);
}

int ck_model_static_memory(const ck_model *m, ck_static_mem *out, ck_err *err)
{
    const ck_training *t = &m->training;
    static const uint64_t optimizer_bytes[] = {[CK_OPT_NONE] = 0, [CK_OPT_SGD] = 0,
                                               [CK_OPT_MOMENTUM] = 4, [CK_OPT_ADAM] = 8};
    memset(out, 0, sizeof *out);
    bool ok = true;
    for (size_t k = 0; k < m->n_nodes; k++)
        ok = ok && ck_add(out->n_params, m->nodes[k].info.n_params, &out->n_params);
    for (size_t i = 1; i < m->n_inputs; i++)
        ok = ok && ck_add(out->held_inputs, m->tensors[i].bytes, &out->held_inputs);
    ok = ok && ck_mul(out->n_params, ck_dtype_bytes(t->param_dtype), &out->params) &&
         ck_mul(out->n_params, ck_dtype_bytes(t->grad_dtype), &out->grads) &&
         ck_mul(out->n_params, optimizer_bytes[t->optimizer], &out->optimizer) &&
         ck_mul(out->n_params, t->master_weights ? 4 : 0, &out->master) &&
         ck_add(out->params, out->grads, &out->total) &&
         ck_add(out->total, out->optimizer, &out->total) &&
         ck_add(out->total, out->master, &out->total) &&
         ck_add(out->total, out->held_inputs, &out->total);
    return ok ? CK_OK : overflow(m, "the static memory", err);
}

/* ---- cutting into stages ---- */

/* last_use[t]: the last node reading tensor t. */
static void find_last_uses(const ck_model *m, size_t *last_use)
{
    for (size_t t = 0; t < m->n_tensors; t++)
        last_use[t] = 0;
    for (size_t k = 0; k < m->n_nodes; k++)
        for (size_t i = 0; i < m->nodes[k].op->arity; i++)
            last_use[m->nodes[k].inputs[i]] = k;
}

/* Cut j (between nodes j and j+1) is an articulation point when exactly one state tensor,
 * necessarily node j's output, is made at or before j and read after it. State is x_0 and
 * node outputs; the other inputs are held for the whole step and do not count. Returns the
 * number of stages and fills first[] (n_nodes entries suffice). */
static size_t find_stages(const ck_model *m, ck_granularity g, const size_t *last_use,
                          long *crossing, size_t *first)
{
    size_t n = m->n_nodes;
    for (size_t j = 0; j < n; j++)
        crossing[j] = 0;
    for (size_t t = 0; t < m->n_tensors; t++) {
        if (is_held(m, t))
            continue;
        size_t from = t == 0 ? 0 : m->tensors[t].producer;
        if (from >= n || last_use[t] <= from)
            continue; /* the loss's output, read by nobody */
        crossing[from]++;
        crossing[last_use[t]]--;
    }
    size_t n_stages = 0;
    long running = 0;
    first[0] = 0;
    for (size_t j = 0; j + 1 < n; j++) {
        running += crossing[j];
        bool boundary = g == CK_GRAN_OP || m->groups[m->nodes[j].group].end == j + 1;
        if (running == 1 && boundary)
            first[++n_stages] = j + 1;
    }
    return n_stages;
}

/* ---- simulating one stage ---- */

typedef struct {
    const ck_model *m;
    const size_t *last_use;
    size_t *mark, stamp;
    size_t first, end, in, out; /* nodes [first, end); input and output tensors */
} stage_sim;

static bool made_here(const stage_sim *s, size_t t)
{
    size_t p = s->m->tensors[t].producer;
    return p != CK_NO_NODE && p >= s->first && p < s->end;
}

static uint64_t internal_bytes(const ck_node *n)
{
    uint64_t sum = 0; /* cannot overflow: the node's bytes moved, checked at load, include it */
    for (size_t s = 0; s < n->info.n_saved; s++)
        if (n->info.saved[s].kind == CK_SAVE_INTERNAL)
            sum += n->info.saved[s].bytes;
    return sum;
}

/* Inputs of node k made in this stage whose last reader is k, each once. */
static size_t last_reads(const stage_sim *s, size_t k, size_t *out)
{
    const ck_node *n = &s->m->nodes[k];
    size_t count = 0;
    for (size_t i = 0; i < n->op->arity; i++) {
        size_t t = n->inputs[i];
        if (made_here(s, t) && s->last_use[t] == k && (count == 0 || out[0] != t))
            out[count++] = t;
    }
    return count;
}

/* The forward's transient bytes above held + x̄_{i+1} (saving: F_all) and above
 * held + x_{i+1} (not saving: F_ck, F_none); fwd_tmp is the larger. Saving, the live
 * tensors beyond x̄ are the unsaved intermediates still to be read, plus workspace. Not
 * saving, everything made here lives until its last reader, and a node's internal
 * tensors only during the node. */
static bool simulate_forward(const stage_sim *s, uint64_t *fwd_tmp)
{
    const ck_model *m = s->m;
    uint64_t unsaved = 0, live = 0, saving_peak = 0, plain_peak = 0, level;
    for (size_t k = s->first; k < s->end; k++) {
        const ck_node *n = &m->nodes[k];
        uint64_t out_bytes = m->tensors[n->output].bytes;
        bool saved = n->output == s->out || s->mark[n->output] == s->stamp;
        if ((!saved && !ck_add(unsaved, out_bytes, &unsaved)) || !ck_add(live, out_bytes, &live) ||
            !ck_add(unsaved, n->info.fwd_ws_bytes, &level))
            return false;
        if (level > saving_peak)
            saving_peak = level;
        if (!ck_add(live, n->info.fwd_ws_bytes, &level) || !ck_add(level, internal_bytes(n), &level))
            return false;
        if (level > plain_peak)
            plain_peak = level;
        size_t done[CK_OP_MAX_ARITY];
        for (size_t i = 0, c = last_reads(s, k, done); i < c; i++) {
            live -= m->tensors[done[i]].bytes;
            if (s->mark[done[i]] != s->stamp)
                unsaved -= m->tensors[done[i]].bytes;
        }
    }
    uint64_t out_bytes = m->tensors[s->out].bytes;
    uint64_t plain = plain_peak > out_bytes ? plain_peak - out_bytes : 0;
    *fwd_tmp = saving_peak > plain ? saving_peak : plain;
    return true;
}

static uint64_t grad_bytes(const ck_model *m, size_t t)
{
    return ck_dtype_is_float(m->tensors[t].type.dtype) ? m->tensors[t].bytes : 0;
}

/* The backward's transient bytes above held + y_i: walking the nodes in reverse, the
 * gradient of an intermediate tensor is allocated (zeroed, kernels accumulate into it) by
 * the backward of its last reader and freed after the backward of its producer; y_{i+1}
 * and x̄_{i+1} are already held and y_i is counted by the chain. */
static bool simulate_backward(const stage_sim *s, uint64_t *bwd_tmp)
{
    const ck_model *m = s->m;
    uint64_t live = 0, peak = 0, level;
    for (size_t k = s->end; k-- > s->first;) {
        const ck_node *n = &m->nodes[k];
        size_t fresh[CK_OP_MAX_ARITY];
        for (size_t i = 0, c = last_reads(s, k, fresh); i < c; i++)
            if (!ck_add(live, grad_bytes(m, fresh[i]), &live))
                return false;
        if (!ck_add(live, n->info.bwd_ws_bytes, &level))
            return false;
        if (level > peak)
            peak = level;
        if (n->output != s->out)
            live -= grad_bytes(m, n->output);
    }
    *bwd_tmp = peak;
    return true;
}

static char *range_name(const char *a, const char *b)
{
    size_t len = strlen(a) + strlen(b) + 3;
    char *s = malloc(len);
    if (s)
        snprintf(s, len, a == b ? "%s" : "%s..%s", a, b);
    return s;
}

static int fill_stage(stage_sim *s, ck_granularity g, const ck_cost_model *cm, ck_stage *st,
                      ck_err *err)
{
    const ck_model *m = s->m;
    const ck_node *a = &m->nodes[s->first], *b = &m->nodes[s->end - 1];
    st->name = g == CK_GRAN_OP ? range_name(a->name, b->name)
                               : range_name(m->groups[a->group].name, m->groups[b->group].name);
    if (!st->name)
        return ck_fail_oom(err);
    uint64_t saved;
    if (!saved_union(m, s->first, s->end, s->mark, s->stamp, &saved) ||
        !simulate_forward(s, &st->fwd_tmp_bytes) || !simulate_backward(s, &st->bwd_tmp_bytes))
        return overflow(m, "a stage's memory", err);
    /* x̄_{i+1}: what the stage saves, less its input (held already), plus its output. */
    if (s->mark[s->in] == s->stamp)
        saved -= m->tensors[s->in].bytes;
    if (s->mark[s->out] != s->stamp && !ck_add(saved, m->tensors[s->out].bytes, &saved))
        return overflow(m, "a stage's saved bytes", err);
    st->saved_bytes = saved;
    st->out_bytes = m->tensors[s->out].bytes;
    for (size_t k = s->first; k < s->end; k++) {
        const ck_op_info *info = &m->nodes[k].info;
        st->fwd_time += op_time(cm, info->fwd_flops, info->fwd_bytes_moved);
        st->bwd_time += op_time(cm, info->bwd_flops, info->bwd_bytes_moved);
    }
    return CK_OK;
}

/* The loss is not a stage: its forward and backward run together in the chain's `loss`
 * operation, whose transient bytes are the loss's output, its internal tensors and the
 * larger of its two workspaces; its gradient is y_L. */
static void fill_loss(const ck_model *m, const ck_cost_model *cm, ck_chain *c)
{
    const ck_node *loss = &m->nodes[m->n_nodes - 1];
    const ck_op_info *info = &loss->info;
    c->loss_bwd_time = op_time(cm, info->fwd_flops, info->fwd_bytes_moved) +
                       op_time(cm, info->bwd_flops, info->bwd_bytes_moved);
    uint64_t ws = info->fwd_ws_bytes > info->bwd_ws_bytes ? info->fwd_ws_bytes : info->bwd_ws_bytes;
    /* Cannot overflow: each term is part of the larger bytes moved, checked at load. */
    c->loss_bwd_tmp_bytes = m->tensors[loss->output].bytes + internal_bytes(loss) + ws;
}

int ck_model_to_chain(const ck_model *m, ck_granularity g, const ck_cost_model *cm,
                      ck_chain *out, size_t **stage_first_node, ck_err *err)
{
    if (!(cm->gemm_flops > 0 && isfinite(cm->gemm_flops) && cm->mem_bandwidth > 0 &&
          isfinite(cm->mem_bandwidth)))
        return ck_fail(err, CK_ERR_INPUT, "cost model: expected a positive finite FLOP rate and "
                       "memory bandwidth, got %g FLOP/s and %g B/s", cm->gemm_flops, cm->mem_bandwidth);
    size_t *last_use = calloc(m->n_tensors, sizeof *last_use);
    size_t *mark = calloc(m->n_tensors, sizeof *mark);
    size_t *first = calloc(m->n_nodes + 1, sizeof *first);
    long *crossing = calloc(m->n_nodes, sizeof *crossing);
    int rc = CK_OK;
    if (!last_use || !mark || !first || !crossing) {
        rc = ck_fail_oom(err);
        goto done;
    }
    find_last_uses(m, last_use);
    size_t n_stages = find_stages(m, g, last_use, crossing, first);
    first[n_stages] = m->n_nodes - 1;
    if (n_stages > CK_CHAIN_MAX_STAGES) {
        rc = ck_fail(err, CK_ERR_INPUT, "%s: %zu stages is more than the chain limit of %d", m->file,
                     n_stages, CK_CHAIN_MAX_STAGES);
        goto done;
    }
    rc = ck_chain_alloc(out, m->name, n_stages, err);
    if (rc != CK_OK)
        goto done;
    out->input_bytes = m->tensors[0].bytes;
    for (size_t i = 0; i < n_stages && rc == CK_OK; i++) {
        stage_sim s = {.m = m, .last_use = last_use, .mark = mark, .stamp = i + 1,
                       .first = first[i], .end = first[i + 1],
                       .in = i == 0 ? 0 : m->nodes[first[i] - 1].output,
                       .out = m->nodes[first[i + 1] - 1].output};
        rc = fill_stage(&s, g, cm, &out->stages[i], err);
    }
    if (rc == CK_OK)
        fill_loss(m, cm, out);
    if (rc != CK_OK) {
        ck_chain_free(out);
    } else if (stage_first_node) {
        *stage_first_node = first;
        first = NULL;
    }
done:
    free(last_use);
    free(mark);
    free(first);
    free(crossing);
    return rc;
}
