#include "planner/derive.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/lower.h"
#include "planner/program.h"
#include "planner/size.h"

void ck_derive_cost_model_default(ck_cost_model *cm)
{
    cm->gemm_flops = 100e9;
    cm->mem_bandwidth = 20e9;
}

double ck_derive_op_time(const ck_cost_model *cm, uint64_t flops, uint64_t bytes)
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

/* Internal tensors belong to one node and are always distinct; references count once. */
static bool sum_saved(const ck_model *m, size_t first, size_t end, bool *seen, uint64_t *bytes)
{
    uint64_t sum = 0;
    for (size_t k = first; k < end; k++) {
        const ck_node *n = &m->nodes[k];
        for (size_t s = 0; s < n->info.n_saved; s++) {
            const ck_saved *sv = &n->info.saved[s];
            size_t t = ck_model_saved_tensor(n, sv);
            if (t != SIZE_MAX) {
                if (ck_model_is_static(m, t) || seen[t])
                    continue;
                seen[t] = true;
            }
            if (!ck_size_add(sum, sv->bytes, &sum))
                return false;
        }
    }
    *bytes = sum;
    return true;
}

int ck_derive_saved_bytes(const ck_model *m, size_t first, size_t end, uint64_t *out, ck_err *err)
{
    if (first > end || end > m->n_nodes)
        return ck_err_fail(err, CK_ERR_RUNTIME, "saved bytes of nodes [%zu, %zu): the model has %zu nodes",
                       first, end, m->n_nodes);
    bool *seen = calloc(m->n_tensors, sizeof *seen);
    if (!seen)
        return ck_err_oom(err);
    bool ok = sum_saved(m, first, end, seen, out);
    free(seen);
    return ok ? CK_OK : overflow(m, "the saved bytes", err);
}

/* What a layout divides each part by: 1 for the parts its stage keeps whole. */
typedef struct {
    uint64_t params, grads, optimizer; /* optimizer: its state and the master weights */
} split;

static split split_of(const ck_layout *l)
{
    uint64_t n = l ? ck_layout_ranks(l) : 1, zero = l ? l->zero : 0;
    return (split){zero >= 3 ? n : 1, zero >= 2 ? n : 1, zero >= 1 ? n : 1};
}

uint64_t ck_derive_share(uint64_t count, uint64_t n)
{
    return ck_size_ceil_div(count, n);
}

/* One rank's share of count units split over n ranks (ck_derive_share), times unit bytes,
 * added to *sum. */
static bool add_share(uint64_t count, uint64_t n, uint64_t unit, uint64_t *sum)
{
    uint64_t bytes;
    return ck_size_mul(ck_derive_share(count, n), unit, &bytes) && ck_size_add(*sum, bytes, sum);
}

/* A tensor's optimizer state of `state` bytes, shared over n ranks: state kept element by
 * element (momentum, Adam) follows the element shard, ⌈E/n⌉ elements; other state
 * (Adafactor's factors, 8-bit Adam's blocks) is split by bytes, ⌈S/n⌉. */
static bool add_state_share(uint64_t numel, uint64_t state, uint64_t n, uint64_t *sum)
{
    if (numel > 0 && state % numel == 0)
        return add_share(numel, n, state / numel, sum);
    return add_share(state, n, 1, sum);
}

/* A node's parameters, and for a trainable one their gradients, optimizer state and
 * master weights: one rank's shares of each tensor of them. */
static bool add_node_state(const ck_training *t, const ck_node *n, split d, ck_static_mem *out)
{
    bool ok = true;
    for (size_t i = 0; ok && i < n->info.n_param_tensors; i++) {
        const ck_param *p = &n->info.params[i];
        uint64_t state;
        ok = add_share(p->numel, d.params, ck_dtype_bytes(t->param_dtype), &out->params) &&
             (!n->trainable ||
              (add_share(p->numel, d.grads, ck_dtype_bytes(t->grad_dtype), &out->grads) &&
               add_share(p->numel, d.optimizer, t->master_weights ? 4 : 0, &out->master) &&
               ck_training_state_bytes(t, p, &state) &&
               add_state_share(p->numel, state, d.optimizer, &out->optimizer)));
    }
    return ok;
}

static uint64_t group_params(const ck_model *m, const ck_group *g)
{
    uint64_t n = 0;
    for (size_t k = g->first; k < g->end; k++)
        n += m->nodes[k].info.n_params; /* below the model's total, checked by the caller */
    return n;
}

static void count_parts(const ck_model *m, ck_param_parts *out)
{
    size_t first = m->n_groups, last = 0;
    for (size_t g = 0; g < m->n_groups; g++)
        if (m->groups[g].instance) {
            first = first < g ? first : g;
            last = g;
            out->n_layers++;
        }
    if (!out->n_layers)
        return;
    out->per_layer = group_params(m, &m->groups[first]);
    for (size_t g = 0; g < m->n_groups; g++) {
        uint64_t n = group_params(m, &m->groups[g]);
        uint64_t *part = g < first ? &out->embeddings : g > last ? &out->head : &out->layers;
        *part += n;
        if (m->groups[g].instance && n != out->per_layer)
            out->per_layer = 0;
    }
}

void ck_derive_unit_counts(const ck_model *m, size_t first, size_t end, uint64_t *params,
                           uint64_t *grads)
{
    *params = *grads = 0;
    for (size_t k = first; k < end; k++) {
        *params += m->nodes[k].info.n_params; /* below the model's checked total */
        *grads += m->nodes[k].trainable ? m->nodes[k].info.n_params : 0;
    }
}

/* Whether group g begins a unit: the first group, a block instance, or the top-level op
 * after one. */
static bool starts_unit(const ck_model *m, size_t g)
{
    return g == 0 || m->groups[g].instance || m->groups[g - 1].instance;
}

size_t ck_derive_units(const ck_model *m, size_t *first)
{
    size_t n = 0;
    for (size_t g = 0; g < m->n_groups; g++)
        if (starts_unit(m, g)) {
            if (first)
                first[n] = m->groups[g].first;
            n++;
        }
    if (first)
        first[n] = m->n_nodes;
    return n;
}

/* The buffers sharding needs, from the model's units (ck_derive_units) that mine holds (NULL:
 * all). ZeRO-3 gathers the unit it computes and prefetches the next: the largest pair of
 * neighbours, whole. ZeRO-2 and 3 reduce-scatter a unit's gradients from a whole buffer:
 * the largest unit's. */
static bool add_buffers(const ck_model *m, const ck_layout *l, const bool *mine, ck_static_mem *out)
{
    if (!l || !ck_layout_shards(l) || l->zero < 2)
        return true;
    uint64_t prev = 0, pair = 0, most_grads = 0;
    for (size_t g = 0; g < m->n_groups; g++) {
        if (!starts_unit(m, g) || (mine && !mine[m->groups[g].first]))
            continue; /* inside a unit, or another pipeline rank's unit */
        size_t end = m->n_nodes;
        for (size_t h = g + 1; h < m->n_groups && end == m->n_nodes; h++)
            if (starts_unit(m, h))
                end = m->groups[h].first;
        uint64_t params, grads;
        ck_derive_unit_counts(m, m->groups[g].first, end, &params, &grads);
        pair = prev + params > pair ? prev + params : pair;
        most_grads = grads > most_grads ? grads : most_grads;
        prev = params;
    }
    return ck_size_mul(l->zero >= 3 ? pair : 0, ck_dtype_bytes(m->training.param_dtype), &out->gather) &&
           ck_size_mul(most_grads, ck_dtype_bytes(m->training.grad_dtype), &out->reduce_scatter);
}

/* Whether one of the nodes in mine (NULL: all) reads tensor t. */
static bool read_by(const ck_model *m, const bool *mine, size_t t)
{
    for (size_t k = 0; mine && k < m->n_nodes; k++)
        for (size_t i = 0; mine[k] && i < m->nodes[k].op->arity; i++)
            if (m->nodes[k].inputs[i] == t)
                return true;
    return !mine;
}

int ck_derive_static_memory_part(const ck_model *m, const ck_layout *l, const bool *mine,
                                 ck_static_mem *out, ck_err *err)
{
    const ck_training *t = &m->training;
    split d = split_of(l);
    memset(out, 0, sizeof *out);
    out->layout = l ? *l : (ck_layout){0};
    bool ok = true;
    for (size_t k = 0; k < m->n_nodes; k++) {
        const ck_node *n = &m->nodes[k];
        ok = ok && ck_size_add(out->n_params, n->info.n_params, &out->n_params) &&
             (!n->trainable || ck_size_add(out->n_trainable, n->info.n_params, &out->n_trainable)) &&
             (mine && !mine[k] ? true : add_node_state(t, n, d, out));
    }
    for (size_t i = 0; i < m->n_inputs; i++)
        if (ck_model_is_static(m, i) && read_by(m, mine, i))
            ok = ok && ck_size_add(out->held_inputs, m->tensors[i].bytes, &out->held_inputs);
    ok = ok && add_buffers(m, l, mine, out);
    /* made during the step, the program holds them: on one process (a parallel layout keeps
     * its framework's buffers, planner/model) */
    if (t->grads == CK_GRADS_AUTOGRAD && !(l && (l->dp > 1 || l->zero > 0))) {
        out->made_grads = out->grads;
        out->grads = 0;
    }
    const uint64_t parts[] = {out->params, out->grads,       out->optimizer,     out->master,
                              out->held_inputs, out->gather, out->reduce_scatter};
    for (size_t i = 0; ok && i < sizeof parts / sizeof parts[0]; i++)
        ok = ck_size_add(out->total, parts[i], &out->total);
    if (!ok)
        return overflow(m, "the static memory", err);
    count_parts(m, &out->parts);
    return CK_OK;
}

int ck_derive_static_memory(const ck_model *m, const ck_layout *l, ck_static_mem *out, ck_err *err)
{
    return ck_derive_static_memory_part(m, l, NULL, out, err);
}

/* ---- cutting into stages ---- */

/* Cut j (between nodes j and j+1) is an articulation point when exactly one state tensor,
 * necessarily node j's output, is made at or before j and read after it. State is x_0 and
 * node outputs; the other inputs are held for the whole step and do not count. A stage
 * ends only at a tensor that requires a gradient: the chain's y_i has the size of x_i, so
 * a frozen prefix whose outputs need none (a frozen embedding) joins the first stage that
 * does, unless a block instance that trains begins there (a LoRA model's first layer),
 * which --planner every and emit need as a stage of its own; there the chain's y_i is one
 * the program does not make (the chain bounds, the replay is exact). Nor does one end at
 * a tensor no backward reads (no node saves it) unless a block instance begins or ends
 * there: PyTorch frees such a tensor after its last reader in the forward, while the
 * chain's x̄_{i+1} holds x_{i+1} to B i (Gemma's logits before their soft-cap, its
 * embeddings before their scale). The loss's input x_L always ends one.
 * Returns the number of stages and fills first[] (n_nodes entries suffice). */
static size_t find_stages(const ck_model *m, ck_granularity g, const size_t *last_use,
                          const bool *saved, long *crossing, size_t *first)
{
    size_t n = m->n_nodes;
    for (size_t j = 0; j < n; j++)
        crossing[j] = 0;
    for (size_t t = 0; t < m->n_tensors; t++) {
        if (ck_model_is_static(m, t))
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
        const ck_group *ends = &m->groups[m->nodes[j].group], *begins = &m->groups[m->nodes[j + 1].group];
        bool instance = (ends->instance && ends->end == j + 1) || (begins->instance && begins->first == j + 1);
        bool loss = j + 2 == n; /* x_L: the loss frees it when nothing saves it (planner/lower) */
        size_t t = m->nodes[j].output;
        bool trains = begins->instance && begins->first == j + 1 &&
                      m->tensors[m->nodes[begins->end - 1].output].requires_grad;
        bool boundary = (g == CK_GRAN_OP || ends->end == j + 1) &&
                        (m->tensors[t].requires_grad || trains) && (saved[t] || instance || loss);
        if (running == 1 && boundary)
            first[++n_stages] = j + 1;
    }
    return n_stages;
}

/* saved[t]: whether a node saves tensor t for its backward (as its input or output). */
static void mark_saved(const ck_model *m, bool *saved)
{
    for (size_t k = 0; k < m->n_nodes; k++) {
        const ck_node *n = &m->nodes[k];
        for (size_t s = 0; s < n->info.n_saved; s++) {
            size_t t = ck_model_saved_tensor(n, &n->info.saved[s]);
            if (t != SIZE_MAX)
                saved[t] = true;
        }
    }
}

/* ---- sizing one stage ---- */

/* A failure of the compiled program (memory held past 2^64), named with the model's file. */
static int in_model(const ck_model *m, int rc, ck_err *err)
{
    if (rc != CK_ERR_INPUT)
        return rc;
    char why[sizeof err->msg];
    snprintf(why, sizeof why, "%s", err->msg);
    return ck_err_fail(err, rc, "%s: %s", m->file, why);
}

/* Runs action a of stage i, compiled, from st; *peak receives the most bytes held. The
 * effect passed down frees nothing but what B always frees, and names the variant of the
 * x̄ a B frees: the sizes asked for do not depend on whether x_i is held plain. *redone (or
 * NULL) receives the forward time of the nodes the action's instructions run forwards of
 * (a B's recomputation). */
static int run_action(const ck_lower *l, ck_program_state *st, ck_action a, const ck_cost_model *cm,
                      uint64_t *peak, double *redone, ck_err *err)
{
    ck_action_effect e = {0};
    if (a.kind == CK_B)
        e = (ck_action_effect){.n_frees = 1, .frees = {{CK_VALUE_XBAR, a.stage + 1, a.variant}}};
    a.variant = a.kind == CK_F_ALL ? a.variant : 0;
    ck_program p = {0};
    int rc = ck_lower_action(l, &a, &e, NULL, &p, err);
    *peak = st->held;
    for (size_t k = 0; k < p.n && rc == CK_OK; k++) {
        uint64_t top;
        rc = ck_program_run(st, k, &p.instrs[k], NULL, NULL, &top, err);
        if (top > *peak)
            *peak = top;
        const ck_op_info *info = &st->m->nodes[p.instrs[k].node].info;
        if (redone && p.instrs[k].kind == CK_INSTR_FORWARD)
            *redone += ck_derive_op_time(cm, info->fwd_flops, info->fwd_bytes_moved);
    }
    ck_program_free(&p);
    return rc;
}

static uint64_t excess(uint64_t peak, uint64_t base)
{
    return peak > base ? peak - base : 0;
}

/* What sizing the stages one by one shares: one program state, reset for each action
 * run, as allocating one per stage would take time quadratic in the model's size. */
typedef struct {
    const ck_model *m;
    const ck_lower *l;
    const ck_cost_model *cm;
    ck_program_state ps;
} sizer;

/* z's state reset to hold only stage i's input (nothing when it is static), and with
 * gradient accumulation the parameter gradients its backward adds into, as a later
 * micro-step holds them (the others do not change what the stage holds). */
static ck_program_state *with_input_only(sizer *z, size_t i)
{
    size_t in = ck_lower_stage_input(z->l, i), first, end;
    ck_program_state_reset(&z->ps);
    ck_lower_stage_nodes(z->l, i, &first, &end);
    if (z->m->training.grad_accum > 1)
        ck_program_state_hold_params_of(&z->ps, first, end);
    ck_program_state_set(&z->ps, ck_program_value(0, CK_COPY_PLAIN), false);
    if (!ck_model_is_static(z->m, in))
        ck_program_state_set(&z->ps, ck_program_value(in, CK_COPY_PLAIN), true);
    return &z->ps;
}

/* Stage i's variant v from its compiled F_all and B run with only x_i live: what F_all
 * keeps, its peak beyond that (*save_excess), B's peak beyond x̄_{i+1}, y_{i+1} and y_i,
 * and the forward time B spends recomputing (out->bwd_time, to which the caller adds the
 * backward's own). The parameter gradients B makes under CK_GRADS_AUTOGRAD, which the
 * step holds to its end, are part of B's peak: in the chain's terms a transient, which
 * the program's replay (the figures reported) holds on. */
static int size_saving(sizer *z, size_t i, size_t v, ck_variant *out, uint64_t *save_excess,
                       ck_err *err)
{
    const ck_model *m = z->m;
    size_t in = ck_lower_stage_input(z->l, i), last = ck_lower_stage_output(z->l, i);
    ck_program_state *ps = with_input_only(z, i);
    uint64_t base = ps->held, save_peak, bwd_peak;
    int rc = run_action(z->l, ps, (ck_action){CK_F_ALL, i, v}, z->cm, &save_peak, NULL, err);
    out->saved_bytes = ps->held - base;
    uint64_t y_in = ck_program_has_grad(m, in) ? m->tensors[in].bytes : 0;
    if (ck_program_has_grad(m, last))
        ck_program_state_set(ps, ck_program_grad(last), true);
    uint64_t before_b = ps->held, params_before = ck_program_state_params_bytes(ps);
    out->bwd_time = 0;
    if (rc == CK_OK)
        rc = run_action(z->l, ps, (ck_action){CK_B, i, v}, z->cm, &bwd_peak, &out->bwd_time, err);
    base += ck_program_state_params_bytes(ps) - params_before;
    if (rc == CK_OK && ps->held != base + y_in)
        rc = ck_err_fail(err, CK_ERR_RUNTIME, "%s: stage %zu's backward leaves %llu bytes, not %llu",
                         m->file, i, (unsigned long long)(ps->held - base), (unsigned long long)y_in);
    if (rc == CK_OK) {
        *save_excess = excess(save_peak, base + out->saved_bytes);
        out->fwd_tmp_bytes = *save_excess;
        out->bwd_tmp_bytes = excess(bwd_peak, before_b + y_in);
    }
    return in_model(m, rc, err);
}

/* F_ck's peak beyond x_i and x_{i+1}, run with only x_i live. */
static int size_plain(sizer *z, size_t i, uint64_t *plain_excess, ck_err *err)
{
    size_t out = ck_lower_stage_output(z->l, i);
    ck_program_state *ps = with_input_only(z, i);
    uint64_t base = ps->held, plain_peak;
    int rc = run_action(z->l, ps, (ck_action){CK_F_CK, i, 0}, NULL, &plain_peak, NULL, err);
    *plain_excess = excess(plain_peak, base + z->m->tensors[out].bytes);
    return in_model(z->m, rc, err);
}

/* Stage i's sizes, from its compiled actions: saved_bytes is what F_all keeps; fwd_tmp the
 * larger of F_all's and F_ck's peaks beyond what they keep (the chain has one transient
 * for both); bwd_tmp B's peak beyond x̄_{i+1}, y_{i+1} and y_i; and its variants
 * (ck_lower_variants), each with its own (backward times are added by the caller). */
static int size_stage(sizer *z, size_t i, ck_chain *c, ck_err *err)
{
    ck_stage *st = &c->stages[i];
    ck_keep keeps[CK_N_KEEPS];
    ck_variant v[CK_N_KEEPS];
    size_t n = ck_lower_variants(z->l, i, keeps);
    uint64_t plain_excess = 0, save_excess = 0;
    st->out_bytes = z->m->tensors[ck_lower_stage_output(z->l, i)].bytes;
    int rc = size_plain(z, i, &plain_excess, err);
    for (size_t k = 0; k < n && rc == CK_OK; k++) {
        v[k].name = (char *)ck_lower_keep_name(keeps[k]);
        rc = size_saving(z, i, k, &v[k], &save_excess, err);
        if (k == 0) {
            st->saved_bytes = v[0].saved_bytes;
            st->fwd_tmp_bytes = save_excess > plain_excess ? save_excess : plain_excess;
            st->bwd_tmp_bytes = v[0].bwd_tmp_bytes;
        }
    }
    return rc == CK_OK ? ck_chain_set_variants(c, i, v + 1, n - 1, err) : rc;
}

static char *range_name(const char *a, const char *b)
{
    size_t len = strlen(a) + strlen(b) + 3;
    char *s = malloc(len);
    if (s)
        snprintf(s, len, a == b ? "%s" : "%s..%s", a, b);
    return s;
}

static int fill_stage(sizer *z, const size_t *first, size_t i, ck_granularity g, ck_chain *c,
                      ck_err *err)
{
    const ck_model *m = z->m;
    const ck_cost_model *cm = z->cm;
    ck_stage *st = &c->stages[i];
    const ck_node *a = &m->nodes[first[i]], *b = &m->nodes[first[i + 1] - 1];
    st->name = g == CK_GRAN_OP ? range_name(a->name, b->name)
                               : range_name(m->groups[a->group].name, m->groups[b->group].name);
    if (!st->name)
        return ck_err_oom(err);
    int rc = size_stage(z, i, c, err);
    for (size_t k = first[i]; k < first[i + 1] && rc == CK_OK; k++) {
        const ck_op_info *info = &m->nodes[k].info;
        st->fwd_time += ck_derive_op_time(cm, info->fwd_flops, info->fwd_bytes_moved);
        st->bwd_time += ck_derive_op_time(cm, info->bwd_flops, info->bwd_bytes_moved);
    }
    for (size_t v = 0; v < st->n_variants && rc == CK_OK; v++) {
        st->variants[v].bwd_time += st->bwd_time;
        rc = check_time(m, cm, "the backward time of a variant of stage", st->name,
                        st->variants[v].bwd_time, err);
    }
    if (rc == CK_OK)
        rc = check_time(m, cm, "the forward time of stage", st->name, st->fwd_time, err);
    if (rc == CK_OK)
        rc = check_time(m, cm, "the backward time of stage", st->name, st->bwd_time, err);
    return rc;
}

/* The loss is not a stage: its forward and backward run together in the chain's `loss`
 * action, whose transient bytes are what its compiled instructions hold beyond y_L. */
static int fill_loss(sizer *z, ck_chain *c, ck_err *err)
{
    const ck_model *m = z->m;
    const ck_cost_model *cm = z->cm;
    const ck_op_info *info = &m->nodes[m->n_nodes - 1].info;
    c->loss_bwd_time = ck_derive_op_time(cm, info->fwd_flops, info->fwd_bytes_moved) +
                       ck_derive_op_time(cm, info->bwd_flops, info->bwd_bytes_moved);
    int rc = check_time(m, cm, "the time of the loss node", m->nodes[m->n_nodes - 1].name,
                        c->loss_bwd_time, err);
    if (rc != CK_OK)
        return rc;
    size_t x = ck_lower_stage_output(z->l, c->n_stages - 1);
    ck_program_state *ps = &z->ps;
    ck_program_state_reset(ps);
    ck_program_state_set(ps, ck_program_value(0, CK_COPY_PLAIN), false);
    ck_program_state_set(ps, ck_program_value(x, CK_COPY_PLAIN), true);
    uint64_t base = ps->held, peak;
    uint64_t y = ck_program_has_grad(m, x) ? m->tensors[x].bytes : 0;
    rc = run_action(z->l, ps, (ck_action){CK_LOSS, 0, 0}, NULL, &peak, NULL, err);
    c->loss_bwd_tmp_bytes = excess(peak, base + y);
    return in_model(m, rc, err);
}

static int fill_chain(const ck_model *m, const size_t *first, ck_granularity g,
                      const ck_cost_model *cm, ck_chain *out, ck_err *err)
{
    ck_lower *l;
    int rc = ck_lower_create(m, first, out->n_stages, &l, err);
    if (rc != CK_OK)
        return rc;
    sizer z = {.m = m, .l = l, .cm = cm};
    if ((rc = ck_program_state_init(&z.ps, m, err)) != CK_OK) {
        ck_lower_free(l);
        return rc;
    }
    out->input_bytes = ck_model_is_static(m, 0) ? 0 : m->tensors[0].bytes;
    for (size_t i = 0; i < out->n_stages && rc == CK_OK; i++)
        rc = fill_stage(&z, first, i, g, out, err);
    if (rc == CK_OK)
        rc = fill_loss(&z, out, err);
    ck_program_state_free(&z.ps);
    ck_lower_free(l);
    return rc;
}

void ck_derive_partition(const ck_model *m, const size_t *stage_first, const ck_layout *l,
                         ck_chain *c)
{
    for (size_t i = 0; l->partition && i < c->n_stages; i++) {
        const ck_group *g = &m->groups[m->nodes[stage_first[i]].group];
        if (g->instance && g->first == stage_first[i])
            c->stages[i].shard_bytes = ck_size_ceil_div(ck_chain_x_bytes(c, i), ck_layout_tp(l));
    }
}

int ck_derive_chain(const ck_model *m, ck_granularity g, const ck_cost_model *cm,
                      ck_chain *out, size_t **stage_first_node, ck_err *err)
{
    if (!(cm->gemm_flops > 0 && isfinite(cm->gemm_flops) && cm->mem_bandwidth > 0 &&
          isfinite(cm->mem_bandwidth)))
        return ck_err_fail(err, CK_ERR_INPUT, "cost model: expected a positive finite FLOP rate and "
                       "memory bandwidth, got %g FLOP/s and %g B/s", cm->gemm_flops, cm->mem_bandwidth);
    size_t *last_use = calloc(m->n_tensors, sizeof *last_use);
    size_t *first = calloc(m->n_nodes + 1, sizeof *first);
    long *crossing = calloc(m->n_nodes, sizeof *crossing);
    bool *saved = calloc(m->n_tensors, sizeof *saved);
    int rc = CK_OK;
    if (!last_use || !first || !crossing || !saved) {
        rc = ck_err_oom(err);
        goto done;
    }
    ck_model_last_uses(m, last_use);
    mark_saved(m, saved);
    size_t n_stages = find_stages(m, g, last_use, saved, crossing, first);
    first[n_stages] = m->n_nodes - 1;
    rc = ck_chain_check_length(n_stages, m->file, "", err);
    if (rc == CK_OK)
        rc = ck_chain_alloc(out, m->name, n_stages, err);
    if (rc != CK_OK)
        goto done;
    rc = fill_chain(m, first, g, cm, out, err);
    if (rc != CK_OK) {
        ck_chain_free(out);
    } else if (stage_first_node) {
        *stage_first_node = first;
        first = NULL;
    }
done:
    free(last_use);
    free(first);
    free(crossing);
    free(saved);
    return rc;
}
