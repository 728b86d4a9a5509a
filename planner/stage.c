#include "planner/stage.h"

#include "planner/size.h"

void ck_model_last_uses(const ck_model *m, size_t *last_use)
{
    for (size_t t = 0; t < m->n_tensors; t++)
        last_use[t] = 0;
    for (size_t k = 0; k < m->n_nodes; k++)
        for (size_t i = 0; i < m->nodes[k].op->arity; i++)
            last_use[m->nodes[k].inputs[i]] = k;
}

bool ck_model_is_held(const ck_model *m, size_t t)
{
    return t != 0 && t < m->n_inputs;
}

/* Internal tensors belong to one node and are always distinct; references are counted once. */
bool ck_stage_mark_saved(const ck_model *m, size_t first, size_t end, size_t *mark, size_t stamp,
                         uint64_t *bytes)
{
    uint64_t sum = 0;
    for (size_t k = first; k < end; k++) {
        const ck_node *n = &m->nodes[k];
        for (size_t s = 0; s < n->info.n_saved; s++) {
            const ck_saved *sv = &n->info.saved[s];
            if (sv->kind != CK_SAVE_INTERNAL) {
                size_t t = sv->kind == CK_SAVE_OUTPUT ? n->output : n->inputs[sv->input];
                if (ck_model_is_held(m, t) || mark[t] == stamp)
                    continue;
                mark[t] = stamp;
            }
            if (!ck_size_add(sum, sv->bytes, &sum))
                return false;
        }
    }
    *bytes = sum;
    return true;
}

bool ck_stage_rules_init(ck_stage_rules *r, const ck_model *m, const size_t *first, size_t i,
                         const size_t *last_use, size_t *mark)
{
    *r = (ck_stage_rules){.m = m, .last_use = last_use, .mark = mark, .stamp = i + 1,
                          .first = first[i], .end = first[i + 1],
                          .in = i == 0 ? 0 : m->nodes[first[i] - 1].output,
                          .out = m->nodes[first[i + 1] - 1].output};
    uint64_t bytes;
    return ck_stage_mark_saved(m, r->first, r->end, mark, r->stamp, &bytes);
}

bool ck_stage_made_here(const ck_stage_rules *r, size_t t)
{
    size_t p = r->m->tensors[t].producer;
    return p != CK_NO_NODE && p >= r->first && p < r->end;
}

bool ck_stage_keeps(const ck_stage_rules *r, size_t t)
{
    return ck_stage_made_here(r, t) && (t == r->out || r->mark[t] == r->stamp);
}

/* Inputs of node k made in this stage whose last reader is k, each once: freed after k's
 * forward, their gradients allocated by k's backward (the first of their readers to run). */
static size_t last_reads(const ck_stage_rules *r, size_t k, size_t *out)
{
    const ck_node *n = &r->m->nodes[k];
    size_t count = 0;
    for (size_t i = 0; i < n->op->arity; i++) {
        size_t t = n->inputs[i];
        if (ck_stage_made_here(r, t) && r->last_use[t] == k && (count == 0 || out[0] != t))
            out[count++] = t;
    }
    return count;
}

static int emit(ck_stage_cb cb, void *ctx, ck_err *err, ck_stage_ev_kind kind, size_t node,
                size_t tensor, size_t saved, uint64_t bytes, bool kept)
{
    ck_stage_ev ev = {.kind = kind, .node = node, .tensor = tensor, .saved = saved,
                      .bytes = bytes, .kept = kept};
    return cb(ctx, &ev, err);
}

/* A node's internal tensors, allocated or freed. */
static int internals(const ck_node *n, size_t k, ck_stage_ev_kind kind, bool kept, ck_stage_cb cb,
                     void *ctx, ck_err *err)
{
    int rc = CK_OK;
    for (size_t s = 0; s < n->info.n_saved && rc == CK_OK; s++)
        if (n->info.saved[s].kind == CK_SAVE_INTERNAL)
            rc = emit(cb, ctx, err, kind, k, 0, s, n->info.saved[s].bytes, kept);
    return rc;
}

int ck_stage_forward(const ck_stage_rules *r, bool saving, ck_stage_cb cb, void *ctx, ck_err *err)
{
    const ck_model *m = r->m;
    int rc = CK_OK;
    for (size_t k = r->first; k < r->end && rc == CK_OK; k++) {
        const ck_node *n = &m->nodes[k];
        size_t o = n->output;
        bool kept = saving ? ck_stage_keeps(r, o) : o == r->out;
        rc = emit(cb, ctx, err, CK_EV_ALLOC, k, o, 0, m->tensors[o].bytes, kept);
        if (rc == CK_OK)
            rc = internals(n, k, CK_EV_ALLOC_INTERNAL, saving, cb, ctx, err);
        if (rc == CK_OK)
            rc = emit(cb, ctx, err, CK_EV_ALLOC_WS, k, 0, 0, n->info.fwd_ws_bytes, false);
        if (rc == CK_OK)
            rc = emit(cb, ctx, err, CK_EV_RUN, k, 0, 0, 0, false);
        if (rc == CK_OK)
            rc = emit(cb, ctx, err, CK_EV_FREE_WS, k, 0, 0, n->info.fwd_ws_bytes, false);
        if (rc == CK_OK && !saving)
            rc = internals(n, k, CK_EV_FREE_INTERNAL, false, cb, ctx, err);
        size_t done[CK_OP_MAX_ARITY];
        for (size_t i = 0, c = last_reads(r, k, done); i < c && rc == CK_OK; i++)
            if (!saving || !ck_stage_keeps(r, done[i]))
                rc = emit(cb, ctx, err, CK_EV_FREE, k, done[i], 0, m->tensors[done[i]].bytes,
                          false);
    }
    return rc;
}

/* Integer tensors (token ids) have no gradient. */
static bool has_grad(const ck_model *m, size_t t)
{
    return ck_dtype_is_float(m->tensors[t].type.dtype);
}

int ck_stage_backward(const ck_stage_rules *r, ck_stage_cb cb, void *ctx, ck_err *err)
{
    const ck_model *m = r->m;
    int rc = CK_OK;
    for (size_t k = r->end; k-- > r->first && rc == CK_OK;) {
        const ck_node *n = &m->nodes[k];
        size_t fresh[CK_OP_MAX_ARITY];
        for (size_t i = 0, c = last_reads(r, k, fresh); i < c && rc == CK_OK; i++)
            if (has_grad(m, fresh[i]))
                rc = emit(cb, ctx, err, CK_EV_ALLOC_GRAD, k, fresh[i], 0,
                          m->tensors[fresh[i]].bytes, false);
        if (rc == CK_OK)
            rc = emit(cb, ctx, err, CK_EV_ALLOC_WS, k, 0, 0, n->info.bwd_ws_bytes, false);
        if (rc == CK_OK)
            rc = emit(cb, ctx, err, CK_EV_RUN, k, 0, 0, 0, false);
        if (rc == CK_OK)
            rc = emit(cb, ctx, err, CK_EV_FREE_WS, k, 0, 0, n->info.bwd_ws_bytes, false);
        if (rc == CK_OK && n->output != r->out && has_grad(m, n->output))
            rc = emit(cb, ctx, err, CK_EV_FREE_GRAD, k, n->output, 0,
                      m->tensors[n->output].bytes, false);
    }
    return rc;
}

int ck_stage_loss(const ck_model *m, ck_stage_cb cb, void *ctx, ck_err *err)
{
    size_t k = m->n_nodes - 1;
    const ck_node *n = &m->nodes[k];
    uint64_t ws = n->info.fwd_ws_bytes > n->info.bwd_ws_bytes ? n->info.fwd_ws_bytes
                                                              : n->info.bwd_ws_bytes;
    uint64_t out_bytes = m->tensors[n->output].bytes;
    int rc = emit(cb, ctx, err, CK_EV_ALLOC, k, n->output, 0, out_bytes, false);
    if (rc == CK_OK)
        rc = internals(n, k, CK_EV_ALLOC_INTERNAL, false, cb, ctx, err);
    if (rc == CK_OK)
        rc = emit(cb, ctx, err, CK_EV_ALLOC_WS, k, 0, 0, ws, false);
    if (rc == CK_OK)
        rc = emit(cb, ctx, err, CK_EV_RUN, k, 0, 0, 0, false);
    if (rc == CK_OK)
        rc = emit(cb, ctx, err, CK_EV_FREE_WS, k, 0, 0, ws, false);
    if (rc == CK_OK)
        rc = internals(n, k, CK_EV_FREE_INTERNAL, false, cb, ctx, err);
    if (rc == CK_OK)
        rc = emit(cb, ctx, err, CK_EV_FREE, k, n->output, 0, out_bytes, false);
    return rc;
}
