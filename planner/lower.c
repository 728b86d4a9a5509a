#include "planner/lower.h"

#include <stdlib.h>

#define NO_READER SIZE_MAX

struct ck_lower {
    const ck_model *m;
    size_t n_stages;
    size_t *first;       /* n_stages + 1 */
    size_t *last_use;    /* per tensor: the last node reading it in the forward */
    size_t *first_saver; /* per tensor: the first node saving it for backward (NO_READER) */
    bool *kept;          /* per tensor: part of x̄ of the stage that makes it */
};

size_t ck_lower_stage_input(const ck_lower *l, size_t i)
{
    return i == 0 ? 0 : l->m->nodes[l->first[i] - 1].output;
}

size_t ck_lower_stage_output(const ck_lower *l, size_t i)
{
    return l->m->nodes[l->first[i + 1] - 1].output;
}

/* The tensor a saved entry of node n refers to, or SIZE_MAX for an internal one. */
static size_t saved_tensor(const ck_node *n, const ck_saved *sv)
{
    return sv->kind == CK_SAVE_OUTPUT ? n->output
           : sv->kind == CK_SAVE_INPUT ? n->inputs[sv->input]
                                       : SIZE_MAX;
}

static bool made_in(const ck_lower *l, size_t i, size_t t)
{
    size_t p = l->m->tensors[t].producer;
    return p != CK_NO_NODE && p >= l->first[i] && p < l->first[i + 1];
}

static void find_kept(ck_lower *l)
{
    const ck_model *m = l->m;
    for (size_t t = 0; t < m->n_tensors; t++)
        l->first_saver[t] = NO_READER;
    for (size_t k = m->n_nodes - 1; k-- > 0;) { /* backwards: the first saver wins */
        const ck_node *n = &m->nodes[k];
        for (size_t s = 0; s < n->info.n_saved; s++) {
            size_t t = saved_tensor(n, &n->info.saved[s]);
            if (t != SIZE_MAX)
                l->first_saver[t] = k;
        }
    }
    for (size_t i = 0; i < l->n_stages; i++)
        for (size_t k = l->first[i]; k < l->first[i + 1]; k++) {
            size_t t = m->nodes[k].output;
            size_t saver = l->first_saver[t];
            l->kept[t] = t == ck_lower_stage_output(l, i) ||
                         (saver != NO_READER && saver < l->first[i + 1]);
        }
}

int ck_lower_create(const ck_model *m, const size_t *first, size_t n_stages, ck_lower **out,
                    ck_err *err)
{
    ck_lower *l = calloc(1, sizeof *l);
    if (!l)
        return ck_err_oom(err);
    *l = (ck_lower){.m = m, .n_stages = n_stages, .first = malloc((n_stages + 1) * sizeof *l->first),
                    .last_use = malloc(m->n_tensors * sizeof *l->last_use),
                    .first_saver = malloc(m->n_tensors * sizeof *l->first_saver),
                    .kept = calloc(m->n_tensors, sizeof *l->kept)};
    if (!l->first || !l->last_use || !l->first_saver || !l->kept) {
        ck_lower_free(l);
        return ck_err_oom(err);
    }
    for (size_t i = 0; i <= n_stages; i++)
        l->first[i] = first[i];
    ck_model_last_uses(m, l->last_use);
    find_kept(l);
    *out = l;
    return CK_OK;
}

void ck_lower_free(ck_lower *l)
{
    if (!l)
        return;
    free(l->first);
    free(l->last_use);
    free(l->first_saver);
    free(l->kept);
    free(l);
}

/* ---- emitting ---- */

typedef struct {
    ck_program *p;
    bool ok;
} sink;

static void push(sink *s, ck_instr_kind kind, size_t node, bool keep, ck_buf buf)
{
    s->ok = s->ok && ck_program_push(s->p, (ck_instr){.kind = kind, .node = node, .keep = keep, .buf = buf});
}

/* Whether node k's input i is the first occurrence of its tensor among k's inputs. */
static bool first_input(const ck_node *n, size_t i)
{
    return i == 0 || n->inputs[0] != n->inputs[i];
}

/* The forward of stage i: a tensor of the stage is freed after its last reader unless the
 * saving forward keeps it, and at once when nobody reads it. */
static void lower_forward(const ck_lower *l, size_t i, bool keep, sink *s)
{
    const ck_model *m = l->m;
    size_t out = ck_lower_stage_output(l, i);
    for (size_t k = l->first[i]; k < l->first[i + 1]; k++) {
        const ck_node *n = &m->nodes[k];
        bool kept = keep && l->kept[n->output];
        push(s, CK_INSTR_FORWARD, k, keep, ck_program_value(n->output, kept ? CK_COPY_KEPT : CK_COPY_PLAIN));
        for (size_t j = 0; j < n->op->arity; j++) {
            size_t t = n->inputs[j];
            if (first_input(n, j) && made_in(l, i, t) && l->last_use[t] == k && !(keep && l->kept[t]))
                push(s, CK_INSTR_FREE, 0, false, ck_program_value(t, CK_COPY_PLAIN));
        }
        if (n->output != out && !kept && l->last_use[n->output] <= k)
            push(s, CK_INSTR_FREE, 0, false, ck_program_value(n->output, CK_COPY_PLAIN));
    }
}

/* x̄_i as a whole: what stage i-1 kept. */
static void free_kept(const ck_lower *l, size_t i, sink *s)
{
    for (size_t k = l->first[i - 1]; k < l->first[i]; k++) {
        const ck_node *n = &l->m->nodes[k];
        if (l->kept[n->output])
            push(s, CK_INSTR_FREE, 0, false, ck_program_value(n->output, CK_COPY_KEPT));
        if (ck_program_has_saved(n))
            push(s, CK_INSTR_FREE, 0, false, ck_program_saved(k, CK_COPY_KEPT));
    }
}

/* Whether add node k of stage i hands its output's gradient to its inputs as PyTorch does
 * (ck_instr.pass): both inputs require gradients and get their first from k (k is their
 * last reader), and the sharer, made in the stage, is read by nothing whose backward runs
 * before its producer's; nor is the owner, whose buffer it is meanwhile, and whose other
 * gradients would write into the sharer's. */
static bool can_pass(const ck_lower *l, size_t i, size_t k)
{
    const ck_model *m = l->m;
    size_t owner, sharer;
    if (!ck_program_pass_inputs(m, &m->nodes[k], &owner, &sharer) ||
        !ck_program_has_grad(m, owner) || !ck_program_has_grad(m, sharer) ||
        l->last_use[owner] != k || l->last_use[sharer] != k)
        return false;
    size_t p = m->tensors[sharer].producer;
    if (p == CK_NO_NODE || p < l->first[i])
        return false;
    for (size_t j = p; j < k; j++)
        for (size_t in = 0; in < m->nodes[j].op->arity; in++)
            if (m->nodes[j].inputs[in] == owner || m->nodes[j].inputs[in] == sharer)
                return false;
    return true;
}

/* What node k of stage i was the last backward to read: its output's gradient (unless a
 * pass handed it on), its internals, and the kept tensors of the stage whose first saver
 * it is. */
static void free_after_backward(const ck_lower *l, size_t i, size_t k, bool pass, sink *s)
{
    const ck_model *m = l->m;
    const ck_node *n = &m->nodes[k];
    if (!pass && ck_program_has_grad(m, n->output) &&
        (l->last_use[n->output] > k || k + 1 == l->first[i + 1]))
        push(s, CK_INSTR_FREE, 0, false, ck_program_grad(n->output));
    if (ck_program_has_saved(n))
        push(s, CK_INSTR_FREE, 0, false, ck_program_saved(k, CK_COPY_KEPT));
    for (size_t j = 0; j < n->info.n_saved; j++) {
        size_t t = saved_tensor(n, &n->info.saved[j]);
        bool again = false;
        for (size_t e = 0; e < j; e++)
            again = again || saved_tensor(n, &n->info.saved[e]) == t;
        if (t != SIZE_MAX && !again && made_in(l, i, t) && l->first_saver[t] == k)
            push(s, CK_INSTR_FREE, 0, false, ck_program_value(t, CK_COPY_KEPT));
    }
}

/* B i: each node's backward, in reverse, frees what no later backward reads. y_i is
 * allocated by the first backward that adds into it, when PyTorch's autograd makes it (the
 * chain counts it from the start: its figure is then a bound). */
static void lower_backward(const ck_lower *l, size_t i, sink *s)
{
    const ck_model *m = l->m;
    size_t out = ck_lower_stage_output(l, i);
    if (l->first_saver[out] == NO_READER || l->first_saver[out] >= l->first[i + 1])
        push(s, CK_INSTR_FREE, 0, false, ck_program_value(out, CK_COPY_KEPT));
    for (size_t k = l->first[i + 1]; k-- > l->first[i];) {
        if (!m->nodes[k].backward) /* nothing it made requires a gradient: nothing to free */
            continue;
        bool pass = can_pass(l, i, k);
        s->ok = s->ok && ck_program_push(s->p, (ck_instr){.kind = CK_INSTR_BACKWARD, .node = k,
                                                          .pass = pass});
        free_after_backward(l, i, k, pass, s);
    }
}

/* The plain x_i an action frees (F_none, B), unless x_i is static and was never a buffer. */
static void free_plain_input(const ck_lower *l, size_t i, sink *s)
{
    size_t in = ck_lower_stage_input(l, i);
    if (!ck_model_is_static(l->m, in))
        push(s, CK_INSTR_FREE, 0, false, ck_program_value(in, CK_COPY_PLAIN));
}

int ck_lower_action(const ck_lower *l, const ck_action *a, const ck_action_effect *e,
                    ck_program *out, ck_err *err)
{
    sink s = {out, true};
    size_t i = a->stage;
    switch (a->kind) {
    case CK_F_ALL:
    case CK_F_CK:
    case CK_F_NONE:
        lower_forward(l, i, a->kind == CK_F_ALL, &s);
        break;
    case CK_LOSS: {
        size_t x = ck_lower_stage_output(l, l->n_stages - 1);
        if (ck_program_has_grad(l->m, x))
            push(&s, CK_INSTR_GRAD, 0, false, ck_program_grad(x));
        push(&s, CK_INSTR_LOSS, l->m->n_nodes - 1, false, (ck_buf){0});
        break;
    }
    case CK_B:
        lower_backward(l, i, &s);
        break;
    case CK_N_ACTIONS:
        return ck_err_fail(err, CK_ERR_RUNTIME, "lower: no such action");
    }
    /* The frees of the effect that the instructions above have not done yet. */
    for (size_t f = 0; f < e->n_frees; f++) {
        ck_value v = e->frees[f];
        if (v.kind == CK_VALUE_X)
            free_plain_input(l, v.index, &s);
        else if (v.kind == CK_VALUE_XBAR && a->kind == CK_F_NONE)
            free_kept(l, v.index, &s);
    }
    return s.ok ? CK_OK : ck_err_oom(err);
}

int ck_lower_schedule(const ck_lower *l, const ck_chain *c, const ck_schedule *s,
                      ck_program *out, size_t *action_end, ck_err *err)
{
    ck_action_state st;
    int rc = ck_action_state_init(&st, c, err);
    for (size_t k = 0; k < s->n && rc == CK_OK; k++) {
        ck_action_effect e;
        rc = ck_action_describe(&st, k, &s->actions[k], &e, err);
        if (rc == CK_OK)
            rc = ck_lower_action(l, &s->actions[k], &e, out, err);
        if (rc == CK_OK)
            rc = ck_action_apply(&st, k, &s->actions[k], &e, NULL, err);
        if (rc == CK_OK && action_end)
            action_end[k] = out->n;
    }
    ck_action_state_free(&st);
    return rc;
}

int ck_lower_replay(const ck_lower *l, const ck_chain *c, const ck_schedule *s, ck_replay *out,
                    uint64_t *live_after, uint64_t *op_peak, ck_err *err)
{
    int rc = ck_schedule_replay(c, s, out, NULL, NULL, err);
    ck_program p = {0};
    size_t *end = rc == CK_OK ? malloc((s->n + 1) * sizeof *end) : NULL;
    uint64_t *after = end ? malloc((s->n + 1) * sizeof *after) : NULL;
    uint64_t *peak = after ? malloc((s->n + 1) * sizeof *peak) : NULL;
    if (rc == CK_OK && !peak)
        rc = ck_err_oom(err);
    if (rc == CK_OK)
        rc = ck_lower_schedule(l, c, s, &p, end, err);
    uint64_t *instr_after = NULL, *instr_peak = NULL;
    if (rc == CK_OK && (!(instr_after = malloc((p.n + 1) * sizeof *instr_after)) ||
                        !(instr_peak = malloc((p.n + 1) * sizeof *instr_peak))))
        rc = ck_err_oom(err);
    if (rc == CK_OK)
        rc = ck_program_replay(l->m, &p, instr_after, instr_peak, err);
    out->peak_bytes = c->input_bytes;
    for (size_t k = 0, j = 0; k < s->n && rc == CK_OK; k++) {
        uint64_t top = 0, held = k ? after[k - 1] : c->input_bytes;
        for (; j < end[k]; j++) {
            top = instr_peak[j] > top ? instr_peak[j] : top;
            held = instr_after[j];
        }
        after[k] = held;
        peak[k] = top > held ? top : held;
        if (peak[k] > out->peak_bytes) {
            out->peak_bytes = peak[k];
            out->peak_op = k;
        }
        if (live_after)
            live_after[k] = after[k];
        if (op_peak)
            op_peak[k] = peak[k];
    }
    free(instr_after);
    free(instr_peak);
    free(end);
    free(after);
    free(peak);
    ck_program_free(&p);
    return rc;
}
