/* Frozen parameters and requires-grad propagation (planner/model_grad.c): which tensors
 * require a gradient, which nodes run a backward, what each node keeps, the static memory
 * of a half-frozen model by hand, and gradients of the trainable parameters bit-identical
 * to those of the same model unfrozen. */
#include <stdlib.h>
#include <string.h>

#include "planner/derive.h"
#include "planner/schedule.h"
#include "sim/exec.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

/* Token ids [B, T] and targets, B=2 T=4 V=16 C=8, to wrap like FX_BASE. */
#define TOKENS                                                                                   \
    "{'format': 'ckplan-model/1', 'name': 't', 'dims': {'B': 2, 'T': 4, 'C': 8, 'V': 16},"       \
    " 'inputs': [{'name': 'ids', 'shape': ['B', 'T'], 'dtype': 'int32'},"                        \
    " {'name': 'y', 'shape': ['B', 'T'], 'dtype': 'int32'}],"

static const uint64_t SB = 2 * 4, SBH = 2 * 4 * 8; /* rows and elements of a [B, T, C] */

static size_t node(const ck_model *m, const char *name)
{
    for (size_t k = 0; k < m->n_nodes; k++)
        if (strcmp(m->nodes[k].name, name) == 0)
            return k;
    ck_abort_msg("no node %s", name);
    return 0;
}

static bool requires_grad(const ck_model *m, const char *name)
{
    return m->tensors[m->nodes[node(m, name)].output].requires_grad;
}

/* Bytes nodes [first .. last] (by name) save for backward. */
static uint64_t saved(const ck_model *m, const char *first, const char *last)
{
    uint64_t bytes = 0;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_derive_saved_bytes(m, node(m, first), node(m, last) + 1, &bytes, &err), CK_OK);
    return bytes;
}

static ck_chain chain_of(const ck_model *m, ck_granularity g)
{
    ck_chain c;
    ck_err err = {{0}};
    ck_cost_model cm;
    ck_derive_cost_model_default(&cm);
    ck_assert_msg(ck_derive_chain(m, g, &cm, &c, NULL, &err) == CK_OK, "%s", err.msg);
    return c;
}

/* A frozen embedding then a trainable layernorm: nothing is saved before the first
 * trainable node (the gelu between them runs no backward), the layernorm keeps its input
 * and statistics for its parameters' gradients, and the chain has no stage boundary where
 * nothing requires a gradient. */
START_TEST(frozen_embedding_saves_nothing_before_trainable)
{
    const char *fmt = TOKENS "'nodes': [{'name': 'emb', 'op': 'embedding', 'vocab': 'V', 'dim': 'C',"
        " 'frozen': %s, 'inputs': ['ids']},"
        " {'name': 'act', 'op': 'gelu', 'inputs': ['emb']},"
        " {'name': 'ln', 'op': 'layernorm', 'inputs': ['act']},"
        " {'name': 'head', 'op': 'linear', 'out': 'V', 'inputs': ['ln']},"
        " {'name': 'loss', 'op': 'cross_entropy', 'inputs': ['head', 'y']}]}";
    ck_model *m = fx_load(fmt, "true");
    ck_assert(!requires_grad(m, "emb") && !requires_grad(m, "act") && requires_grad(m, "ln"));
    ck_assert(!m->nodes[0].backward && !m->nodes[1].backward && m->nodes[2].backward);
    ck_assert(!m->nodes[0].trainable && m->nodes[2].trainable);
    ck_assert_uint_eq(saved(m, "emb", "act"), 0);
    ck_assert_uint_eq(saved(m, "ln", "ln"), SBH * 4 + 2 * SB * 4);
    ck_chain c = chain_of(m, CK_GRAN_OP);
    ck_assert_str_eq(c.stages[0].name, "emb..ln");
    ck_chain_free(&c);
    ck_model_free(m);
    /* Unfrozen, the gelu keeps its input and the embedding's output is a stage boundary. */
    m = fx_load(fmt, "false");
    ck_assert_uint_eq(saved(m, "emb", "act"), SBH * 4);
    c = chain_of(m, CK_GRAN_OP);
    ck_assert_str_eq(c.stages[0].name, "emb");
    ck_chain_free(&c);
    ck_model_free(m);
}
END_TEST

/* x -> lin1 -> lin2 (frozen) -> ln (frozen) -> lin3 -> mse, x f32 (it requires a gradient,
 * as the chain's y_0 is computed). The frozen linear keeps nothing: its input is needed only
 * for its weight's gradient; the frozen layernorm, whose input requires a gradient, keeps
 * its input and statistics (the input's gradient reads them). */
START_TEST(frozen_linear_between_trainable)
{
    ck_model *m = fx_load(FX_BASE "'nodes': [{'name': 'lin1', 'op': 'linear', 'out': 'C', 'inputs': ['x']},"
        " {'name': 'lin2', 'op': 'linear', 'out': 'C', 'frozen': true, 'inputs': ['lin1']},"
        " {'name': 'ln', 'op': 'layernorm', 'frozen': true, 'inputs': ['lin2']},"
        " {'name': 'lin3', 'op': 'linear', 'out': 'C', 'inputs': ['ln']},"
        " {'name': 'loss', 'op': 'mse', 'inputs': ['lin3', 'y']}]}");
    ck_assert(requires_grad(m, "lin2") && requires_grad(m, "ln"));
    ck_assert(m->nodes[1].backward && !m->nodes[1].trainable);
    ck_assert_uint_eq(saved(m, "lin1", "lin1"), SBH * 4);
    ck_assert_uint_eq(saved(m, "lin2", "lin2"), 0);
    ck_assert_uint_eq(saved(m, "ln", "ln"), SBH * 4 + 2 * SB * 4);
    ck_assert_uint_eq(saved(m, "lin3", "lin3"), SBH * 4);
    ck_model_free(m);
}
END_TEST

/* mul and swiglu keep an input only for the other input's gradient (PyTorch's MulBackward0
 * saves self only when other requires a gradient): with e frozen (no gradient) and g
 * trainable, mul(e, g) keeps e only; swiglu(gate e, up g) keeps the gate only, since up's
 * gradient reads silu(gate); swiglu(gate g, up e) keeps both. */
START_TEST(two_input_ops_keep_what_the_required_gradients_read)
{
    static const char *const cases[][2] = {{"mul', 'inputs': ['e', 'g", "1"},
                                           {"swiglu', 'inputs': ['e', 'g", "1"},
                                           {"swiglu', 'inputs': ['g', 'e", "2"}};
    for (size_t i = 0; i < 3; i++) {
        ck_model *m = fx_load(TOKENS "'nodes': ["
            "{'name': 'e', 'op': 'embedding', 'vocab': 'V', 'dim': 'C', 'frozen': true, 'inputs': ['ids']},"
            " {'name': 'g', 'op': 'embedding', 'vocab': 'V', 'dim': 'C', 'inputs': ['ids']},"
            " {'name': 'both', 'op': '%s']},"
            " {'name': 'head', 'op': 'linear', 'out': 'V', 'inputs': ['both']},"
            " {'name': 'loss', 'op': 'cross_entropy', 'inputs': ['head', 'y']}]}", cases[i][0]);
        ck_assert_uint_eq(saved(m, "both", "both"), (uint64_t)atoi(cases[i][1]) * SBH * 4);
        ck_model_free(m);
    }
}
END_TEST

/* A layer block; `frozen_layers` instances of it frozen with the embedding, then one
 * trainable instance, then a frozen head. */
#define LAYERED                                                                                  \
    TOKENS "'blocks': {'layer': {'input': 'x', 'nodes': ["                                      \
    "{'name': 'ln', 'op': 'layernorm', 'inputs': ['x']},"                                       \
    " {'name': 'fc1', 'op': 'linear', 'out': '4*C', 'inputs': ['ln']},"                        \
    " {'name': 'act', 'op': 'gelu', 'inputs': ['fc1']},"                                        \
    " {'name': 'fc2', 'op': 'linear', 'out': 'C', 'inputs': ['act']},"                          \
    " {'name': 'drop', 'op': 'dropout', 'p': 0.1, 'inputs': ['fc2']},"                          \
    " {'name': 'res', 'op': 'add', 'inputs': ['x', 'drop']}]}},"                                \
    " 'nodes': [{'name': 'emb', 'op': 'embedding', 'vocab': 'V', 'dim': 'C', 'frozen': %s, 'inputs': ['ids']}," \
    " {'name': 'h', 'block': 'layer', 'repeat': 3, 'frozen': %s, 'inputs': ['emb']},"           \
    " {'name': 'last', 'block': 'layer', 'inputs': ['h']},"                                     \
    " {'name': 'head', 'op': 'linear', 'out': 'V', 'frozen': %s, 'inputs': ['last']},"          \
    " {'name': 'loss', 'op': 'cross_entropy', 'inputs': ['head', 'y']}]}"

/* All frozen but the last layer: the frozen layers keep nothing (their dropout masks are
 * transients of their forwards), the last one keeps what it keeps unfrozen (its input needs
 * no gradient, but its parameters' gradients read the same tensors), the frozen head keeps
 * nothing; at block granularity the frozen prefix is a stage, the last layer another. */
START_TEST(all_frozen_but_the_last_layer)
{
    ck_model *m = fx_load(LAYERED, "true", "true", "true");
    ck_model *u = fx_load(LAYERED, "false", "false", "false");
    uint64_t layer = SBH * 4 + 2 * SB * 4 + SBH * 4 + 4 * SBH * 4 + 4 * SBH * 4 + SBH;
    ck_assert_uint_eq(saved(u, "h.0.ln", "h.0.res"), layer);
    ck_assert_uint_eq(saved(m, "emb", "h.2.res"), 0);
    ck_assert_uint_eq(saved(m, "last.0.ln", "last.0.res"), layer);
    ck_assert_uint_eq(saved(m, "head", "head"), 0);
    ck_assert_uint_eq(saved(u, "head", "head"), SBH * 4);
    const ck_node *drop = &m->nodes[node(m, "h.1.drop")];
    ck_assert_uint_eq(drop->n_scratch, 1);
    ck_assert_uint_eq(drop->info.fwd_ws_bytes, SBH); /* its u8 mask */
    ck_assert(!drop->backward && m->nodes[node(m, "last.0.ln")].backward);
    /* The frozen prefix ends where the training layer begins, so that the layer is a stage
     * of its own (--planner every); its input needs no gradient, and none is made. */
    ck_chain c = chain_of(m, CK_GRAN_BLOCK);
    ck_assert_uint_eq(c.n_stages, 3);
    ck_assert_str_eq(c.stages[0].name, "emb..h.2");
    ck_assert_str_eq(c.stages[1].name, "last.0");
    ck_chain_free(&c);
    ck_model_free(m);
    ck_model_free(u);
}
END_TEST

/* Static memory by hand: three linears C=8 -> C with bias (72 parameters each), the middle
 * one frozen, bf16 parameters with f32 master weights and adam. All 216 parameters are
 * stored (bf16); the 144 trainable ones have gradients (bf16), adam's two f32 moments and an
 * f32 master copy; the targets y (f32 [2, 4, 8]) are held. */
START_TEST(static_memory_of_a_half_frozen_model)
{
    ck_model *m = fx_load(FX_BASE "'dtype': 'bf16', 'training': {'optimizer': 'adam',"
        " 'param_dtype': 'bf16', 'master_weights': true},"
        " 'nodes': [{'name': 'a', 'op': 'linear', 'out': 'C', 'inputs': ['x']},"
        " {'name': 'b', 'op': 'linear', 'out': 'C', 'frozen': true, 'inputs': ['a']},"
        " {'name': 'c', 'op': 'linear', 'out': 'C', 'inputs': ['b']},"
        " {'name': 'loss', 'op': 'mse', 'inputs': ['c', 'y']}]}");
    ck_static_mem s;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_derive_static_memory(m, NULL, &s, &err), CK_OK);
    ck_assert_uint_eq(s.n_params, 216);
    ck_assert_uint_eq(s.n_trainable, 144);
    ck_assert_uint_eq(s.params, 216 * 2);
    ck_assert_uint_eq(s.grads, 144 * 2);
    ck_assert_uint_eq(s.optimizer, 144 * 8);
    ck_assert_uint_eq(s.master, 144 * 4);
    ck_assert_uint_eq(s.held_inputs, 2 * 4 * 8 * 2);
    ck_assert_uint_eq(s.total, 216 * 2 + 144 * (2 + 8 + 4) + 128);
    ck_model_free(m);
}
END_TEST

/* A GPT-like model (tied head, attention with dropout), split into two layer instances:
 * `h` frozen with the embedding and its tied head (frozen: the table is one tensor), `g`
 * and ln_f trainable; or all trainable. */
#define GPT                                                                                      \
    "{'format': 'ckplan-model/1', 'name': 'g', 'dims': {'B': 2, 'T': 8, 'C': 16, 'H': 2, 'V': 32}," \
    " 'training': {'optimizer': 'adam'}, 'inputs': [{'name': 'ids', 'shape': ['B', 'T'], 'dtype': 'int32'}," \
    " {'name': 'y', 'shape': ['B', 'T'], 'dtype': 'int32'}],"                                   \
    " 'blocks': {'layer': {'input': 'x', 'nodes': ["                                            \
    "{'name': 'ln1', 'op': 'layernorm', 'inputs': ['x']},"                                      \
    " {'name': 'qkv', 'op': 'linear', 'out': '3*C', 'inputs': ['ln1']},"                        \
    " {'name': 'attn', 'op': 'attention', 'heads': 'H', 'dropout': 0.1, 'inputs': ['qkv']},"    \
    " {'name': 'proj', 'op': 'linear', 'out': 'C', 'inputs': ['attn']},"                        \
    " {'name': 'res1', 'op': 'add', 'inputs': ['x', 'proj']},"                                  \
    " {'name': 'ln2', 'op': 'rmsnorm', 'inputs': ['res1']},"                                    \
    " {'name': 'up', 'op': 'linear', 'out': '4*C', 'inputs': ['ln2']},"                         \
    " {'name': 'gate', 'op': 'linear', 'out': '4*C', 'inputs': ['ln2']},"                       \
    " {'name': 'glu', 'op': 'swiglu', 'inputs': ['gate', 'up']},"                               \
    " {'name': 'down', 'op': 'linear', 'out': 'C', 'inputs': ['glu']},"                         \
    " {'name': 'res2', 'op': 'add', 'inputs': ['res1', 'down']}]}},"                            \
    " 'nodes': [{'name': 'emb', 'op': 'embedding', 'vocab': 'V', 'dim': 'C', 'positions': 'T', 'frozen': %s, 'inputs': ['ids']}," \
    " {'name': 'drop', 'op': 'dropout', 'p': 0.1, 'inputs': ['emb']},"                          \
    " {'name': 'h', 'block': 'layer', 'repeat': 2, 'frozen': %s, 'inputs': ['drop']},"          \
    " {'name': 'g', 'block': 'layer', 'repeat': 2, 'inputs': ['h']},"                           \
    " {'name': 'ln_f', 'op': 'layernorm', 'inputs': ['g']},"                                    \
    " {'name': 'head', 'op': 'linear', 'out': 'V', 'bias': false, 'tied': true, 'frozen': %s, 'inputs': ['ln_f']}," \
    " {'name': 'loss', 'op': 'cross_entropy', 'inputs': ['head', 'y']}]}"

/* One step of the store-everything schedule, from the initial parameters (an update would
 * move the unfrozen model's other parameters); returns its gradients (malloc'ed) and their
 * count. */
static float *step_gradients(const ck_model *m, size_t *n)
{
    ck_err err = {{0}};
    ck_cost_model cm;
    ck_derive_cost_model_default(&cm);
    ck_chain c;
    size_t *first = NULL;
    ck_assert_msg(ck_derive_chain(m, CK_GRAN_OP, &cm, &c, &first, &err) == CK_OK, "%s", err.msg);
    ck_exec *e = NULL;
    ck_exec_opts eo = {.seed = 3};
    ck_assert_msg(ck_exec_create(m, &c, first, &eo, &e, &err) == CK_OK, "%s", err.msg);
    ck_schedule s = {0};
    ck_assert_int_eq(ck_schedule_baseline(&c, &s, &err), CK_OK);
    ck_assert_msg(ck_exec_step(e, &s, 0, NULL, NULL, &err) == CK_OK, "%s", err.msg);
    const float *g = ck_exec_gradients(e, n);
    float *copy = malloc(*n * sizeof *copy + 1);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, g, *n * sizeof *copy);
    ck_schedule_free(&s);
    ck_exec_free(e);
    ck_chain_free(&c);
    free(first);
    return copy;
}

/* The trainable parameters' gradients are those of the same model unfrozen, bit for bit:
 * the executor lays out trainable nodes' parameters first, in node order, so the frozen
 * model's gradients are the unfrozen ones' slices of the trainable nodes, in node order. */
START_TEST(trainable_gradients_are_those_of_the_unfrozen_model)
{
    ck_model *m = fx_load(GPT, "true", "true", "true");
    ck_model *u = fx_load(GPT, "false", "false", "false");
    size_t nf, nu;
    float *gf = step_gradients(m, &nf), *gu = step_gradients(u, &nu);
    size_t at = 0, want = 0;
    for (size_t k = 0; k < m->n_nodes; k++) {
        size_t n = (size_t)m->nodes[k].info.n_params;
        if (m->nodes[k].trainable) {
            ck_assert_uint_le(want + n, nf);
            ck_assert_msg(memcmp(gf + want, gu + at, n * sizeof *gf) == 0, "%s's gradients differ",
                          m->nodes[k].name);
            want += n;
        }
        at += n;
    }
    ck_assert_uint_eq(want, nf);
    ck_assert_uint_eq(at, nu);
    ck_assert_uint_gt(nf, 0);
    free(gf);
    free(gu);
    ck_model_free(m);
    ck_model_free(u);
}
END_TEST

START_TEST(frozen_is_refused_where_it_means_nothing)
{
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'a', 'op': 'gelu', 'frozen': true, 'inputs': ['x']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['a', 'y']}]}"),
                  FX_FILE ": nodes[0].frozen: expected only on a node with parameters",
                  "gelu has no parameters to freeze", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'blocks': {'b': {'input': 'i', 'nodes': [{'name': 'r', 'op': 'relu', 'inputs': ['i']}]}},"
                            " 'nodes': [{'name': 'a', 'block': 'b', 'frozen': true, 'inputs': ['x']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['a', 'y']}]}"),
                  FX_FILE ": nodes[0].frozen: expected only on an instance of a block with parameters",
                  "block \"b\" has no node", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'a', 'op': 'linear', 'out': 'C', 'frozen': 1, 'inputs': ['x']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['a', 'y']}]}"),
                  FX_FILE ": nodes[0].frozen", NULL);
    fx_assert_has(fx_refuse(GPT, "true", "false", "false"),
                  FX_FILE ": nodes[5].frozen: expected true, as on embedding \"emb\" whose table "
                  "this head shares", NULL);
    fx_assert_has(fx_refuse(TOKENS "'nodes': [{'name': 'e', 'op': 'embedding', 'vocab': 'V', 'dim': 'C',"
                            " 'frozen': true, 'inputs': ['ids']},"
                            " {'name': 'head', 'op': 'linear', 'out': 'V', 'frozen': true, 'inputs': ['e']},"
                            " {'name': 'loss', 'op': 'cross_entropy', 'inputs': ['head', 'y']}]}"),
                  FX_FILE ": nodes: every node with parameters is frozen", NULL);
}
END_TEST

Suite *frozen_suite(void)
{
    Suite *s = suite_create("frozen");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, frozen_embedding_saves_nothing_before_trainable);
    tcase_add_test(tc, frozen_linear_between_trainable);
    tcase_add_test(tc, two_input_ops_keep_what_the_required_gradients_read);
    tcase_add_test(tc, all_frozen_but_the_last_layer);
    tcase_add_test(tc, static_memory_of_a_half_frozen_model);
    tcase_add_test(tc, trainable_gradients_are_those_of_the_unfrozen_model);
    tcase_add_test(tc, frozen_is_refused_where_it_means_nothing);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(frozen_suite)
