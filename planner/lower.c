#include "planner/lower.h"

#include <stdlib.h>

#include "planner/size.h"

#define NO_READER SIZE_MAX

struct ck_lower {
    const ck_model *m;
    size_t n_stages;
    size_t *first;       /* n_stages + 1 */
    size_t *last_use;    /* per tensor: the last node reading it in the forward */
    size_t *first_saver; /* per tensor: the first node saving it for backward (NO_READER) */
    bool *kept;          /* per tensor: part of x̄ of the stage that makes it */
    ck_keep (*variants)[CK_N_KEEPS]; /* per stage: ck_lower_variants */
    size_t *n_variants;
    unsigned *steps;      /* per stage: bit s when a node reads step tensor s */
    size_t *checkpointer; /* per stage: its node with a checkpoint state, or NO_READER */
};

void ck_lower_stage_nodes(const ck_lower *l, size_t i, size_t *first, size_t *end)
{
    *first = l->first[i];
    *end = l->first[i + 1];
}

size_t ck_lower_stage_checkpointer(const ck_lower *l, size_t i)
{
    return l->checkpointer[i] == NO_READER ? SIZE_MAX : l->checkpointer[i];
}

size_t ck_lower_stage_input(const ck_lower *l, size_t i)
{
    return i == 0 ? 0 : l->m->nodes[l->first[i] - 1].output;
}

size_t ck_lower_stage_output(const ck_lower *l, size_t i)
{
    return l->m->nodes[l->first[i + 1] - 1].output;
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
            size_t t = ck_model_saved_tensor(n, &n->info.saved[s]);
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

/* ---- variants: what a saving forward keeps ---- */

static const char *const keep_names[CK_N_KEEPS] = {"all", "matmul", "attn", "none"};

const char *ck_lower_keep_name(ck_keep k)
{
    return k < CK_N_KEEPS ? keep_names[k] : "?";
}

static bool is_matmul(const ck_node *n)
{
    ck_op_kind k = n->op->kind;
    return k == CK_OP_LINEAR || k == CK_OP_LORA || k == CK_OP_ATTENTION || k == CK_OP_MOE;
}

/* Whether policy p drops node k's output (B recomputes it), or its internal tensors; the
 * stage's last node's output is x_{i+1}, always kept. */
static bool drops_output(const ck_lower *l, ck_keep p, size_t i, size_t k)
{
    if (k + 1 == l->first[i + 1])
        return false;
    return p == CK_KEEP_NONE || (p == CK_KEEP_MATMUL && !is_matmul(&l->m->nodes[k]));
}

static bool drops_internals(const ck_lower *l, ck_keep p, size_t k)
{
    const ck_node *n = &l->m->nodes[k];
    return p == CK_KEEP_NONE || (p == CK_KEEP_MATMUL && !is_matmul(n)) ||
           (p == CK_KEEP_ATTN && n->op->kind == CK_OP_ATTENTION);
}

static bool recomputes(const ck_lower *l, ck_keep p, size_t i, size_t k)
{
    return drops_output(l, p, i, k) || drops_internals(l, p, k);
}

/* Whether tensor t, made by node k of stage i, is kept under p: what "all" keeps or a node
 * that B may recompute reads, unless p drops it. */
static bool kept_under(const ck_lower *l, ck_keep p, size_t i, size_t k)
{
    const ck_model *m = l->m;
    size_t t = m->nodes[k].output;
    if (drops_output(l, p, i, k))
        return false;
    if (l->kept[t] || p == CK_KEEP_ALL)
        return l->kept[t];
    for (size_t r = k + 1; r < l->first[i + 1]; r++)
        for (size_t j = 0; j < m->nodes[r].op->arity; j++)
            if (m->nodes[r].inputs[j] == t && recomputes(l, p, i, r))
                return true;
    return false;
}

/* Whether p keeps less than "all" in stage i. */
static bool drops_something(const ck_lower *l, ck_keep p, size_t i)
{
    for (size_t k = l->first[i]; k < l->first[i + 1]; k++)
        if ((drops_output(l, p, i, k) && l->kept[l->m->nodes[k].output]) ||
            (drops_internals(l, p, k) && ck_program_has_saved(&l->m->nodes[k])))
            return true;
    return false;
}

static void find_variants(ck_lower *l, size_t i)
{
    bool matmul = false;
    for (size_t k = l->first[i]; k < l->first[i + 1]; k++)
        matmul = matmul || is_matmul(&l->m->nodes[k]);
    size_t n = 0;
    l->variants[i][n++] = CK_KEEP_ALL;
    if (matmul && drops_something(l, CK_KEEP_MATMUL, i))
        l->variants[i][n++] = CK_KEEP_MATMUL;
    if (drops_something(l, CK_KEEP_ATTN, i))
        l->variants[i][n++] = CK_KEEP_ATTN;
    if (drops_something(l, CK_KEEP_NONE, i))
        l->variants[i][n++] = CK_KEEP_NONE;
    l->n_variants[i] = n;
}

size_t ck_lower_variants(const ck_lower *l, size_t i, ck_keep out[CK_N_KEEPS])
{
    for (size_t v = 0; v < l->n_variants[i]; v++)
        out[v] = l->variants[i][v];
    return l->n_variants[i];
}

static ck_keep policy_of(const ck_lower *l, size_t i, size_t variant)
{
    return variant < l->n_variants[i] ? l->variants[i][variant] : CK_KEEP_ALL;
}

static void find_step_reads(ck_lower *l, size_t i)
{
    l->checkpointer[i] = NO_READER;
    for (size_t k = l->first[i]; k < l->first[i + 1]; k++) {
        const ck_op_info *info = &l->m->nodes[k].info;
        for (unsigned s = 0; s < CK_N_STEPS; s++)
            if (info->step_bytes[s])
                l->steps[i] |= 1u << s;
        if (info->checkpoint_bytes && l->checkpointer[i] == NO_READER)
            l->checkpointer[i] = k;
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
                    .kept = calloc(m->n_tensors, sizeof *l->kept),
                    .variants = malloc((n_stages + 1) * sizeof *l->variants),
                    .n_variants = malloc((n_stages + 1) * sizeof *l->n_variants),
                    .steps = calloc(n_stages + 1, sizeof *l->steps),
                    .checkpointer = malloc((n_stages + 1) * sizeof *l->checkpointer)};
    if (!l->first || !l->last_use || !l->first_saver || !l->kept || !l->variants || !l->n_variants ||
        !l->steps || !l->checkpointer) {
        ck_lower_free(l);
        return ck_err_oom(err);
    }
    for (size_t i = 0; i <= n_stages; i++)
        l->first[i] = first[i];
    ck_model_last_uses(m, l->last_use);
    find_kept(l);
    for (size_t i = 0; i < n_stages; i++) {
        find_variants(l, i);
        find_step_reads(l, i);
    }
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
    free(l->variants);
    free(l->n_variants);
    free(l->steps);
    free(l->checkpointer);
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

/* Whether tensor t, made in stage i, is kept by a saving forward under p. */
static bool kept_tensor(const ck_lower *l, ck_keep p, size_t i, size_t t)
{
    return kept_under(l, p, i, l->m->tensors[t].producer);
}

/* Whether stage i's input x_i is a tensor no backward reads (B i-1 frees its kept copy
 * only if live: a forward of stage i may have freed it, drop_kept_input). */
static bool unsaved_input(const ck_lower *l, size_t i)
{
    size_t in = ck_lower_stage_input(l, i);
    return i > 0 && !ck_model_is_static(l->m, in) && l->first_saver[in] == NO_READER;
}

/* The forward of stage i: a tensor of the stage is freed after its last reader unless the
 * saving forward (keep, under policy p) keeps it, and at once when nobody reads it. With
 * drop_input, the kept copy of x_i (in x̄_i) too, after its last reader. */
static void lower_forward(const ck_lower *l, size_t i, bool keep, ck_keep p, bool drop_input, sink *s)
{
    const ck_model *m = l->m;
    size_t in = ck_lower_stage_input(l, i), out = ck_lower_stage_output(l, i);
    for (size_t k = l->first[i]; k < l->first[i + 1]; k++) {
        const ck_node *n = &m->nodes[k];
        bool kept = keep && kept_under(l, p, i, k);
        push(s, CK_INSTR_FORWARD, k, keep && !drops_internals(l, p, k),
             ck_program_value(n->output, kept ? CK_COPY_KEPT : CK_COPY_PLAIN));
        for (size_t j = 0; j < n->op->arity; j++) {
            size_t t = n->inputs[j];
            if (first_input(n, j) && made_in(l, i, t) && l->last_use[t] == k &&
                !(keep && kept_tensor(l, p, i, t)))
                push(s, CK_INSTR_FREE, 0, false, ck_program_value(t, CK_COPY_PLAIN));
            if (drop_input && first_input(n, j) && t == in && l->last_use[t] == k)
                push(s, CK_INSTR_FREE, 0, false, ck_program_value(t, CK_COPY_KEPT));
        }
        if (n->output != out && !kept && l->last_use[n->output] <= k)
            push(s, CK_INSTR_FREE, 0, false, ck_program_value(n->output, CK_COPY_PLAIN));
    }
}

/* x̄_i as a whole: what stage i-1 kept under p. */
static void free_kept(const ck_lower *l, size_t i, ck_keep p, sink *s)
{
    for (size_t k = l->first[i - 1]; k < l->first[i]; k++) {
        const ck_node *n = &l->m->nodes[k];
        if (kept_under(l, p, i - 1, k))
            push(s, CK_INSTR_FREE, 0, false, ck_program_value(n->output, CK_COPY_KEPT));
        if (ck_program_has_saved(n) && !drops_internals(l, p, k))
            push(s, CK_INSTR_FREE, 0, false, ck_program_saved(k, CK_COPY_KEPT));
    }
}

/* Which nodes of stage i B recomputes under p: those whose dropped output "all" keeps or
 * whose dropped internals their backward reads, and the makers of what they read that was
 * not kept. A reverse sweep: readers come after makers. redo and needed (whether node k's
 * output is read by one recomputed) have an entry per node of the stage, from its first:
 * the model's tensors are too many to clear for each stage. */
static void find_recomputed(const ck_lower *l, ck_keep p, size_t i, bool *redo, bool *needed)
{
    const ck_model *m = l->m;
    size_t first = l->first[i];
    for (size_t k = l->first[i + 1]; k-- > first;) {
        const ck_node *n = &m->nodes[k];
        redo[k - first] = (drops_output(l, p, i, k) && (l->kept[n->output] || needed[k - first])) ||
                          (drops_internals(l, p, k) && ck_program_has_saved(n));
        if (!redo[k - first])
            continue;
        for (size_t j = 0; j < n->op->arity; j++) {
            size_t t = n->inputs[j];
            if (made_in(l, i, t) && !kept_tensor(l, p, i, t))
                needed[m->tensors[t].producer - first] = true;
        }
    }
}

/* The forwards B i runs first under p, which leave live what "all" keeps (and what p kept
 * beyond it, freed here): recomputed outputs "all" keeps go to their kept copy, the others
 * are plain and freed after their last reader among the recomputed nodes; recomputed
 * internals are kept unless p kept them. */
static void lower_recompute(const ck_lower *l, size_t i, ck_keep p, sink *s)
{
    const ck_model *m = l->m;
    size_t first = l->first[i], end = l->first[i + 1];
    bool *redo = calloc(end - first, sizeof *redo);
    bool *needed = calloc(end - first, sizeof *needed);
    size_t *last = calloc(end - first, sizeof *last); /* per node: its output's last recomputed reader, + 1 */
    s->ok = s->ok && redo && needed && last;
    if (s->ok)
        find_recomputed(l, p, i, redo, needed);
    for (size_t k = first; s->ok && k < end; k++)
        for (size_t j = 0; redo[k - first] && j < m->nodes[k].op->arity; j++)
            if (made_in(l, i, m->nodes[k].inputs[j]))
                last[m->tensors[m->nodes[k].inputs[j]].producer - first] = k + 1;
    for (size_t k = first; s->ok && k < end; k++) {
        const ck_node *n = &m->nodes[k];
        if (!redo[k - first])
            continue;
        bool restored = drops_output(l, p, i, k) && l->kept[n->output];
        push(s, CK_INSTR_FORWARD, k, drops_internals(l, p, k),
             ck_program_value(n->output, restored ? CK_COPY_KEPT : CK_COPY_PLAIN));
        for (size_t j = 0; j < n->op->arity; j++) {
            size_t t = n->inputs[j];
            size_t maker = made_in(l, i, t) ? m->tensors[t].producer : 0;
            if (first_input(n, j) && made_in(l, i, t) && redo[maker - first] && last[maker - first] == k + 1 &&
                !(drops_output(l, p, i, maker) && l->kept[t]))
                push(s, CK_INSTR_FREE, 0, false, ck_program_value(t, CK_COPY_PLAIN));
        }
        if (!restored && last[k - first] == 0)
            push(s, CK_INSTR_FREE, 0, false, ck_program_value(n->output, CK_COPY_PLAIN));
    }
    for (size_t k = first; s->ok && k < end; k++)
        if (kept_under(l, p, i, k) && !l->kept[m->nodes[k].output])
            push(s, CK_INSTR_FREE, 0, false, ck_program_value(m->nodes[k].output, CK_COPY_KEPT));
    free(redo);
    free(needed);
    free(last);
}

/* Whether a node of [from, k) reads tensor a or b. */
static bool read_between(const ck_model *m, size_t from, size_t k, size_t a, size_t b)
{
    for (size_t j = from; j < k; j++)
        for (size_t in = 0; in < m->nodes[j].op->arity; in++)
            if (m->nodes[j].inputs[in] == a || m->nodes[j].inputs[in] == b)
                return true;
    return false;
}

/* Whether node k of stage i hands its output's gradient on as PyTorch does (ck_instr.pass).
 * An add's to both inputs: both require gradients and get their first from k (k is their
 * last reader), and the sharer, made in the stage, is read by nothing whose backward runs
 * before its producer's; nor is the owner, whose buffer it is meanwhile, and whose other
 * gradients would write into the sharer's. A lora's to its base output (PEFT's `result +
 * lora_B(...) * scaling`): it requires a gradient and k alone reads it. */
static bool can_pass(const ck_lower *l, size_t i, size_t k)
{
    const ck_model *m = l->m;
    size_t owner, sharer;
    if (!ck_program_pass_inputs(m, &m->nodes[k], &owner, &sharer) || !ck_program_has_grad(m, owner) ||
        l->last_use[owner] != k)
        return false;
    if (sharer == SIZE_MAX) {
        size_t p = m->tensors[owner].producer;
        return p != CK_NO_NODE && !read_between(m, p + 1, k, owner, owner);
    }
    if (!ck_program_has_grad(m, sharer) || l->last_use[sharer] != k)
        return false;
    size_t p = m->tensors[sharer].producer;
    return p != CK_NO_NODE && p >= l->first[i] && !read_between(m, p, k, owner, sharer);
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
    if (ck_program_has_saved(n) && !n->info.n_phases) /* a phased one frees its own */
        push(s, CK_INSTR_FREE, 0, false, ck_program_saved(k, CK_COPY_KEPT));
    for (size_t j = 0; j < n->info.n_saved; j++) {
        size_t t = ck_model_saved_tensor(n, &n->info.saved[j]);
        bool again = false;
        for (size_t e = 0; e < j; e++)
            again = again || ck_model_saved_tensor(n, &n->info.saved[e]) == t;
        if (t != SIZE_MAX && !again && made_in(l, i, t) && l->first_saver[t] == k)
            push(s, CK_INSTR_FREE, 0, false, ck_program_value(t, CK_COPY_KEPT));
    }
}

/* Whether the loss frees x_L between its passes: neither its backward nor any other reads
 * it, as with PyTorch's unfused cross-entropy after a linear head (the chain holds x_L to
 * B L-1: its figures are then a bound). */
bool ck_lower_loss_frees_input(const ck_lower *l)
{
    size_t x = ck_lower_stage_output(l, l->n_stages - 1);
    return ck_program_loss_frees_input(l->m) && l->first_saver[x] == NO_READER;
}

/* B i: each node's backward, in reverse, frees what no later backward reads. y_i is
 * allocated by the first backward that adds into it, when PyTorch's autograd makes it (the
 * chain counts it from the start: its figure is then a bound). The last stage's kept
 * output is gone already when the loss read and freed it. */
static void lower_backward(const ck_lower *l, size_t i, sink *s)
{
    const ck_model *m = l->m;
    size_t out = ck_lower_stage_output(l, i);
    if (l->first_saver[out] == NO_READER || l->first_saver[out] >= l->first[i + 1])
        s->ok = s->ok && ck_program_push(s->p, (ck_instr){.kind = CK_INSTR_FREE,
                                                          .buf = ck_program_value(out, CK_COPY_KEPT),
                                                          .if_live = (i + 1 == l->n_stages && ck_lower_loss_frees_input(l)) ||
                                                                     (i + 1 < l->n_stages && unsaved_input(l, i + 1))});
    for (size_t k = l->first[i + 1]; k-- > l->first[i];) {
        if (!m->nodes[k].backward) { /* nothing it made requires a gradient but a leaf's */
            if (ck_model_input_leaf(&m->nodes[k])) /* its .grad, held to the end: B 0 ends it */
                push(s, CK_INSTR_FREE, 0, false, ck_program_grad(m->nodes[k].output));
            continue;
        }
        bool pass = can_pass(l, i, k);
        s->ok = s->ok && ck_program_push(s->p, (ck_instr){.kind = CK_INSTR_BACKWARD, .node = k,
                                                          .pass = pass});
        free_after_backward(l, i, k, pass, s);
    }
}

/* The variant of the x̄_i among e's frees (0 when it frees none). */
static size_t freed_variant(const ck_action_effect *e, size_t i)
{
    for (size_t f = 0; f < e->n_frees; f++)
        if (e->frees[f].kind == CK_VALUE_XBAR && e->frees[f].index == i)
            return e->frees[f].variant;
    return 0;
}

/* The plain x_i an action frees (F_none, B), unless x_i is static and was never a buffer. */
static void free_plain_input(const ck_lower *l, size_t i, sink *s)
{
    size_t in = ck_lower_stage_input(l, i);
    if (!ck_model_is_static(l->m, in))
        push(s, CK_INSTR_FREE, 0, false, ck_program_value(in, CK_COPY_PLAIN));
}

/* Whether F_all a, its stage's only forward before its backward, frees the kept copy of
 * its input after its last reader: it reads that copy (x_i is not live plain), no backward
 * reads x_i, and B i will not recompute from it (the variant keeps all). PyTorch frees
 * such a tensor there: a 16-bit layer input that hf's RMSNorm casts to f32, keeping the
 * copy, once the residual add has read it. */
static bool drops_kept_input(const ck_lower *l, const ck_action *a, const ck_action_effect *e,
                             bool sole_forward)
{
    return sole_forward && a->kind == CK_F_ALL && e->input.kind == CK_VALUE_XBAR &&
           policy_of(l, a->stage, a->variant) == CK_KEEP_ALL && unsaved_input(l, a->stage);
}

/* The step tensors made before an action (alloc) or freed after it, those of `bits` the
 * model has. */
static void step_tensors(const ck_lower *l, ck_instr_kind kind, unsigned bits, sink *s)
{
    for (unsigned t = 0; t < CK_N_STEPS; t++)
        if (bits >> t & 1 && l->m->step_bytes[t])
            push(s, kind, 0, false, ck_program_step((ck_step)t));
}

int ck_lower_action(const ck_lower *l, const ck_action *a, const ck_action_effect *e,
                    const ck_lower_context *ctx, ck_program *out, ck_err *err)
{
    static const ck_lower_context alone = {0};
    sink s = {out, true};
    size_t i = a->stage;
    ctx = ctx ? ctx : &alone;
    step_tensors(l, CK_INSTR_ALLOC, ctx->makes_steps, &s);
    if (ctx->checkpoints)
        push(&s, CK_INSTR_ALLOC, 0, false, ck_program_checkpoint(l->checkpointer[i]));
    switch (a->kind) {
    case CK_F_ALL:
    case CK_F_CK:
    case CK_F_NONE:
        lower_forward(l, i, a->kind == CK_F_ALL, policy_of(l, i, a->kind == CK_F_ALL ? a->variant : 0),
                      drops_kept_input(l, a, e, ctx->sole_forward), &s);
        break;
    case CK_LOSS:
        s.ok = s.ok && ck_program_push(out, (ck_instr){.kind = CK_INSTR_LOSS, .node = l->m->n_nodes - 1,
                                                        .frees_input = ck_lower_loss_frees_input(l)});
        break;
    case CK_B: {
        ck_keep p = policy_of(l, i, freed_variant(e, i + 1));
        if (p != CK_KEEP_ALL)
            lower_recompute(l, i, p, &s);
        lower_backward(l, i, &s);
        break;
    }
    case CK_N_ACTIONS:
        return ck_err_fail(err, CK_ERR_RUNTIME, "lower: no such action");
    }
    /* The frees of the effect that the instructions above have not done yet. */
    for (size_t f = 0; f < e->n_frees; f++) {
        ck_value v = e->frees[f];
        if (v.kind == CK_VALUE_X)
            free_plain_input(l, v.index, &s);
        else if (v.kind == CK_VALUE_XBAR && a->kind == CK_F_NONE)
            free_kept(l, v.index, policy_of(l, v.index - 1, v.variant), &s);
    }
    if (ctx->frees_checkpoint)
        push(&s, CK_INSTR_FREE, 0, false, ck_program_checkpoint(l->checkpointer[i]));
    step_tensors(l, CK_INSTR_FREE, ctx->frees_steps, &s);
    return s.ok ? CK_OK : ck_err_oom(err);
}

/* Per stage of s: where its first forward and its first B are (SIZE_MAX: none). */
static void find_passes(const ck_lower *l, const ck_schedule *s, size_t *first_forward, size_t *b_at)
{
    for (size_t i = 0; i < l->n_stages; i++)
        first_forward[i] = b_at[i] = SIZE_MAX;
    for (size_t k = 0; k < s->n; k++) {
        const ck_action *a = &s->actions[k];
        if (a->kind == CK_LOSS || a->kind >= CK_N_ACTIONS || a->stage >= l->n_stages)
            continue;
        size_t *at = a->kind == CK_B ? &b_at[a->stage] : &first_forward[a->stage];
        if (*at == SIZE_MAX)
            *at = k;
    }
}

/* The first action of s that runs stage i's forward keeping what its backward reads (an
 * F_all, or the recomputation of its B), or SIZE_MAX. */
static size_t first_saving_pass(const ck_schedule *s, size_t i)
{
    for (size_t k = 0; k < s->n; k++)
        if (s->actions[k].stage == i && (s->actions[k].kind == CK_F_ALL || s->actions[k].kind == CK_B))
            return k;
    return SIZE_MAX;
}

/* The step tensors' and checkpoint states' lifetimes over s (ck_lower_contexts). */
static void place_steps(const ck_lower *l, const ck_schedule *s, const size_t *first_forward,
                        const size_t *b_at, ck_lower_context *out)
{
    size_t first_layer = SIZE_MAX, last_layer = SIZE_MAX, args_to = SIZE_MAX, tables_to = SIZE_MAX;
    size_t leaf_at = SIZE_MAX;
    const unsigned tables = 1u << CK_STEP_TABLES, leaf = 1u << CK_STEP_LEAF;
    for (size_t i = 0; i < l->n_stages; i++) {
        if (l->steps[i] & leaf && leaf_at == SIZE_MAX)
            leaf_at = first_saving_pass(s, i);
        if (!(l->steps[i] & ~leaf) || first_forward[i] == SIZE_MAX)
            continue;
        first_layer = first_layer == SIZE_MAX ? i : first_layer;
        last_layer = i;
        bool checkpointed = s->actions[first_forward[i]].kind != CK_F_ALL && b_at[i] != SIZE_MAX;
        if (checkpointed && args_to == SIZE_MAX)
            args_to = b_at[i];
        if ((checkpointed || l->steps[i] & tables) && tables_to == SIZE_MAX)
            tables_to = b_at[i];
        if (checkpointed && l->checkpointer[i] != NO_READER) {
            out[first_forward[i]].checkpoints = true;
            out[b_at[i]].frees_checkpoint = true;
        }
    }
    if (leaf_at != SIZE_MAX) {
        out[leaf_at].makes_steps |= leaf;
        out[s->n - 1].frees_steps |= leaf;
    }
    if (first_layer == SIZE_MAX)
        return;
    size_t forward_end = first_forward[last_layer];
    out[first_forward[first_layer]].makes_steps |= ~leaf;
    out[args_to == SIZE_MAX ? forward_end : args_to].frees_steps |= ~(tables | leaf);
    out[tables_to == SIZE_MAX ? forward_end : tables_to].frees_steps |= tables;
}

int ck_lower_contexts(const ck_lower *l, const ck_schedule *s, ck_lower_context *out, ck_err *err)
{
    bool *sole = malloc((s->n + 1) * sizeof *sole);
    size_t *first_forward = malloc((l->n_stages + 1) * sizeof *first_forward);
    size_t *b_at = malloc((l->n_stages + 1) * sizeof *b_at);
    int rc = sole && first_forward && b_at ? ck_schedule_sole_forwards(s, l->n_stages, sole, err) : ck_err_oom(err);
    if (rc == CK_OK) {
        for (size_t k = 0; k < s->n; k++)
            out[k] = (ck_lower_context){.sole_forward = sole[k]};
        find_passes(l, s, first_forward, b_at);
        place_steps(l, s, first_forward, b_at, out);
    }
    free(sole);
    free(first_forward);
    free(b_at);
    return rc;
}

int ck_lower_schedule(const ck_lower *l, const ck_chain *c, const ck_schedule *s,
                      ck_program *out, size_t *action_end, ck_err *err)
{
    ck_action_state st;
    ck_lower_context *ctx = malloc((s->n + 1) * sizeof *ctx);
    int rc = ctx ? ck_lower_contexts(l, s, ctx, err) : ck_err_oom(err);
    if (rc == CK_OK)
        rc = ck_action_state_init(&st, c, err);
    if (rc != CK_OK) {
        free(ctx);
        return rc;
    }
    for (size_t k = 0; k < s->n && rc == CK_OK; k++) {
        ck_action_effect e;
        rc = ck_action_describe(&st, k, &s->actions[k], &e, err);
        if (rc == CK_OK)
            rc = ck_lower_action(l, &s->actions[k], &e, &ctx[k], out, err);
        if (rc == CK_OK)
            rc = ck_action_apply(&st, k, &s->actions[k], &e, NULL, err);
        if (rc == CK_OK && action_end)
            action_end[k] = out->n;
    }
    ck_action_state_free(&st);
    free(ctx);
    return rc;
}

/* The optimizer step runs after the last operation, once the step's activations are
 * freed, on the parameter gradients and its own temporaries: its peak counts as that
 * operation's. */
static int add_optimizer_step(const ck_model *m, size_t last, uint64_t *peak, ck_replay *out, ck_err *err)
{
    uint64_t step = ck_program_step_bytes(m);
    if (step == UINT64_MAX)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: the optimizer step's memory exceeds 2^64 bytes", m->file);
    if (step > peak[last])
        peak[last] = step;
    if (peak[last] > out->peak_bytes) {
        out->peak_bytes = peak[last];
        out->peak_op = last;
    }
    return CK_OK;
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
    }
    if (rc == CK_OK && s->n)
        rc = add_optimizer_step(l->m, s->n - 1, peak, out, err);
    for (size_t k = 0; k < s->n && rc == CK_OK; k++) {
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
