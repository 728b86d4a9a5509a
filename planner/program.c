#include "planner/program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/size.h"

bool ck_program_push(ck_program *p, ck_instr in)
{
    void *items = p->instrs;
    if (!ck_size_reserve(&items, &p->cap, p->n, sizeof *p->instrs))
        return false;
    p->instrs = items;
    p->instrs[p->n++] = in;
    return true;
}

void ck_program_free(ck_program *p)
{
    free(p->instrs);
    memset(p, 0, sizeof *p);
}

/* Buffers are numbered: values 2t + copy, saved sets 2(T + k) + copy, gradients
 * 2(T + N) + t, parameter gradients 3T + 2N + k, checkpoint states 3(T + N) + k, step
 * tensors 3T + 4N + s. */
static size_t buf_index(const ck_model *m, ck_buf b)
{
    switch (b.kind) {
    case CK_BUF_VALUE:
        return 2 * b.id + b.copy;
    case CK_BUF_SAVED:
        return 2 * (m->n_tensors + b.id) + b.copy;
    case CK_BUF_PARAMS:
        return 3 * m->n_tensors + 2 * m->n_nodes + b.id;
    case CK_BUF_CHECKPOINT:
        return 3 * (m->n_tensors + m->n_nodes) + b.id;
    case CK_BUF_STEP:
        return 3 * m->n_tensors + 4 * m->n_nodes + b.id;
    case CK_BUF_GRAD:
    case CK_BUF_TEMP: /* never live in a state: made and freed within an instruction */
        break;
    }
    return 2 * (m->n_tensors + m->n_nodes) + b.id;
}

/* Bytes of node k's own parameters' gradients when the program makes them; 0 when it
 * makes none (held gradients, a frozen node, a tied node's own part of nothing). */
static uint64_t params_bytes(const ck_model *m, size_t k)
{
    const ck_node *n = &m->nodes[k];
    if (m->training.grads != CK_GRADS_AUTOGRAD || !n->trainable)
        return 0; /* the model's sizes were checked against overflow when it was loaded */
    return n->info.n_params * ck_dtype_bytes(m->training.grad_dtype);
}

uint64_t ck_program_param_grad_bytes(const ck_model *m, size_t k, size_t i)
{
    const ck_node *n = &m->nodes[k];
    return params_bytes(m, k) ? n->info.params[i].numel * ck_dtype_bytes(m->training.grad_dtype) : 0;
}

/* The parameter gradient buffers node k's backward adds into: its own, and its tied
 * parameter's owner's (the embedding a language model head shares). */
static size_t params_added_by(const ck_model *m, size_t k, size_t owners[2])
{
    size_t n = 0;
    if (params_bytes(m, k))
        owners[n++] = k;
    const ck_node *node = &m->nodes[k];
    if (node->trainable && node->tied_to != CK_NO_NODE && params_bytes(m, node->tied_to))
        owners[n++] = node->tied_to;
    return n;
}

ck_buf ck_program_value(size_t t, ck_copy copy)
{
    return (ck_buf){CK_BUF_VALUE, t, copy};
}

ck_buf ck_program_grad(size_t t)
{
    return (ck_buf){CK_BUF_GRAD, t, CK_COPY_PLAIN};
}

ck_buf ck_program_saved(size_t node, ck_copy copy)
{
    return (ck_buf){CK_BUF_SAVED, node, copy};
}

ck_buf ck_program_params(size_t node)
{
    return (ck_buf){CK_BUF_PARAMS, node, CK_COPY_PLAIN};
}

ck_buf ck_program_step(ck_step s)
{
    return (ck_buf){CK_BUF_STEP, s, CK_COPY_PLAIN};
}

ck_buf ck_program_checkpoint(size_t node)
{
    return (ck_buf){CK_BUF_CHECKPOINT, node, CK_COPY_PLAIN};
}

static size_t n_bufs(const ck_model *m)
{
    return 3 * m->n_tensors + 4 * m->n_nodes + CK_N_STEPS;
}

static void mark(const ck_program_state *st, uint32_t *flag, bool on)
{
    *flag = on ? st->gen : 0;
}

int ck_program_state_init(ck_program_state *st, const ck_model *m, ck_err *err)
{
    *st = (ck_program_state){.m = m, .live = calloc(n_bufs(m), sizeof *st->live),
                             .shared = calloc(m->n_tensors, sizeof *st->shared),
                             .viewed = calloc(m->n_tensors, sizeof *st->viewed)};
    if (!st->live || !st->shared || !st->viewed) {
        ck_program_state_free(st);
        return ck_err_oom(err);
    }
    ck_program_state_reset(st);
    return CK_OK;
}

void ck_program_state_reset(ck_program_state *st)
{
    const ck_model *m = st->m;
    if (st->gen == UINT32_MAX) { /* the stamps of 2^32 - 1 states ago would read as set */
        memset(st->live, 0, n_bufs(m) * sizeof *st->live);
        memset(st->shared, 0, m->n_tensors * sizeof *st->shared);
        memset(st->viewed, 0, m->n_tensors * sizeof *st->viewed);
        st->gen = 0;
    }
    st->gen++;
    st->held = st->params_held = 0;
    if (!ck_model_is_static(m, 0)) {
        mark(st, &st->live[buf_index(m, ck_program_value(0, CK_COPY_PLAIN))], true);
        st->held = m->tensors[0].bytes;
    }
}

void ck_program_state_free(ck_program_state *st)
{
    free(st->live);
    free(st->shared);
    free(st->viewed);
    memset(st, 0, sizeof *st);
}

bool ck_program_state_has(const ck_program_state *st, ck_buf b)
{
    return st->live[buf_index(st->m, b)] == st->gen;
}

bool ck_program_state_shares(const ck_program_state *st, size_t t)
{
    return st->shared[t] == st->gen;
}

void ck_program_state_set(ck_program_state *st, ck_buf b, bool live)
{
    if (ck_program_state_has(st, b) == live)
        return;
    if (b.kind == CK_BUF_PARAMS)
        st->params_held = live ? st->params_held + params_bytes(st->m, b.id)
                               : st->params_held - params_bytes(st->m, b.id);
    st->held = live ? st->held + ck_program_buf_bytes(st->m, b) : st->held - ck_program_buf_bytes(st->m, b);
    mark(st, &st->live[buf_index(st->m, b)], live);
}

void ck_program_state_hold_params_of(ck_program_state *st, size_t first, size_t end)
{
    for (size_t k = first; k < end; k++) {
        size_t owners[2];
        for (size_t j = 0, n = params_added_by(st->m, k, owners); j < n; j++)
            ck_program_state_set(st, ck_program_params(owners[j]), true);
    }
}

void ck_program_state_hold_params(ck_program_state *st)
{
    ck_program_state_hold_params_of(st, 0, st->m->n_nodes);
}

uint64_t ck_program_state_params_bytes(const ck_program_state *st)
{
    return st->params_held;
}

uint64_t ck_program_step_bytes(const ck_model *m)
{
    uint64_t largest = 0, all = 0, grads = 0, temps;
    for (size_t k = 0; k < m->n_nodes; k++) {
        grads += params_bytes(m, k);
        for (size_t i = 0; m->nodes[k].trainable && i < m->nodes[k].info.n_param_tensors; i++) {
            uint64_t n = m->nodes[k].info.params[i].numel;
            largest = n > largest ? n : largest;
            all += n;
        }
    }
    if (!ck_training_step_temp_bytes(&m->training, largest, all, &temps) || !ck_size_add(grads, temps, &grads))
        return UINT64_MAX;
    return grads;
}

bool ck_program_has_grad(const ck_model *m, size_t t)
{
    return m->tensors[t].requires_grad;
}

bool ck_program_pass_inputs(const ck_model *m, const ck_node *n, size_t *owner, size_t *sharer)
{
    if (n->op->kind == CK_OP_LORA && n->inputs[0] != n->inputs[1]) { /* out = y + s B (A x) */
        *owner = n->inputs[1];
        *sharer = SIZE_MAX;
        return true;
    }
    if (n->op->kind != CK_OP_ADD || n->inputs[0] == n->inputs[1])
        return false;
    size_t p0 = m->tensors[n->inputs[0]].producer, p1 = m->tensors[n->inputs[1]].producer;
    bool later = p1 != CK_NO_NODE && (p0 == CK_NO_NODE || p1 > p0);
    *sharer = n->inputs[later ? 1 : 0];
    *owner = n->inputs[later ? 0 : 1];
    return true;
}

bool ck_program_has_saved(const ck_node *n)
{
    for (size_t s = 0; s < n->info.n_saved; s++)
        if (n->info.saved[s].kind == CK_SAVE_INTERNAL)
            return true;
    return false;
}

uint64_t ck_program_buf_bytes(const ck_model *m, ck_buf b)
{
    if (b.kind == CK_BUF_PARAMS)
        return params_bytes(m, b.id);
    if (b.kind == CK_BUF_STEP)
        return m->step_bytes[b.id];
    if (b.kind == CK_BUF_CHECKPOINT)
        return m->nodes[b.id].info.checkpoint_bytes;
    if (b.kind != CK_BUF_SAVED)
        return m->tensors[b.id].bytes;
    const ck_op_info *info = &m->nodes[b.id].info;
    uint64_t sum = 0; /* the model's sizes were checked against overflow when it was loaded */
    for (size_t s = 0; s < info->n_saved; s++)
        if (info->saved[s].kind == CK_SAVE_INTERNAL)
            sum += info->saved[s].bytes;
    return sum;
}

/* ---- what an instruction reads ---- */

static const char *instr_names[] = {[CK_INSTR_FORWARD] = "forward", [CK_INSTR_BACKWARD] = "backward",
                                    [CK_INSTR_LOSS] = "loss", [CK_INSTR_GRAD] = "gradient",
                                    [CK_INSTR_ALLOC] = "alloc", [CK_INSTR_FREE] = "free"};
static const char *const step_names[CK_N_STEPS] = {"the attention masks", "the position ids",
                                                   "the rotary tables", "the embedding's leaf"};

static int refuse(const ck_program_state *st, size_t k, const ck_instr *in, const char *what,
                  ck_buf b, ck_err *err)
{
    const ck_model *m = st->m;
    static const char *const kinds[] = {[CK_BUF_VALUE] = "tensor", [CK_BUF_SAVED] = "saved tensors of",
                                        [CK_BUF_GRAD] = "gradient of",
                                        [CK_BUF_PARAMS] = "parameter gradients of",
                                        [CK_BUF_STEP] = "step tensor",
                                        [CK_BUF_CHECKPOINT] = "checkpoint state of",
                                        [CK_BUF_TEMP] = "backward's gradients of"};
    bool of_node = b.kind == CK_BUF_SAVED || b.kind == CK_BUF_PARAMS || b.kind >= CK_BUF_CHECKPOINT;
    const char *name = b.kind == CK_BUF_STEP ? step_names[b.id]
                       : of_node             ? m->nodes[b.id].name
                                             : m->tensors[b.id].name;
    bool on_node = in->kind != CK_INSTR_GRAD && in->kind != CK_INSTR_ALLOC && in->kind != CK_INSTR_FREE;
    return ck_err_fail(err, CK_ERR_INPUT, "program[%zu] (%s%s%s): %s %s%s %s", k,
                       instr_names[in->kind], on_node ? " " : "", on_node ? m->nodes[in->node].name : "",
                       what, kinds[b.kind],
                       b.kind == CK_BUF_VALUE && b.copy == CK_COPY_KEPT ? " (kept)" : "", name);
}

/* A tensor can be read when it is static or one of its copies is live. */
static bool readable(const ck_program_state *st, size_t t)
{
    return ck_model_is_static(st->m, t) || ck_program_state_has(st, ck_program_value(t, CK_COPY_PLAIN)) ||
           ck_program_state_has(st, ck_program_value(t, CK_COPY_KEPT));
}

static int check_inputs(const ck_program_state *st, size_t k, const ck_instr *in, ck_err *err)
{
    const ck_node *n = &st->m->nodes[in->node];
    for (size_t i = 0; i < n->op->arity; i++)
        if (!readable(st, n->inputs[i]))
            return refuse(st, k, in, "reads", ck_program_value(n->inputs[i], CK_COPY_PLAIN), err);
    return CK_OK;
}

/* What a backward reads: its output's gradient and what its forward saved. */
static int check_saved(const ck_program_state *st, size_t k, const ck_instr *in, ck_err *err)
{
    const ck_model *m = st->m;
    const ck_node *n = &m->nodes[in->node];
    if (ck_program_has_grad(m, n->output) && !ck_program_state_has(st, ck_program_grad(n->output)))
        return refuse(st, k, in, "reads", ck_program_grad(n->output), err);
    for (size_t s = 0; s < n->info.n_saved; s++) {
        const ck_saved *sv = &n->info.saved[s];
        size_t t = ck_model_saved_tensor(n, sv);
        ck_buf kept = ck_program_saved(in->node, CK_COPY_KEPT);
        if (t == SIZE_MAX && !ck_program_state_has(st, kept))
            return refuse(st, k, in, "reads", kept, err);
        if (t != SIZE_MAX && !readable(st, t))
            return refuse(st, k, in, "reads", ck_program_value(t, CK_COPY_KEPT), err);
    }
    return CK_OK;
}

/* A pass hands over the output's gradient to inputs that have none yet. */
static int check_pass(const ck_program_state *st, size_t k, const ck_instr *in, ck_err *err)
{
    const ck_node *n = &st->m->nodes[in->node];
    size_t owner, sharer;
    if (!ck_program_pass_inputs(st->m, n, &owner, &sharer) || !ck_program_has_grad(st->m, owner) ||
        (sharer != SIZE_MAX && !ck_program_has_grad(st->m, sharer)))
        return ck_err_fail(err, CK_ERR_INPUT, "program[%zu] (backward %s): a pass needs an add of "
                           "two inputs that require gradients, or a lora whose base output "
                           "requires one", k, n->name);
    if (!ck_program_state_has(st, ck_program_grad(n->output)))
        return refuse(st, k, in, "reads", ck_program_grad(n->output), err);
    if (ck_program_state_has(st, ck_program_grad(owner)))
        return refuse(st, k, in, "allocates", ck_program_grad(owner), err);
    if (sharer == SIZE_MAX) /* a lora's: the rest of its backward runs */
        return check_saved(st, k, in, err);
    if (ck_program_state_has(st, ck_program_grad(sharer)))
        return refuse(st, k, in, "allocates", ck_program_grad(sharer), err);
    return CK_OK;
}

/* Whether loss node n's backward reads its input (x_L) as well as what it saved. */
static bool loss_reads_input(const ck_node *n)
{
    for (size_t s = 0; s < n->info.n_saved; s++)
        if (n->info.saved[s].kind == CK_SAVE_INPUT && n->info.saved[s].input == 0)
            return true;
    return false;
}

bool ck_program_loss_frees_input(const ck_model *m)
{
    return !loss_reads_input(&m->nodes[m->n_nodes - 1]);
}

/* Whether b is a step tensor or a checkpoint state the model has: what ALLOC makes. */
static bool held_for_bytes(const ck_model *m, ck_buf b)
{
    if (b.kind == CK_BUF_STEP)
        return b.id < CK_N_STEPS && m->step_bytes[b.id] > 0;
    return b.kind == CK_BUF_CHECKPOINT && b.id < m->n_nodes && m->nodes[b.id].info.checkpoint_bytes > 0;
}

static int check_instr(const ck_program_state *st, size_t k, const ck_instr *in, ck_err *err)
{
    const ck_model *m = st->m;
    bool node_ok = in->node < m->n_nodes && (in->node + 1 == m->n_nodes) == (in->kind == CK_INSTR_LOSS);
    switch (in->kind) {
    case CK_INSTR_FORWARD:
        if (!node_ok || in->buf.kind != CK_BUF_VALUE || in->buf.id != m->nodes[in->node].output)
            break;
        if (ck_program_state_has(st, in->buf))
            return refuse(st, k, in, "computes", in->buf, err);
        return check_inputs(st, k, in, err);
    case CK_INSTR_BACKWARD:
        if (!node_ok)
            return ck_err_fail(err, CK_ERR_INPUT, "program[%zu]: no such node", k);
        if (!m->nodes[in->node].backward)
            return ck_err_fail(err, CK_ERR_INPUT, "program[%zu] (backward %s): the node runs no "
                               "backward (its output requires no gradient)", k,
                               m->nodes[in->node].name);
        if (in->pass)
            return check_pass(st, k, in, err);
        return check_saved(st, k, in, err);
    case CK_INSTR_LOSS:
        if (in->frees_input && loss_reads_input(&m->nodes[in->node]))
            return ck_err_fail(err, CK_ERR_INPUT, "program[%zu] (loss %s): frees the input its "
                               "backward reads", k, m->nodes[in->node].name);
        return check_inputs(st, k, in, err);
    case CK_INSTR_GRAD:
        if (in->buf.kind != CK_BUF_GRAD || in->buf.id >= m->n_tensors || !ck_program_has_grad(m, in->buf.id))
            break;
        return ck_program_state_has(st, in->buf) ? refuse(st, k, in, "allocates", in->buf, err) : CK_OK;
    case CK_INSTR_ALLOC:
        if (!held_for_bytes(m, in->buf))
            break;
        return ck_program_state_has(st, in->buf) ? refuse(st, k, in, "allocates", in->buf, err) : CK_OK;
    case CK_INSTR_FREE:
        if (in->buf.kind == CK_BUF_PARAMS || /* zero_grad frees them, after the program */
            (in->buf.kind <= CK_BUF_GRAD && in->buf.id >= (in->buf.kind == CK_BUF_SAVED ? m->n_nodes : m->n_tensors)) ||
            (in->buf.kind > CK_BUF_PARAMS && !held_for_bytes(m, in->buf)))
            break;
        return ck_program_state_has(st, in->buf) || in->if_live ? CK_OK : refuse(st, k, in, "frees", in->buf, err);
    }
    return ck_err_fail(err, CK_ERR_INPUT, "program[%zu]: malformed %s instruction", k,
                       in->kind <= CK_INSTR_FREE ? instr_names[in->kind] : "unknown");
}

/* ---- the events of an instruction ---- */

typedef struct {
    ck_program_state *st;
    const ck_instr *in;
    ck_event_cb cb;
    void *ctx;
    uint64_t held, peak;
} emitter;

static int emit(emitter *em, ck_event_kind kind, ck_buf b, size_t slot, uint64_t bytes, ck_hold hold,
                ck_err *err)
{
    if (kind == CK_EVENT_ALLOC || kind == CK_EVENT_WORKSPACE) {
        if (!ck_size_add(em->held, bytes, &em->held))
            return ck_err_fail(err, CK_ERR_INPUT, "program: memory held exceeds 2^64 bytes");
    } else if (kind != CK_EVENT_RUN) {
        em->held -= bytes;
    }
    if (em->held > em->peak)
        em->peak = em->held;
    ck_event ev = {.kind = kind, .buf = b, .slot = slot, .bytes = bytes, .hold = hold};
    return em->cb ? em->cb(em->ctx, em->in, &ev, err) : CK_OK;
}

/* Gradient `to` made live on the memory of gradient `from` (MOVE, SHARE): no bytes. */
static int hand_over(emitter *em, ck_event_kind kind, size_t to, size_t from, ck_err *err)
{
    ck_program_state *st = em->st;
    mark(st, &st->live[buf_index(st->m, ck_program_grad(to))], true);
    if (kind == CK_EVENT_MOVE)
        mark(st, &st->live[buf_index(st->m, ck_program_grad(from))], false);
    /* a moved gradient that lived on another's memory still does */
    mark(st, &st->shared[to], kind == CK_EVENT_SHARE || (kind == CK_EVENT_MOVE && st->shared[from] == st->gen));
    if (kind == CK_EVENT_MOVE)
        mark(st, &st->shared[from], false);
    mark(st, &st->viewed[to], kind == CK_EVENT_MOVE && st->viewed[from] == st->gen);
    ck_event ev = {kind, ck_program_grad(to), 0, 0, CK_HOLD_GRADIENT, ck_program_grad(from)};
    return em->cb ? em->cb(em->ctx, em->in, &ev, err) : CK_OK;
}

/* Allocates (or frees) buffer b: one event, or one per internal tensor of a saved set or
 * per parameter of a node's gradients. A shared gradient's free frees no memory. */
static int whole_buf(emitter *em, ck_event_kind kind, ck_buf b, ck_hold hold, ck_err *err)
{
    const ck_model *m = em->st->m;
    if (b.kind == CK_BUF_PARAMS) /* never freed by an instruction: zero_grad frees them */
        em->st->params_held += params_bytes(m, b.id);
    mark(em->st, &em->st->live[buf_index(m, b)], kind == CK_EVENT_ALLOC);
    if (b.kind == CK_BUF_GRAD && ck_program_state_shares(em->st, b.id)) {
        mark(em->st, &em->st->shared[b.id], false);
        return emit(em, CK_EVENT_UNSHARE, b, 0, 0, hold, err);
    }
    if (b.kind != CK_BUF_SAVED && b.kind != CK_BUF_PARAMS)
        return emit(em, kind, b, 0, ck_program_buf_bytes(m, b), hold, err);
    const ck_op_info *info = &m->nodes[b.id].info;
    int rc = CK_OK;
    for (size_t s = 0; b.kind == CK_BUF_SAVED && s < info->n_saved && rc == CK_OK; s++)
        if (info->saved[s].kind == CK_SAVE_INTERNAL)
            rc = emit(em, kind, b, s, info->saved[s].bytes, hold, err);
    for (size_t i = 0; b.kind == CK_BUF_PARAMS && i < info->n_param_tensors && rc == CK_OK; i++)
        if (ck_program_param_grad_bytes(m, b.id, i))
            rc = emit(em, kind, b, i, ck_program_param_grad_bytes(m, b.id, i), hold, err);
    return rc;
}

/* The node runs (part 1: a loss's backward; part p: a phased backward's phase p) with ws
 * bytes of workspace. */
static int run_with_workspace(emitter *em, uint64_t ws, size_t part, ck_err *err)
{
    ck_buf none = {0};
    int rc = emit(em, CK_EVENT_WORKSPACE, none, 0, ws, CK_HOLD_WORKSPACE, err);
    if (rc == CK_OK)
        rc = emit(em, CK_EVENT_RUN, none, part, 0, CK_HOLD_WORKSPACE, err);
    if (rc == CK_OK)
        rc = emit(em, CK_EVENT_WORKSPACE_FREE, none, 0, ws, CK_HOLD_WORKSPACE, err);
    return rc;
}

static int forward_events(emitter *em, const ck_node *n, ck_err *err)
{
    const ck_instr *in = em->in;
    ck_buf saved = ck_program_saved(in->node, in->keep ? CK_COPY_KEPT : CK_COPY_PLAIN);
    int rc = whole_buf(em, CK_EVENT_ALLOC, in->buf, CK_HOLD_ACTIVATION, err);
    if (rc == CK_OK && ck_program_has_saved(n))
        rc = whole_buf(em, CK_EVENT_ALLOC, saved, CK_HOLD_ACTIVATION, err);
    if (rc == CK_OK)
        rc = run_with_workspace(em, n->info.fwd_ws_bytes, 0, err);
    if (rc == CK_OK && ck_program_has_saved(n) && !in->keep)
        rc = whole_buf(em, CK_EVENT_FREE, saved, CK_HOLD_ACTIVATION, err);
    return rc;
}

/* Gradients of the inputs that have none yet: this backward is the first to add into them
 * (a view when the op says so). Into one that exists, PyTorch adds a new gradient: in place
 * when the existing one is a tensor of its own, out of place, into a third, when it is a
 * view (autograd's InputBuffer::add), which leaves the sum a tensor of its own. *added
 * receives the bytes of those new gradients and sums. Tensor `passed`'s is handed over
 * instead (a lora's pass). */
static int input_grads(emitter *em, const ck_node *n, size_t passed, uint64_t *added, ck_err *err)
{
    ck_program_state *st = em->st;
    const ck_model *m = st->m;
    int rc = CK_OK;
    *added = 0;
    for (size_t i = 0; i < n->op->arity && rc == CK_OK; i++) {
        size_t t = n->inputs[i];
        if (!ck_program_has_grad(m, t) || t == passed)
            continue;
        if (!ck_program_state_has(st, ck_program_grad(t))) {
            rc = whole_buf(em, CK_EVENT_ALLOC, ck_program_grad(t), CK_HOLD_GRADIENT, err);
            mark(st, &st->viewed[t], n->info.grad_view >> i & 1);
            continue;
        }
        uint64_t g = m->tensors[t].bytes;
        bool out_of_place = st->viewed[t] == st->gen;
        mark(st, &st->viewed[t], false);
        if (!ck_size_add(*added, g, added) || (out_of_place && !ck_size_add(*added, g, added)))
            return ck_err_fail(err, CK_ERR_INPUT, "program: memory held exceeds 2^64 bytes");
    }
    return rc;
}

/* What phase ph of node k's phased backward makes before it runs: the inputs' gradients,
 * its parameters' (new ones, or, when they exist already from an earlier micro-step,
 * temporaries added in, as the inputs' sums are: *added) and its temps. */
static int phase_makes(emitter *em, const ck_node *n, size_t k, const ck_phase *ph, bool held,
                       uint64_t *added, ck_err *err)
{
    const ck_model *m = em->st->m;
    ck_buf temps = {CK_BUF_TEMP, k, CK_COPY_PLAIN};
    int rc = ph->input_grads ? input_grads(em, n, SIZE_MAX, added, err) : CK_OK;
    for (size_t i = 0; i < n->info.n_param_tensors && rc == CK_OK; i++) {
        uint64_t bytes = ck_program_param_grad_bytes(m, k, i);
        if (!(ph->params >> i & 1) || bytes == 0)
            continue;
        if (!held)
            rc = emit(em, CK_EVENT_ALLOC, ck_program_params(k), i, bytes, CK_HOLD_GRADIENT, err);
        else if (!ck_size_add(*added, bytes, added))
            return ck_err_fail(err, CK_ERR_INPUT, "program: memory held exceeds 2^64 bytes");
    }
    for (size_t t = 0; t < n->info.n_temps && rc == CK_OK; t++)
        if (ph->makes >> t & 1)
            rc = emit(em, CK_EVENT_ALLOC, temps, t, n->info.temps[t].bytes, CK_HOLD_GRADIENT, err);
    return rc;
}

/* What a phase frees once it has run: the temps it read last (`temps`) and the saved
 * tensors whose slots are in `slots`. */
static int phase_frees(emitter *em, const ck_node *n, size_t k, unsigned temps, uint64_t slots,
                       ck_err *err)
{
    const ck_op_info *info = &n->info;
    ck_buf temp = {CK_BUF_TEMP, k, CK_COPY_PLAIN}, saved = ck_program_saved(k, CK_COPY_KEPT);
    int rc = CK_OK;
    for (size_t t = 0; t < info->n_temps && rc == CK_OK; t++)
        if (temps >> t & 1)
            rc = emit(em, CK_EVENT_FREE, temp, t, info->temps[t].bytes, CK_HOLD_GRADIENT, err);
    for (size_t s = 0; s < info->n_saved && rc == CK_OK; s++)
        if (info->saved[s].kind == CK_SAVE_INTERNAL && slots >> info->saved[s].slot & 1)
            rc = emit(em, CK_EVENT_FREE, saved, s, info->saved[s].bytes, CK_HOLD_ACTIVATION, err);
    return rc;
}

/* Phase by phase (ck_phase): what it makes, its run, then what it was the last to read.
 * The saved set is gone at the end, what no phase released with it. */
static int phased_backward_events(emitter *em, const ck_node *n, ck_err *err)
{
    ck_program_state *st = em->st;
    size_t k = em->in->node;
    ck_buf params = ck_program_params(k);
    bool held = ck_program_state_has(st, params);
    uint64_t released = 0;
    int rc = CK_OK;
    for (size_t p = 0; p < n->info.n_phases && rc == CK_OK; p++) {
        const ck_phase *ph = &n->info.phases[p];
        uint64_t added = 0, ws = ph->ws_bytes;
        rc = phase_makes(em, n, k, ph, held, &added, err);
        if (rc == CK_OK && !ck_size_add(ws, added, &ws))
            return ck_err_fail(err, CK_ERR_INPUT, "program: memory held exceeds 2^64 bytes");
        if (rc == CK_OK)
            rc = run_with_workspace(em, ws, p, err);
        if (rc == CK_OK)
            rc = phase_frees(em, n, k, ph->frees, ph->releases, err);
        released |= ph->releases;
    }
    if (rc == CK_OK)
        rc = phase_frees(em, n, k, 0, ~released, err);
    mark(st, &st->live[buf_index(st->m, ck_program_saved(k, CK_COPY_KEPT))], false);
    if (!held && params_bytes(st->m, k)) {
        st->params_held += params_bytes(st->m, k);
        mark(st, &st->live[buf_index(st->m, params)], true);
    }
    return rc;
}

/* With an add's pass, its inputs take its output's gradient instead (its owner the buffer,
 * its sharer the same memory), and nothing runs; with a lora's, its base output takes it
 * once the rest of the backward has read it. */
static int backward_events(emitter *em, const ck_node *n, ck_err *err)
{
    const ck_model *m = em->st->m;
    size_t owner = SIZE_MAX, sharer = SIZE_MAX;
    bool pass = em->in->pass && ck_program_pass_inputs(m, n, &owner, &sharer);
    if (pass && sharer != SIZE_MAX) {
        int rc = hand_over(em, CK_EVENT_MOVE, owner, n->output, err);
        return rc == CK_OK ? hand_over(em, CK_EVENT_SHARE, sharer, owner, err) : rc;
    }
    if (n->info.n_phases)
        return phased_backward_events(em, n, err);
    size_t owners[2];
    uint64_t added, ws = n->info.bwd_ws_bytes;
    int rc = input_grads(em, n, pass ? owner : SIZE_MAX, &added, err);
    for (size_t j = 0, n_owners = params_added_by(m, em->in->node, owners); j < n_owners && rc == CK_OK; j++) {
        ck_buf b = ck_program_params(owners[j]);
        if (ck_program_state_has(em->st, b))
            added += ck_program_buf_bytes(m, b);
        else
            rc = whole_buf(em, CK_EVENT_ALLOC, b, CK_HOLD_GRADIENT, err);
    }
    if (rc == CK_OK && !ck_size_add(ws, added, &ws))
        return ck_err_fail(err, CK_ERR_INPUT, "program: memory held exceeds 2^64 bytes");
    if (rc == CK_OK)
        rc = run_with_workspace(em, ws, 0, err);
    return rc == CK_OK && pass ? hand_over(em, CK_EVENT_MOVE, owner, n->output, err) : rc;
}

/* The loss's output and internals live only while it runs, as workspace; its input is
 * freed between its passes when nothing reads it after the forward; its input's gradient
 * is made for its backward. */
static int loss_events(emitter *em, const ck_node *n, ck_err *err)
{
    const ck_model *m = em->st->m;
    size_t x = n->inputs[0];
    ck_buf out = ck_program_value(n->output, CK_COPY_PLAIN);
    ck_buf saved = ck_program_saved(em->in->node, CK_COPY_PLAIN);
    ck_buf kept = ck_program_value(x, CK_COPY_KEPT), plain = ck_program_value(x, CK_COPY_PLAIN);
    int rc = whole_buf(em, CK_EVENT_ALLOC, out, CK_HOLD_WORKSPACE, err);
    if (rc == CK_OK)
        rc = whole_buf(em, CK_EVENT_ALLOC, saved, CK_HOLD_WORKSPACE, err);
    if (rc == CK_OK)
        rc = run_with_workspace(em, n->info.fwd_ws_bytes, 0, err);
    if (rc == CK_OK && em->in->frees_input && !ck_model_is_static(m, x))
        rc = whole_buf(em, CK_EVENT_FREE, ck_program_state_has(em->st, kept) ? kept : plain,
                       CK_HOLD_ACTIVATION, err);
    if (rc == CK_OK && ck_program_has_grad(m, x) && !ck_program_state_has(em->st, ck_program_grad(x)))
        rc = whole_buf(em, CK_EVENT_ALLOC, ck_program_grad(x), CK_HOLD_GRADIENT, err);
    if (rc == CK_OK)
        rc = run_with_workspace(em, n->info.bwd_ws_bytes, 1, err);
    if (rc == CK_OK)
        rc = whole_buf(em, CK_EVENT_FREE, saved, CK_HOLD_WORKSPACE, err);
    if (rc == CK_OK)
        rc = whole_buf(em, CK_EVENT_FREE, out, CK_HOLD_WORKSPACE, err);
    return rc;
}

static ck_hold buf_hold(ck_buf b)
{
    return b.kind == CK_BUF_GRAD || b.kind == CK_BUF_PARAMS ? CK_HOLD_GRADIENT : CK_HOLD_ACTIVATION;
}

int ck_program_run(ck_program_state *st, size_t k, const ck_instr *in, ck_event_cb cb, void *ctx,
                   uint64_t *peak, ck_err *err)
{
    int rc = check_instr(st, k, in, err);
    if (rc != CK_OK)
        return rc;
    emitter em = {st, in, cb, ctx, st->held, st->held};
    const ck_node *n = in->kind == CK_INSTR_GRAD || in->kind == CK_INSTR_ALLOC || in->kind == CK_INSTR_FREE ? NULL
                                                                               : &st->m->nodes[in->node];
    switch (in->kind) {
    case CK_INSTR_FORWARD:
        rc = forward_events(&em, n, err);
        break;
    case CK_INSTR_BACKWARD:
        rc = backward_events(&em, n, err);
        break;
    case CK_INSTR_LOSS:
        rc = loss_events(&em, n, err);
        break;
    case CK_INSTR_GRAD:
        rc = whole_buf(&em, CK_EVENT_ALLOC, in->buf, CK_HOLD_GRADIENT, err);
        break;
    case CK_INSTR_ALLOC:
        rc = whole_buf(&em, CK_EVENT_ALLOC, in->buf, CK_HOLD_ACTIVATION, err);
        break;
    case CK_INSTR_FREE:
        if (ck_program_state_has(st, in->buf)) /* else if_live: nothing to do */
            rc = whole_buf(&em, CK_EVENT_FREE, in->buf, buf_hold(in->buf), err);
        break;
    }
    st->held = em.held;
    if (peak)
        *peak = em.peak;
    return rc;
}

int ck_program_replay(const ck_model *m, const ck_program *p, uint64_t *live_after,
                      uint64_t *peak, ck_err *err)
{
    ck_program_state st;
    int rc = ck_program_state_init(&st, m, err);
    if (rc == CK_OK && m->training.grad_accum > 1)
        ck_program_state_hold_params(&st);
    for (size_t k = 0; k < p->n && rc == CK_OK; k++) {
        uint64_t top;
        rc = ck_program_run(&st, k, &p->instrs[k], NULL, NULL, &top, err);
        if (rc == CK_OK && live_after)
            live_after[k] = st.held;
        if (rc == CK_OK && peak)
            peak[k] = top;
    }
    ck_program_state_free(&st);
    return rc;
}
