#include "planner/derive.h"
#include "planner/lower.h"

#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

static ck_chain chain_of(const ck_model *m, ck_granularity g, const ck_cost_model *cm, size_t **first)
{
    ck_chain c;
    ck_err err = {{0}};
    ck_cost_model dflt;
    ck_derive_cost_model_default(&dflt);
    ck_assert_msg(ck_derive_chain(m, g, cm ? cm : &dflt, &c, first, &err) == CK_OK, "%s", err.msg);
    return c;
}

static uint64_t group_saved(const ck_model *m, size_t group)
{
    uint64_t bytes = 0;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_derive_saved_bytes(m, m->groups[group].first, m->groups[group].end, &bytes, &err), CK_OK);
    return bytes;
}

/* Korthikanti et al. 2022, eq. 2: sbh(34 + 5as/h) bytes per layer with 16-bit activations
 * and dropout after the attention probabilities, the attention output and the MLP. They
 * leave out the layernorms' statistics; ckplan keeps mean and rstd in f32: 2 * 2 * 4 * sb. */
static void check_korthikanti(uint64_t b, uint64_t s, uint64_t h, uint64_t a, const char *dtype)
{
    ck_model *m = fx_gpt((unsigned)b, (unsigned)s, (unsigned)h, (unsigned)a, dtype, false, 2);
    uint64_t paper = s * b * h * 34 + 5 * a * s * s * b;
    uint64_t stats = 16 * s * b;
    ck_assert_uint_eq(group_saved(m, 0), paper + stats);
    ck_assert_uint_eq(group_saved(m, 1), paper + stats);
    /* As a chain stage: less its input (saved by ln1), plus its output (saved by the next
     * layer's ln1, not by this one): the same bytes. */
    ck_chain c = chain_of(m, CK_GRAN_BLOCK, NULL, NULL);
    ck_assert_uint_eq(c.n_stages, 2);
    ck_assert_uint_eq(c.stages[0].saved_bytes, paper + stats);
    ck_assert_uint_eq(c.stages[0].out_bytes, s * b * h * 2);
    /* Selective recompute: "attn" keeps all but the attention core's s^2 tensors, Megatron's
     * 34sbh (their 5as/h term goes); "matmul" keeps the products' outputs (qkv 6sbh, attention
     * 2sbh and its 5as^2b, proj 2sbh, fc1 8sbh, fc2 2sbh) and the layer's output 2sbh; "none"
     * the output only. */
    const uint64_t want[][2] = {{CK_KEEP_ATTN, s * b * h * 34 + stats},
                                {CK_KEEP_MATMUL, s * b * h * 22 + 5 * a * s * s * b},
                                {CK_KEEP_NONE, s * b * h * 2}};
    for (size_t k = 0; k < 3; k++) {
        size_t v = 0;
        ck_assert(ck_chain_variant_find(&c, 0, ck_lower_keep_name((ck_keep)want[k][0]), &v));
        ck_assert_uint_eq(ck_chain_variant(&c, 0, v).saved_bytes, want[k][1]);
    }
    ck_assert_str_eq(c.stages[1].name, "h.1");
    ck_chain_free(&c);
    ck_model_free(m);
}

START_TEST(gpt_layer_matches_korthikanti)
{
    check_korthikanti(2, 64, 128, 4, "bf16");
    check_korthikanti(1, 128, 256, 8, "f16");
    check_korthikanti(4, 256, 512, 16, "bf16");
    check_korthikanti(1, 2048, 12288, 96, "bf16"); /* a GPT-3 175B layer, docs/model-format.md */
}
END_TEST

/* Flash attention keeps no [B, H, T, T] tensor: 34sbh, the statistics, and the f32
 * log-sum-exp [B, H, T]. */
START_TEST(flash_removes_quadratic_terms)
{
    const uint64_t b = 2, s = 64, h = 128, a = 4;
    ck_model *m = fx_gpt(b, s, h, a, "bf16", true, 1);
    ck_assert_uint_eq(group_saved(m, 0), s * b * h * 34 + 16 * s * b + 4 * a * s * b);
    ck_model_free(m);
}
END_TEST

/* gpt2-tiny (f32, B=4 T=64 C=128) at op granularity: the MLP half of a layer, from ln2 to
 * the second residual add, is one stage. Its input (res1) is held already; it keeps
 * ln2's mean and rstd (2 * sb * 4 bytes), ln2's output (fc1's input, sbh f32), fc1's output
 * (gelu's input, 4sbh f32), gelu's output (fc2's input, 4sbh f32), the dropout mask (sbh
 * u8) and the stage's output (sbh f32). */
START_TEST(mlp_stage_by_hand)
{
    ck_model *m = fx_load_file("models/gpt2-tiny.json");
    const uint64_t sb = 64 * 4, sbh = sb * 128;
    size_t *first = NULL;
    ck_chain c = chain_of(m, CK_GRAN_OP, NULL, &first);
    ck_assert_str_eq(c.stages[2].name, "h.0.ln2..h.0.res2");
    ck_assert_uint_eq(first[3] - first[2], 6);
    ck_assert_uint_eq(c.stages[2].saved_bytes, 2 * sb * 4 + sbh * 4 * (1 + 4 + 4) + sbh + sbh * 4);
    ck_assert_uint_eq(c.stages[2].out_bytes, sbh * 4);
    uint64_t with_input = 0;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_derive_saved_bytes(m, first[2], first[3], &with_input, &err), CK_OK);
    ck_assert_uint_eq(with_input, c.stages[2].saved_bytes - sbh * 4 + sbh * 4); /* res1 in, res2 out */
    ck_assert_int_eq(ck_derive_saved_bytes(m, 3, m->n_nodes + 1, &with_input, &err), CK_ERR_RUNTIME);
    free(first);
    ck_chain_free(&c);
    ck_model_free(m);
}
END_TEST

/* x [2,4] -> fc1 (linear 4->8) -> relu -> fc2 (linear 8->4, no bias) -> add x -> gelu -> mse.
 * x crosses fc1..fc2, so the first articulation point is after the add: two stages.
 * With 1 FLOP/s and 1 B/s a time is FLOPs + bytes. Worked out in docs/model-format.md. */
START_TEST(tiny_chain_by_hand)
{
    ck_model *m = fx_load(
        "{'format': 'ckplan-model/1', 'inputs': [{'name': 'x', 'shape': [2, 4]}, {'name': 'y', 'shape': [2, 4]}],"
        " 'nodes': [{'name': 'fc1', 'op': 'linear', 'out': 8, 'inputs': ['x']},"
        "  {'name': 'act', 'op': 'relu', 'inputs': ['fc1']},"
        "  {'name': 'fc2', 'op': 'linear', 'out': 4, 'bias': false, 'inputs': ['act']},"
        "  {'name': 'res', 'op': 'add', 'inputs': ['fc2', 'x']},"
        "  {'name': 'g', 'op': 'gelu', 'inputs': ['res']},"
        "  {'name': 'loss', 'op': 'mse', 'inputs': ['g', 'y']}]}");
    ck_cost_model unit = {1, 1};
    size_t *first = NULL;
    ck_chain c = chain_of(m, CK_GRAN_OP, &unit, &first);
    ck_assert_uint_eq(c.input_bytes, 32);
    ck_assert_uint_eq(c.n_stages, 2);
    ck_assert(first[0] == 0 && first[1] == 4 && first[2] == 5);
    const ck_stage *s0 = &c.stages[0], *s1 = &c.stages[1];
    ck_assert_str_eq(s0->name, "fc1..res");
    ck_assert_uint_eq(s0->out_bytes, 32);
    ck_assert_uint_eq(s0->saved_bytes, 64 + 32); /* act (relu's output, fc2's input) + res */
    ck_assert_uint_eq(s0->fwd_tmp_bytes, 96);    /* not saving: fc1 + act live at relu, less res */
    /* At fc2's backward: y_0 and fc2's gradient, one buffer (res's backward handed y_1 to
     * both, docs/model-format.md section 4) (32), act's gradient (64) and fc2's weight
     * gradient before AccumulateGrad adds it into the static one (128); res, which no
     * backward of the stage reads, and y_1 are gone by then (32 each); less y_0. */
    ck_assert_uint_eq(s0->bwd_tmp_bytes, 32 + 64 + 128 - 32 - 32 - 32);
    ck_assert_double_eq(s0->fwd_time, 1000);
    ck_assert_double_eq(s0->bwd_time, 1984);
    ck_assert_str_eq(s1->name, "g");
    ck_assert_uint_eq(s1->out_bytes, 32);
    ck_assert_uint_eq(s1->saved_bytes, 32); /* its input res is held; plus its output */
    ck_assert_uint_eq(s1->fwd_tmp_bytes, 0);
    ck_assert_uint_eq(s1->bwd_tmp_bytes, 0);
    ck_assert_double_eq(s1->fwd_time, 128);
    ck_assert_double_eq(s1->bwd_time, 192);
    ck_assert_double_eq(c.loss_bwd_time, 92 + 156);
    ck_assert_uint_eq(c.loss_bwd_tmp_bytes, 4);

    ck_static_mem sm;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_derive_static_memory(m, NULL, &sm, &err), CK_OK);
    ck_assert_uint_eq(sm.n_params, 4 * 8 + 8 + 8 * 4);
    ck_assert_uint_eq(sm.held_inputs, 32);
    free(first);
    ck_chain_free(&c);
    ck_model_free(m);
}
END_TEST

static void check_stage_count(const char *file, size_t by_op, size_t by_block)
{
    ck_model *m = fx_load_file(file);
    ck_chain op = chain_of(m, CK_GRAN_OP, NULL, NULL), block = chain_of(m, CK_GRAN_BLOCK, NULL, NULL);
    ck_assert_msg(op.n_stages == by_op, "%s: %zu stages by op", file, op.n_stages);
    ck_assert_msg(block.n_stages == by_block, "%s: %zu stages by block", file, block.n_stages);
    /* Cutting more finely never changes what x_L and x_0 are. */
    ck_assert_uint_eq(op.input_bytes, block.input_bytes);
    ck_assert_uint_eq(op.stages[op.n_stages - 1].out_bytes, block.stages[block.n_stages - 1].out_bytes);
    ck_chain_free(&op);
    ck_chain_free(&block);
    ck_model_free(m);
}

START_TEST(op_and_block_granularity)
{
    /* embed..drop_embed (dropout does not save the embedding: no stage ends there), two
     * stages per layer (the residual crosses each half), ln_f, lm_head */
    check_stage_count("models/gpt2-tiny.json", 1 + 2 * 4 + 2, 1 + 4 + 2);
    check_stage_count("models/gpt2-small.json", 1 + 2 * 12 + 2, 1 + 12 + 2);
    check_stage_count("models/llama-tiny.json", 1 + 2 * 4 + 2, 1 + 4 + 2);
    /* relu saves its output, not fc's: a layer is one stage at op granularity too */
    check_stage_count("models/mlp-deep.json", 16 + 1, 16 + 1);

    ck_model *m = fx_load_file("models/gpt2-tiny.json");
    size_t *first = NULL;
    ck_chain c = chain_of(m, CK_GRAN_BLOCK, NULL, &first);
    const char *names[] = {"embed..drop_embed", "h.0", "h.1", "h.2", "h.3", "ln_f", "lm_head"};
    for (size_t i = 0; i < 7; i++)
        ck_assert_str_eq(c.stages[i].name, names[i]);
    ck_assert_uint_eq(first[1], 2);
    ck_assert_uint_eq(first[2], 14);
    ck_assert_uint_eq(first[7], m->n_nodes - 1);
    free(first);
    ck_chain_free(&c);
    ck_model_free(m);
}
END_TEST

static ck_static_mem static_of(const char *training)
{
    ck_model *m = fx_load(FX_BASE "'training': %s, 'nodes': [{'name': 'l', 'op': 'linear', 'out': 'C',"
                          " 'inputs': ['x']}, {'name': 'loss', 'op': 'mse', 'inputs': ['l', 'y']}]}",
                          training);
    ck_static_mem sm;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_derive_static_memory(m, NULL, &sm, &err), CK_OK);
    ck_model_free(m);
    ck_assert_uint_eq(sm.n_params, 8 * 8 + 8);
    ck_assert_uint_eq(sm.held_inputs, 2 * 4 * 8 * 4); /* y */
    ck_assert_uint_eq(sm.total, sm.params + sm.grads + sm.optimizer + sm.master + sm.held_inputs);
    return sm;
}

/* Mixed precision with Adam: bf16 parameters and gradients (2 + 2), an f32 master copy (4),
 * f32 first and second moments (8): 16 bytes per parameter. */
START_TEST(static_memory_per_optimizer)
{
    ck_static_mem sm = static_of("{'optimizer': 'adam', 'param_dtype': 'bf16', 'master_weights': true}");
    ck_assert_uint_eq(sm.params, 72 * 2);
    ck_assert_uint_eq(sm.grads, 72 * 2);
    ck_assert_uint_eq(sm.master, 72 * 4);
    ck_assert_uint_eq(sm.optimizer, 72 * 8);
    ck_assert_uint_eq(sm.total - sm.held_inputs, 72 * 16);
    sm = static_of("{'optimizer': 'adam'}");
    ck_assert_uint_eq(sm.total - sm.held_inputs, 72 * 16); /* f32: 4 + 4 + 8 */
    ck_assert_uint_eq(sm.master, 0);
    sm = static_of("{'optimizer': 'momentum', 'param_dtype': 'f16', 'grad_dtype': 'f32'}");
    ck_assert_uint_eq(sm.total - sm.held_inputs, 72 * (2 + 4 + 4));
    sm = static_of("{'optimizer': 'sgd'}");
    ck_assert_uint_eq(sm.total - sm.held_inputs, 72 * 8);
}
END_TEST

START_TEST(gpt2_small_chain_and_static_memory)
{
    ck_model *m = fx_load_file("models/gpt2-small.json");
    ck_static_mem sm;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_derive_static_memory(m, NULL, &sm, &err), CK_OK);
    ck_assert_uint_eq(sm.n_params, 124439808);
    /* f32 adam, then the token ids and the targets: inputs held for the step */
    ck_assert_uint_eq(sm.total, 124439808ULL * 16 + 2 * 8 * 1024 * 4);
    ck_chain c = chain_of(m, CK_GRAN_BLOCK, NULL, NULL);
    /* A layer in f32 with dropout everywhere: Korthikanti's count doubled, except the three
     * one-byte masks (2sbh + as^2b), plus the statistics. */
    const uint64_t s = 1024, b = 8, h = 768, a = 12;
    ck_assert_uint_eq(c.stages[2].saved_bytes,
                      2 * (s * b * h * 34 + 5 * a * s * s * b) - (2 * s * b * h + a * s * s * b) + 16 * s * b);
    ck_chain_free(&c);
    ck_model_free(m);
}
END_TEST

START_TEST(bad_cost_model)
{
    ck_model *m = fx_load_file("models/mlp-deep.json");
    ck_cost_model cm = {0, 20e9};
    ck_chain c;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_derive_chain(m, CK_GRAN_OP, &cm, &c, NULL, &err), CK_ERR_INPUT);
    ck_assert(strstr(err.msg, "cost model: expected a positive finite FLOP rate"));
    ck_model_free(m);
}
END_TEST

/* ---- the stage rules, recomputed from scratch node by node ---- */

typedef struct {
    const ck_model *m;
    size_t a, b, in, out;
} span;

static bool made_in(const span *sp, size_t t)
{
    size_t p = sp->m->tensors[t].producer;
    return p != CK_NO_NODE && p >= sp->a && p < sp->b;
}

static size_t last_reader(const ck_model *m, size_t t)
{
    size_t last = 0;
    for (size_t k = 0; k < m->n_nodes; k++)
        for (size_t i = 0; i < m->nodes[k].op->arity; i++)
            if (m->nodes[k].inputs[i] == t)
                last = k;
    return last;
}

/* The first node of the span whose backward reads t (SIZE_MAX if none): the saved
 * tensor is freed after that backward, the last of the stage's to read it. */
static size_t first_saver(const span *sp, size_t t)
{
    for (size_t k = sp->a; k < sp->b; k++) {
        const ck_node *n = &sp->m->nodes[k];
        for (size_t s = 0; s < n->info.n_saved; s++) {
            const ck_saved *sv = &n->info.saved[s];
            if ((sv->kind == CK_SAVE_OUTPUT && n->output == t) ||
                (sv->kind == CK_SAVE_INPUT && n->inputs[sv->input] == t))
                return k;
        }
    }
    return SIZE_MAX;
}

static bool saved_in_span(const span *sp, size_t t)
{
    return first_saver(sp, t) != SIZE_MAX;
}

static uint64_t internals(const ck_node *n)
{
    uint64_t sum = 0;
    for (size_t s = 0; s < n->info.n_saved; s++)
        if (n->info.saved[s].kind == CK_SAVE_INTERNAL)
            sum += n->info.saved[s].bytes;
    return sum;
}

static bool has_grad(const ck_model *m, size_t t)
{
    return ck_dtype_is_float(m->tensors[t].type.dtype) && !ck_model_is_static(m, t);
}

/* Forward, at node k's run: (plain) what a not-saving forward holds, and (kept) what a
 * saving forward holds, both beyond the held memory before it. */
static void forward_at(const span *sp, size_t k, uint64_t *plain, uint64_t *kept)
{
    const ck_model *m = sp->m;
    uint64_t live = 0, saving = 0;
    for (size_t t = 0; t < m->n_tensors; t++) {
        if (!made_in(sp, t) || m->tensors[t].producer > k)
            continue;
        bool alive = m->tensors[t].producer == k || last_reader(m, t) >= k || t == sp->out;
        bool keeps = t == sp->out || saved_in_span(sp, t);
        live += alive ? m->tensors[t].bytes : 0;
        saving += alive || keeps ? m->tensors[t].bytes : 0;
    }
    for (size_t j = sp->a; j <= k; j++)
        saving += internals(&m->nodes[j]);
    const ck_node *n = &m->nodes[k];
    *plain = live + internals(n) + n->info.fwd_ws_bytes;
    *kept = saving + n->info.fwd_ws_bytes;
}

/* Backward, at node k's run, beyond x̄_{i+1}, y_{i+1} and x_i: y_i, the gradients between
 * their first and last use, the workspace, less what earlier backwards freed. */
/* Whether add node q hands its output's gradient on (docs/model-format.md section 4): its
 * two inputs require gradients and q is their last reader; the sharer, the one made later,
 * is made in the span, and no node from its producer up to q reads either input. Then
 * *sharer is it and *out q's output. */
static bool passes(const span *sp, size_t q, size_t *sharer, size_t *out)
{
    const ck_model *m = sp->m;
    const ck_node *n = &m->nodes[q];
    if (n->op->kind != CK_OP_ADD || n->inputs[0] == n->inputs[1])
        return false;
    size_t a = n->inputs[0], b = n->inputs[1];
    size_t pa = m->tensors[a].producer, pb = m->tensors[b].producer;
    if (pb == CK_NO_NODE || (pa != CK_NO_NODE && pa > pb)) {
        size_t swap = a;
        a = b;
        b = swap;
    }
    if (!m->tensors[a].requires_grad || !m->tensors[b].requires_grad ||
        last_reader(m, a) != q || last_reader(m, b) != q || !made_in(sp, b))
        return false;
    for (size_t j = m->tensors[b].producer; j < q; j++)
        for (size_t i = 0; i < m->nodes[j].op->arity; i++)
            if (m->nodes[j].inputs[i] == a || m->nodes[j].inputs[i] == b)
                return false;
    *sharer = b;
    *out = n->output;
    return true;
}

/* Whether t's gradient, at node k's backward, is memory another gradient holds: a pass at
 * q >= k gave q's output gradient to its owner at q, and the sharer reads it until its
 * producer's backward. */
static bool shared_at(const span *sp, size_t t, size_t k)
{
    for (size_t q = k; q < sp->b; q++) {
        size_t sharer, out;
        if (passes(sp, q, &sharer, &out) &&
            ((t == out && k == q) || (t == sharer && sp->m->tensors[t].producer <= k)))
            return true;
    }
    return false;
}

static int64_t backward_at(const span *sp, size_t k, uint64_t y_in)
{
    const ck_model *m = sp->m;
    /* y_i exists once the first backward adding into it (its last reader's) has run. */
    int64_t level = (last_reader(m, sp->in) >= k ? (int64_t)y_in : 0) +
                    (int64_t)m->nodes[k].info.bwd_ws_bytes;
    for (size_t t = 0; t < m->n_tensors; t++) {
        if (!made_in(sp, t))
            continue;
        size_t p = m->tensors[t].producer, saver = first_saver(sp, t);
        int64_t bytes = (int64_t)m->tensors[t].bytes;
        if (t != sp->out && has_grad(m, t) && p <= k && last_reader(m, t) >= k &&
            !shared_at(sp, t, k))
            level += bytes; /* its gradient */
        if ((t == sp->out || saver != SIZE_MAX) && (saver == SIZE_MAX || saver > k))
            level -= bytes; /* kept, and freed after its last backward reader */
    }
    for (size_t j = k + 1; j < sp->b; j++)
        level -= (int64_t)internals(&m->nodes[j]);
    size_t sharer, out;
    if ((k + 1 < sp->b || passes(sp, k, &sharer, &out)) && has_grad(m, sp->out))
        level -= (int64_t)m->tensors[sp->out].bytes; /* y_{i+1}: freed after the last node's,
                                                      * or handed on by it */
    return level;
}

/* A stage's sizes recomputed from the lifetimes the rules describe, node by node. */
static void check_stage(const span *sp, const ck_stage *st)
{
    const ck_model *m = sp->m;
    uint64_t y_in = has_grad(m, sp->in) ? m->tensors[sp->in].bytes : 0;
    uint64_t saved = 0, save_max = 0, plain_max = 0;
    int64_t bwd_max = (int64_t)y_in;
    for (size_t t = 0; t < m->n_tensors; t++)
        if (made_in(sp, t) && (t == sp->out || saved_in_span(sp, t)))
            saved += m->tensors[t].bytes;
    for (size_t k = sp->a; k < sp->b; k++) {
        saved += internals(&m->nodes[k]);
        uint64_t plain, kept;
        forward_at(sp, k, &plain, &kept);
        int64_t bwd = backward_at(sp, k, y_in);
        save_max = kept > save_max ? kept : save_max;
        plain_max = plain > plain_max ? plain : plain_max;
        bwd_max = bwd > bwd_max ? bwd : bwd_max;
    }
    uint64_t out = m->tensors[sp->out].bytes;
    uint64_t plain_excess = plain_max > out ? plain_max - out : 0;
    uint64_t save_excess = save_max > saved ? save_max - saved : 0;
    ck_assert_msg(st->saved_bytes == saved, "%s: saved %llu, expected %llu", st->name,
                  (unsigned long long)st->saved_bytes, (unsigned long long)saved);
    ck_assert_msg(st->fwd_tmp_bytes == (save_excess > plain_excess ? save_excess : plain_excess),
                  "%s: fwd_tmp %llu", st->name, (unsigned long long)st->fwd_tmp_bytes);
    ck_assert_msg(st->bwd_tmp_bytes == (uint64_t)bwd_max - y_in, "%s: bwd_tmp %llu, expected %llu",
                  st->name, (unsigned long long)st->bwd_tmp_bytes,
                  (unsigned long long)((uint64_t)bwd_max - y_in));
    ck_assert_uint_ge(st->saved_bytes, st->out_bytes);
}

/* Whether a node of m saves tensor t for its backward, or a block instance begins or ends
 * at node k's output t. */
static bool cut_allowed(const ck_model *m, size_t k, size_t t)
{
    const ck_group *ends = &m->groups[m->nodes[k].group], *begins = &m->groups[m->nodes[k + 1].group];
    if ((ends->instance && ends->end == k + 1) || (begins->instance && begins->first == k + 1))
        return true;
    for (size_t j = 0; j < m->n_nodes; j++)
        for (size_t s = 0; s < m->nodes[j].info.n_saved; s++) {
            const ck_saved *sv = &m->nodes[j].info.saved[s];
            if ((sv->kind == CK_SAVE_OUTPUT && m->nodes[j].output == t) ||
                (sv->kind == CK_SAVE_INPUT && m->nodes[j].inputs[sv->input] == t))
                return true;
        }
    return false;
}

static void check_all_stages(ck_model *m)
{
    for (int g = CK_GRAN_OP; g <= CK_GRAN_BLOCK; g++) {
        size_t *first = NULL;
        ck_chain c = chain_of(m, (ck_granularity)g, NULL, &first);
        for (size_t i = 0; i < c.n_stages; i++) {
            span sp = {m, first[i], first[i + 1], i == 0 ? 0 : m->nodes[first[i] - 1].output,
                       m->nodes[first[i + 1] - 1].output};
            ck_assert_uint_eq(c.stages[i].out_bytes, m->tensors[sp.out].bytes);
            /* No stage but the last ends at a tensor that PyTorch frees in the forward. */
            ck_assert_msg(i + 1 == c.n_stages || cut_allowed(m, first[i + 1] - 1, sp.out),
                          "stage %s ends at a tensor no backward reads", c.stages[i].name);
            check_stage(&sp, &c.stages[i]);
        }
        free(first);
        ck_chain_free(&c);
    }
    ck_model_free(m);
}

/* x -> fc1 -> scale -> fc2 -> mse: scale saves nothing, so fc1's output, which PyTorch
 * frees once scale has read it, ends no stage: held as x_1 in x̄_1 it would count to B 0.
 * fc2 saves scale's output: a stage ends there, at op and block granularity alike. */
START_TEST(no_stage_ends_where_nothing_saves)
{
    ck_model *m = fx_load(FX_BASE "'nodes': [{'name': 'fc1', 'op': 'linear', 'out': 'C', 'inputs': ['x']},"
                          " {'name': 'half', 'op': 'scale', 'factor': 0.5, 'inputs': ['fc1']},"
                          " {'name': 'fc2', 'op': 'linear', 'out': 'C', 'inputs': ['half']},"
                          " {'name': 'loss', 'op': 'mse', 'inputs': ['fc2', 'y']}]}");
    for (int g = CK_GRAN_OP; g <= CK_GRAN_BLOCK; g++) {
        size_t *first = NULL;
        ck_chain c = chain_of(m, (ck_granularity)g, NULL, &first);
        ck_assert_uint_eq(c.n_stages, 2);
        ck_assert_str_eq(c.stages[0].name, "fc1..half");
        ck_assert_uint_eq(first[1], 2);
        ck_assert_uint_eq(c.stages[0].saved_bytes, 2 * 4 * 8 * 4); /* half's output alone */
        free(first);
        ck_chain_free(&c);
    }
    ck_model_free(m);
}
END_TEST

START_TEST(stage_tmp_follows_the_rules)
{
    check_all_stages(fx_load_file("models/gpt2-tiny.json"));
    check_all_stages(fx_load_file("models/llama-tiny.json"));
    check_all_stages(fx_load_file("models/mlp-deep.json"));
    check_all_stages(fx_gpt(2, 16, 32, 2, "bf16", true, 2));
    /* a diamond with a tensor read twice by one node */
    check_all_stages(fx_load(FX_BASE "'nodes': [{'name': 'a', 'op': 'linear', 'out': 'C', 'inputs': ['x']},"
                             " {'name': 'sq', 'op': 'mul', 'inputs': ['a', 'a']},"
                             " {'name': 'r', 'op': 'relu', 'inputs': ['a']},"
                             " {'name': 's', 'op': 'add', 'inputs': ['sq', 'r']},"
                             " {'name': 'd', 'op': 'dropout', 'p': 0.5, 'inputs': ['s']},"
                             " {'name': 'loss', 'op': 'mse', 'inputs': ['d', 'y']}]}"));
}
END_TEST

static Suite *derive_suite(void)
{
    Suite *s = suite_create("derive");
    TCase *tc = tcase_create("derive");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, gpt_layer_matches_korthikanti);
    tcase_add_test(tc, flash_removes_quadratic_terms);
    tcase_add_test(tc, mlp_stage_by_hand);
    tcase_add_test(tc, tiny_chain_by_hand);
    tcase_add_test(tc, op_and_block_granularity);
    tcase_add_test(tc, no_stage_ends_where_nothing_saves);
    tcase_add_test(tc, static_memory_per_optimizer);
    tcase_add_test(tc, gpt2_small_chain_and_static_memory);
    tcase_add_test(tc, bad_cost_model);
    tcase_add_test(tc, stage_tmp_follows_the_rules);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(derive_suite)
