#include "planner/derive.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/size.h"
#include "planner/stage.h"

void ck_derive_cost_model_default(ck_cost_model *cm)
{
    cm->gemm_flops = 100e9;
    cm->mem_bandwidth = 20e9;
}

static double op_time(const ck_cost_model *cm, uint64_t flops, uint64_t bytes)
{
    return (double)flops / cm->gemm_flops + (double)bytes / cm->mem_bandwidth;
}

static int overflow(const ck_model *m, const char *what, ck_err *err)
{
    return ck_err_fail(err, CK_ERR_INPUT, "%s: %s overflows 64 bits", m->file, what);
}

/* A derived time must be one a chain file may hold (CK_CHAIN_MAX_TIME): a cost model slow
 * enough makes it infinite. */
static int check_time(const ck_model *m, const ck_cost_model *cm, const char *what,
                      const char *name, double t, ck_err *err)
{
    if (t <= CK_CHAIN_MAX_TIME)
        return CK_OK;
    return ck_err_fail(err, CK_ERR_INPUT, "%s: %s %s is %g s with the cost model's %g "
                   "FLOP/s and %g B/s (--gemm-flops, --mem-bandwidth), more than the limit of "
                   "%g s: " CK_CHAIN_MAX_TIME_WHY, m->file, what, name, t, cm->gemm_flops,
                   cm->mem_bandwidth, CK_CHAIN_MAX_TIME);
}

int ck_derive_saved_bytes(const ck_model *m, size_t first, size_t end, uint64_t *out, ck_err *err)
{
    if (first > end || end > m->n_nodes)
        return ck_err_fail(err, CK_ERR_RUNTIME, "saved bytes of nodes [%zu, %zu): the model has %zu nodes",
                       first, end, m->n_nodes);
    size_t *mark = calloc(m->n_tensors, sizeof *mark);
    if (!mark)
        return ck_err_oom(err);
    bool ok = ck_stage_mark_saved(m, first, end, mark, 1, out);
    free(mark);
    return ok ? CK_OK : overflow(m, "the saved bytes", err);
}

int ck_derive_static_memory(const ck_model *m, ck_static_mem *out, ck_err *err)
{
    const ck_training *t = &m->training;
    static const uint64_t optimizer_bytes[] = {[CK_OPT_NONE] = 0, [CK_OPT_SGD] = 0,
                                               [CK_OPT_MOMENTUM] = 4, [CK_OPT_ADAM] = 8};
    memset(out, 0, sizeof *out);
    bool ok = true;
    for (size_t k = 0; k < m->n_nodes; k++)
        ok = ok && ck_size_add(out->n_params, m->nodes[k].info.n_params, &out->n_params);
    for (size_t i = 1; i < m->n_inputs; i++)
        ok = ok && ck_size_add(out->held_inputs, m->tensors[i].bytes, &out->held_inputs);
    ok = ok && ck_size_mul(out->n_params, ck_dtype_bytes(t->param_dtype), &out->params) &&
         ck_size_mul(out->n_params, ck_dtype_bytes(t->grad_dtype), &out->grads) &&
         ck_size_mul(out->n_params, optimizer_bytes[t->optimizer], &out->optimizer) &&
         ck_size_mul(out->n_params, t->master_weights ? 4 : 0, &out->master) &&
         ck_size_add(out->params, out->grads, &out->total) &&
         ck_size_add(out->total, out->optimizer, &out->total) &&
         ck_size_add(out->total, out->master, &out->total) &&
         ck_size_add(out->total, out->held_inputs, &out->total);
    return ok ? CK_OK : overflow(m, "the static memory", err);
}

/* ---- cutting into stages ---- */

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
        if (ck_model_is_held(m, t))
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

/* Bytes live beyond what an operation holds, tallied over the events of a stage walk:
 * `level` at each node's run is the figure the rules bound. Allocations the operation
 * keeps count only when count_kept (the not-saving forward measures x_{i+1} with the
 * rest and subtracts it afterwards; the saving one bounds what lies beyond x̄_{i+1}). */
typedef struct {
    bool count_kept;
    uint64_t live, peak;
    uint64_t kept; /* what the operation keeps: x̄_{i+1} for the saving forward */
} tally;

static int tally_event(void *ctx, const ck_stage_ev *ev, ck_err *err)
{
    tally *t = ctx;
    if (ev->kept && !ck_size_add(t->kept, ev->bytes, &t->kept))
        return ck_err_fail(err, CK_ERR_INPUT, "a stage's memory overflows 64 bits");
    if (ev->kept && !t->count_kept)
        return CK_OK;
    switch (ev->kind) {
    case CK_EV_RUN:
        if (t->live > t->peak)
            t->peak = t->live;
        break;
    case CK_EV_FREE_WS:
    case CK_EV_FREE_INTERNAL:
    case CK_EV_FREE:
    case CK_EV_FREE_GRAD:
        t->live -= ev->bytes;
        break;
    default:
        if (!ck_size_add(t->live, ev->bytes, &t->live))
            return ck_err_fail(err, CK_ERR_INPUT, "a stage's memory overflows 64 bits");
    }
    return CK_OK;
}

/* saved_bytes is what the saving forward keeps (x̄_{i+1}); fwd_tmp the larger of the saving
 * forward's excess over held + x̄_{i+1} and the not-saving one's over held + x_{i+1};
 * bwd_tmp the backward's over held + y_i. */
static int simulate(const ck_stage_rules *r, ck_stage *st, ck_err *err)
{
    tally saving = {.count_kept = false}, plain = {.count_kept = true}, back = {0};
    int rc = ck_stage_forward(r, true, tally_event, &saving, err);
    if (rc == CK_OK)
        rc = ck_stage_forward(r, false, tally_event, &plain, err);
    if (rc == CK_OK)
        rc = ck_stage_backward(r, tally_event, &back, err);
    if (rc != CK_OK)
        return overflow(r->m, "a stage's memory", err);
    uint64_t out_bytes = r->m->tensors[r->out].bytes;
    uint64_t excess = plain.peak > out_bytes ? plain.peak - out_bytes : 0;
    st->fwd_tmp_bytes = saving.peak > excess ? saving.peak : excess;
    st->bwd_tmp_bytes = back.peak;
    st->saved_bytes = saving.kept;
    st->out_bytes = out_bytes;
    return CK_OK;
}

static char *range_name(const char *a, const char *b)
{
    size_t len = strlen(a) + strlen(b) + 3;
    char *s = malloc(len);
    if (s)
        snprintf(s, len, a == b ? "%s" : "%s..%s", a, b);
    return s;
}

static int fill_stage(const ck_stage_rules *r, ck_granularity g, const ck_cost_model *cm,
                      ck_stage *st, ck_err *err)
{
    const ck_model *m = r->m;
    const ck_node *a = &m->nodes[r->first], *b = &m->nodes[r->end - 1];
    st->name = g == CK_GRAN_OP ? range_name(a->name, b->name)
                               : range_name(m->groups[a->group].name, m->groups[b->group].name);
    if (!st->name)
        return ck_err_oom(err);
    int rc = simulate(r, st, err);
    for (size_t k = r->first; k < r->end && rc == CK_OK; k++) {
        const ck_op_info *info = &m->nodes[k].info;
        st->fwd_time += op_time(cm, info->fwd_flops, info->fwd_bytes_moved);
        st->bwd_time += op_time(cm, info->bwd_flops, info->bwd_bytes_moved);
    }
    if (rc == CK_OK)
        rc = check_time(m, cm, "the forward time of stage", st->name, st->fwd_time, err);
    if (rc == CK_OK)
        rc = check_time(m, cm, "the backward time of stage", st->name, st->bwd_time, err);
    return rc;
}

/* The loss is not a stage: its forward and backward run together in the chain's `loss`
 * operation, whose transient bytes are what ck_stage_loss allocates; its gradient is y_L. */
static int fill_loss(const ck_model *m, const ck_cost_model *cm, ck_chain *c, ck_err *err)
{
    const ck_op_info *info = &m->nodes[m->n_nodes - 1].info;
    c->loss_bwd_time = op_time(cm, info->fwd_flops, info->fwd_bytes_moved) +
                       op_time(cm, info->bwd_flops, info->bwd_bytes_moved);
    int rc = check_time(m, cm, "the time of the loss node", m->nodes[m->n_nodes - 1].name,
                        c->loss_bwd_time, err);
    if (rc != CK_OK)
        return rc;
    tally loss = {.count_kept = true};
    if (ck_stage_loss(m, tally_event, &loss, err) != CK_OK)
        return overflow(m, "the loss's memory", err);
    c->loss_bwd_tmp_bytes = loss.peak;
    return CK_OK;
}

int ck_derive_chain(const ck_model *m, ck_granularity g, const ck_cost_model *cm,
                      ck_chain *out, size_t **stage_first_node, ck_err *err)
{
    if (!(cm->gemm_flops > 0 && isfinite(cm->gemm_flops) && cm->mem_bandwidth > 0 &&
          isfinite(cm->mem_bandwidth)))
        return ck_err_fail(err, CK_ERR_INPUT, "cost model: expected a positive finite FLOP rate and "
                       "memory bandwidth, got %g FLOP/s and %g B/s", cm->gemm_flops, cm->mem_bandwidth);
    size_t *last_use = calloc(m->n_tensors, sizeof *last_use);
    size_t *mark = calloc(m->n_tensors, sizeof *mark);
    size_t *first = calloc(m->n_nodes + 1, sizeof *first);
    long *crossing = calloc(m->n_nodes, sizeof *crossing);
    int rc = CK_OK;
    if (!last_use || !mark || !first || !crossing) {
        rc = ck_err_oom(err);
        goto done;
    }
    ck_model_last_uses(m, last_use);
    size_t n_stages = find_stages(m, g, last_use, crossing, first);
    first[n_stages] = m->n_nodes - 1;
    rc = ck_chain_check_length(n_stages, m->file, "", err);
    if (rc == CK_OK)
        rc = ck_chain_alloc(out, m->name, n_stages, err);
    if (rc != CK_OK)
        goto done;
    out->input_bytes = m->tensors[0].bytes;
    for (size_t i = 0; i < n_stages && rc == CK_OK; i++) {
        ck_stage_rules r;
        if (!ck_stage_rules_init(&r, m, first, i, last_use, mark))
            rc = overflow(m, "a stage's saved bytes", err);
        else
            rc = fill_stage(&r, g, cm, &out->stages[i], err);
    }
    if (rc == CK_OK)
        rc = fill_loss(m, cm, out, err);
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
