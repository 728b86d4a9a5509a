#include "planner/model.h"

#include <string.h>

#include "planner/size.h"

/* Requires-grad as PyTorch autograd computes it: a float x_0 requires a gradient (the chain
 * model computes y_0), held inputs and integers never do, and a node's output does when the
 * node has a trainable parameter or an input that does, or is a frozen embedding with
 * `leaf` (a leaf that requires grad, as enable_input_require_grads() makes it). A node
 * whose output requires none runs no backward; one that runs a backward computes only the
 * required gradients, so it keeps a saved tensor only when one of the gradients that tensor
 * is needed for is required (docs/model-format.md, "Frozen parameters"). */

static bool has_params(const ck_node *n)
{
    for (size_t i = 0; i < n->info.n_param_tensors; i++)
        if (n->info.params[i].numel > 0 || n->info.params[i].tied)
            return true;
    return false;
}

/* The gradients node n's backward computes, as CK_NEED_* bits; 0 when it runs none. The
 * loss runs forward and backward together and keeps everything it saves. */
static unsigned required_grads(const ck_model *m, const ck_node *n)
{
    if (n->op->is_loss)
        return CK_NEED_ANY;
    if (!n->backward)
        return 0;
    unsigned need = n->trainable ? CK_NEED_PARAMS : 0;
    for (size_t i = 0; i < n->op->arity; i++)
        if (m->tensors[n->inputs[i]].requires_grad)
            need |= CK_NEED_INPUT(i);
    return need;
}

/* Scratch tensors start at multiples of this, so that any dtype is aligned. */
#define SCRATCH_ALIGN 8

/* Places a dropped internal tensor in the forward's workspace: from *at on (aligned), which
 * moves past it; the workspace grows to hold it. */
static bool place_scratch(ck_node *n, const ck_saved *sv, uint64_t *at)
{
    uint64_t pad = (SCRATCH_ALIGN - *at % SCRATCH_ALIGN) % SCRATCH_ALIGN, end = 0;
    bool ok = ck_size_add(*at, pad, at) && ck_size_add(*at, sv->bytes, &end);
    n->scratch_at[n->n_scratch] = *at;
    n->scratch[n->n_scratch++] = *sv;
    *at = end;
    n->info.fwd_ws_bytes = end > n->info.fwd_ws_bytes ? end : n->info.fwd_ws_bytes;
    return ok;
}

/* Drops from n's saved tensors those no required gradient needs, keeping the rest in
 * order; the internal ones dropped move to the forward's workspace, which the forward still
 * writes: those that die early (ck_saved.dies_early) inside it, the rest beyond it all.
 * False when the workspace would pass 2^64 bytes. */
static bool keep_needed(ck_node *n, unsigned need)
{
    ck_op_info *info = &n->info;
    size_t kept = 0;
    bool ok = true;
    uint64_t early_at = info->early_scratch_at, late_at;
    for (size_t s = 0; s < info->n_saved; s++) {
        const ck_saved *sv = &info->saved[s];
        if (!(sv->needed_for & need) && sv->kind == CK_SAVE_INTERNAL && sv->dies_early)
            ok = ok && place_scratch(n, sv, &early_at);
    }
    late_at = info->fwd_ws_bytes;
    for (size_t s = 0; s < info->n_saved; s++) {
        const ck_saved *sv = &info->saved[s];
        if (sv->needed_for & need)
            info->saved[kept++] = *sv;
        else if (sv->kind == CK_SAVE_INTERNAL && !sv->dies_early)
            ok = ok && place_scratch(n, sv, &late_at);
    }
    memset(&info->saved[kept], 0, (CK_OP_MAX_SAVED - kept) * sizeof info->saved[0]);
    info->n_saved = kept;
    if (need == 0) /* no backward: it costs nothing */
        info->bwd_flops = info->bwd_bytes_moved = info->bwd_ws_bytes = 0;
    if (!(need & CK_NEED_INPUT(0))) /* phases make the input's gradient: one call instead */
        info->n_phases = 0;
    return ok;
}

/* Adds to a trainable node's backward workspace its parameters' gradients as PyTorch's
 * autograd makes them when the .grad buffers are held for the step (CK_GRADS_HELD): the
 * node's backward returns each parameter's gradient as a new tensor, and only then does
 * AccumulateGrad add it into the .grad buffer (the static gradients), so each is a
 * gradient-sized temporary beside that buffer while the backward runs. A tied parameter's
 * too: the head's gradient of the embedding's table. The executor holds the same bytes, so
 * that its memory is PyTorch's. Under autograd's lifetimes the program makes the
 * gradients (planner/program): AccumulateGrad takes the first one as the .grad without a
 * copy, and a later micro-step's is a temporary the program counts itself. */
static bool add_grad_temporaries(ck_node *n, ck_dtype grad_dtype)
{
    bool ok = true;
    uint64_t expert_max = 0;
    for (size_t i = 0; i < n->info.n_param_tensors; i++) {
        const ck_param *p = &n->info.params[i];
        uint64_t bytes = ck_dtype_bytes(grad_dtype);
        /* A rank-3 parameter is E experts' matrices (moe), which transformers' eager loop
         * keeps as modules of their own: their gradients come one matrix at a time (grouped,
         * as transformers 5's experts, each tensor's at once). */
        bool by_expert = p->rank == CK_PARAM_MAX_RANK && !n->attrs.grouped;
        for (size_t d = by_expert ? 1 : 0; d < p->rank; d++)
            ok = ok && ck_size_mul(bytes, p->dim[d], &bytes);
        if (by_expert)
            expert_max = bytes > expert_max ? bytes : expert_max;
        else if (p->numel > 0 || p->tied)
            ok = ok && ck_size_add(n->info.bwd_ws_bytes, bytes, &n->info.bwd_ws_bytes);
        for (size_t ph = 0; ph < n->info.n_phases && !by_expert; ph++) /* the phase making it */
            if (n->info.phases[ph].params >> i & 1)
                ok = ok && ck_size_add(n->info.phases[ph].ws_bytes, bytes, &n->info.phases[ph].ws_bytes);
    }
    return ok && ck_size_add(n->info.bwd_ws_bytes, expert_max, &n->info.bwd_ws_bytes);
}

/* enable_input_require_grads()'s hook on a frozen table: autograd accumulates the output's
 * gradient into the leaf's .grad. */
bool ck_model_input_leaf(const ck_node *n)
{
    return n->op->kind == CK_OP_EMBEDDING && n->attrs.leaf && n->frozen;
}

bool ck_model_frozen_embedding(const ck_model *m, bool *leaf)
{
    for (size_t k = 0; k < m->n_nodes; k++)
        if (m->nodes[k].op->kind == CK_OP_EMBEDDING && m->nodes[k].frozen) {
            *leaf = ck_model_input_leaf(&m->nodes[k]);
            return true;
        }
    return false;
}

int ck_model_grad_propagate(ck_model *m, ck_err *err)
{
    for (size_t t = 0; t < m->n_inputs; t++)
        m->tensors[t].requires_grad = t == 0 && ck_dtype_is_float(m->tensors[0].type.dtype);
    for (size_t k = 0; k < m->n_nodes; k++) {
        ck_node *n = &m->nodes[k];
        n->trainable = has_params(n) && !n->frozen;
        bool grad = n->trainable;
        for (size_t i = 0; i < n->op->arity; i++)
            grad = grad || m->tensors[n->inputs[i]].requires_grad;
        m->tensors[n->output].requires_grad = grad || ck_model_input_leaf(n);
        n->backward = grad && !n->op->is_loss;
        if (!keep_needed(n, required_grads(m, n)))
            return ck_err_fail(err, CK_ERR_INPUT, "%s: node %s: its forward workspace overflows "
                               "64 bits", m->file, n->name);
        if (n->trainable && m->training.grads == CK_GRADS_HELD &&
            !add_grad_temporaries(n, m->training.grad_dtype))
            return ck_err_fail(err, CK_ERR_INPUT, "%s: node %s: its backward workspace overflows "
                               "64 bits", m->file, n->name);
    }
    const ck_node *loss = &m->nodes[m->n_nodes - 1];
    if (!m->tensors[loss->inputs[0]].requires_grad)
        return ck_err_fail(err, CK_ERR_INPUT,
                           "%s: nodes: every node with parameters is frozen and the input needs "
                           "no gradient, so nothing needs a gradient: a training step needs at "
                           "least one node with parameters without \"frozen\": true", m->file);
    return CK_OK;
}
