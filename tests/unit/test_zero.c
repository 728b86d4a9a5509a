/* Data-parallel layouts: ZeRO's bytes per parameter (Rajbhandari et al. 2020, section 5)
 * from ckplan's own derivation, tensor by tensor; the rounding of shares that do not
 * divide; the all-gather and reduce-scatter buffers of the model's units, by hand; and the
 * static_over_budget warning's figures, which must be the derivation's. */
#include <stdio.h>

#include "planner/derive.h"
#include "planner/size.h"
#include "planner/warning.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

/* Two instances of a residual MLP block (up.weight [256, 64], up.bias [256], down.weight
 * [64, 256], down.bias [64]: 33088 elements each) and a layernorm (gamma, beta [64]):
 * every tensor divides by 64. Adam, f32 y held for the step. */
#define EVEN                                                                                     \
    "{'format': 'ckplan-model/1', 'name': 'even', 'dims': {'B': 2, 'C': 64, 'W': 256},"         \
    " 'training': {'optimizer': 'adam'},"                                                        \
    " 'inputs': [{'name': 'x', 'shape': ['B', 'C']}, {'name': 'y', 'shape': ['B', 'C']}],"      \
    " 'blocks': {'res': {'input': 'u', 'nodes': ["                                              \
    "{'name': 'up', 'op': 'linear', 'out': 'W', 'inputs': ['u']},"                              \
    " {'name': 'act', 'op': 'gelu', 'inputs': ['up']},"                                          \
    " {'name': 'down', 'op': 'linear', 'out': 'C', 'inputs': ['act']},"                         \
    " {'name': 'sum', 'op': 'add', 'inputs': ['u', 'down']}]}},"                                \
    " 'nodes': [{'name': 'h', 'block': 'res', 'repeat': 2, 'inputs': ['x']},"                   \
    " {'name': 'norm', 'op': 'layernorm', 'inputs': ['h']},"                                    \
    " {'name': 'loss', 'op': 'mse', 'inputs': ['norm', 'y']}]}"
#define EVEN_LAYER 33088ULL
#define EVEN_PARAMS (2 * EVEN_LAYER + 128)

/* Token ids -> embedding [512, 64] (32768) -> 4 layers (ln 128, fc1 [256, 64] + 256,
 * fc2 [64, 256] + 64: 33216 each) -> head linear [512, 64] + 512 (33280) -> loss. Units:
 * the embedding, each layer, the head with the loss. The head's frozenness is %s. */
#define LAYERED                                                                                  \
    "{'format': 'ckplan-model/1', 'name': 't', 'dims': {'B': 2, 'T': 4, 'C': 64, 'V': 512},"    \
    " 'training': {'optimizer': 'adam'},"                                                        \
    " 'inputs': [{'name': 'ids', 'shape': ['B', 'T'], 'dtype': 'int32'},"                        \
    " {'name': 'y', 'shape': ['B', 'T'], 'dtype': 'int32'}],"                                    \
    " 'blocks': {'layer': {'input': 'x', 'nodes': ["                                            \
    "{'name': 'ln', 'op': 'layernorm', 'inputs': ['x']},"                                       \
    " {'name': 'fc1', 'op': 'linear', 'out': '4*C', 'inputs': ['ln']},"                        \
    " {'name': 'act', 'op': 'gelu', 'inputs': ['fc1']},"                                        \
    " {'name': 'fc2', 'op': 'linear', 'out': 'C', 'inputs': ['act']},"                          \
    " {'name': 'res', 'op': 'add', 'inputs': ['x', 'fc2']}]}},"                                 \
    " 'nodes': [{'name': 'emb', 'op': 'embedding', 'vocab': 'V', 'dim': 'C', 'inputs': ['ids']}," \
    " {'name': 'h', 'block': 'layer', 'repeat': 4, 'inputs': ['emb']},"                         \
    " {'name': 'head', 'op': 'linear', 'out': 'V', 'frozen': %s, 'inputs': ['h']},"             \
    " {'name': 'loss', 'op': 'cross_entropy', 'inputs': ['head', 'y']}]}"
#define EMB 32768ULL
#define LAYER 33216ULL
#define HEAD 33280ULL

static ck_static_mem derive(const ck_model *m, uint64_t dp, unsigned zero)
{
    ck_static_mem s;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_derive_static_memory(m, &(ck_layout){.dp = dp, .zero = zero}, &s, &err), CK_OK);
    ck_assert_uint_eq(s.total, s.params + s.grads + s.optimizer + s.master + s.held_inputs +
                                   s.gather + s.reduce_scatter);
    return s;
}

/* What ZeRO calls model states: everything but held inputs and buffers. */
static uint64_t model_states(ck_static_mem s)
{
    return s.params + s.grads + s.optimizer + s.master;
}

static ck_model *load_even(void)
{
    ck_model_opts o = {.recipe = "bf16-master"};
    return fx_load_opts(&o, EVEN);
}

/* Mixed precision with Adam: 2 bytes of parameter, 2 of gradient, K = 12 of f32 master
 * weights and moments per parameter; the paper's (2 + 2 + K) Psi sharded stage by stage. */
START_TEST(zero_bytes_per_parameter)
{
    ck_model *m = load_even();
    ck_static_mem one = derive(m, 1, 0);
    const uint64_t psi = one.n_params, k = 12;
    ck_assert_uint_eq(psi, EVEN_PARAMS);
    ck_assert_uint_eq(one.optimizer + one.master, k * psi);
    ck_assert_uint_eq(model_states(one), (2 + 2 + k) * psi);
    static const uint64_t ranks[] = {2, 4, 8, 16, 64};
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
        uint64_t n = ranks[i];
        ck_static_mem z0 = derive(m, n, 0), z1 = derive(m, n, 1), z2 = derive(m, n, 2),
                      z3 = derive(m, n, 3);
        ck_assert_uint_eq(model_states(z0), (2 + 2 + k) * psi);
        ck_assert_uint_eq(model_states(z1), 2 * psi + 2 * psi + k * psi / n);
        ck_assert_uint_eq(model_states(z2), 2 * psi + (2 + k) * psi / n);
        ck_assert_uint_eq(model_states(z3), (2 + 2 + k) * psi / n);
        ck_assert_uint_eq(z3.params, 2 * psi / n);
        ck_assert_uint_eq(z3.held_inputs, one.held_inputs); /* never sharded */
        ck_assert_uint_eq(z0.total, one.total);
        ck_assert_uint_eq(z1.gather + z1.reduce_scatter, 0);
    }
    ck_model_free(m);
}
END_TEST

/* One rank, or stage 0: nothing is sharded and no buffer is added, whatever the other. */
START_TEST(layouts_that_shard_nothing)
{
    ck_model *m = load_even();
    ck_static_mem none;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_derive_static_memory(m, NULL, &none, &err), CK_OK);
    for (unsigned zero = 0; zero <= CK_LAYOUT_MAX_ZERO; zero++) {
        ck_static_mem s = derive(m, 1, zero);
        ck_assert_uint_eq(s.total, none.total);
        ck_assert_uint_eq(s.gather + s.reduce_scatter, 0);
    }
    ck_assert_uint_eq(derive(m, CK_LAYOUT_MAX_DP, 0).total, none.total);
    ck_model_free(m);
}
END_TEST

/* x [2, 4, 60] -> linear 60 -> 70 with bias -> layernorm -> linear 70 -> 60 without:
 * tensors of 4200, 70, 70, 70 and 4200 elements, which 8 does not divide. */
#define SHAPED                                                                                  \
    "{'format': 'ckplan-model/1', 'name': 's', 'dims': {'B': 2, 'T': 4, 'C': 60, 'H': 70},"     \
    " 'training': {'optimizer': 'adam'},"                                                        \
    " 'inputs': [{'name': 'x', 'shape': ['B', 'T', 'C']}, {'name': 'y', 'shape': ['B', 'T', 'C']}]," \
    " 'nodes': [{'name': 'up', 'op': 'linear', 'out': 'H', 'inputs': ['x']},"                   \
    " {'name': 'ln', 'op': 'layernorm', 'inputs': ['up']},"                                     \
    " {'name': 'down', 'op': 'linear', 'out': 'C', 'bias': false, 'inputs': ['ln']},"           \
    " {'name': 'loss', 'op': 'mse', 'inputs': ['down', 'y']}]}"

/* Each tensor's share is rounded up on its own: over 8 ranks 4200 -> 525 and 70 -> 9
 * elements (1077 in all, not 8610 / 8 = 1076.25); Adam's 8 bytes a parameter follow the
 * element shard, as the rank's moments do: 8 x 525 and 8 x 9, not 33600 / 8 and 560 / 8. */
START_TEST(shares_round_up_per_tensor)
{
    ck_model_opts o = {.recipe = "bf16-master"};
    ck_model *m = fx_load_opts(&o, SHAPED);
    ck_static_mem s = derive(m, 8, 3);
    ck_assert_uint_eq(s.params, 2 * (2 * 525 + 3 * 9));
    ck_assert_uint_eq(s.grads, 2 * (2 * 525 + 3 * 9));
    ck_assert_uint_eq(s.master, 4 * (2 * 525 + 3 * 9));
    ck_assert_uint_eq(s.optimizer, 8 * (2 * 525 + 3 * 9));
    s = derive(m, 3, 1); /* 4200 -> 1400, 70 -> 24 */
    ck_assert_uint_eq(s.master, 4 * (2 * 1400 + 3 * 24));
    ck_assert_uint_eq(s.optimizer, 8 * (2 * 1400 + 3 * 24));
    ck_assert_uint_eq(s.params, 2 * 8610); /* ZeRO-1 keeps parameters whole */
    ck_model_free(m);
}
END_TEST

/* Whatever the counts: a stage's model states never above the stage before, and the
 * ranks' shares together never below the whole. */
START_TEST(stages_shrink_and_shares_cover_the_whole)
{
    ck_model_opts o = {.recipe = "bf16-master"};
    ck_model *models[] = {fx_load_opts(&o, SHAPED), load_even()};
    for (size_t i = 0; i < 2; i++) {
        uint64_t whole = model_states(derive(models[i], 1, 0));
        for (uint64_t n = 1; n <= 40; n++) {
            uint64_t before = whole;
            for (unsigned zero = 0; zero <= CK_LAYOUT_MAX_ZERO; zero++) {
                uint64_t states = model_states(derive(models[i], n, zero));
                ck_assert_uint_le(states, before);
                ck_assert_uint_ge(n * states, whole);
                before = states;
            }
        }
        ck_model_free(models[i]);
    }
}
END_TEST

/* ZeRO-3 gathers a unit and prefetches the next: the largest neighbouring pair is the last
 * layer and the head; ZeRO-2 and 3 reduce-scatter the largest unit's gradients, the head's
 * while it trains, a layer's when it is frozen. bf16-master: 2-byte parameters, gradients. */
START_TEST(buffers_of_the_largest_units)
{
    ck_model_opts o = {.recipe = "bf16-master"};
    ck_model *m = fx_load_opts(&o, LAYERED, "false");
    ck_assert_uint_eq(derive(m, 1, 0).n_params, EMB + 4 * LAYER + HEAD);
    ck_static_mem z3 = derive(m, 4, 3), z2 = derive(m, 4, 2);
    ck_assert_uint_eq(z3.gather, 2 * (LAYER + HEAD));
    ck_assert_uint_eq(z3.reduce_scatter, 2 * HEAD);
    ck_assert_uint_eq(z2.gather, 0);
    ck_assert_uint_eq(z2.reduce_scatter, 2 * HEAD);
    ck_model_free(m);
    m = fx_load_opts(&o, LAYERED, "true");
    z3 = derive(m, 4, 3);
    ck_assert_uint_eq(z3.gather, 2 * (LAYER + HEAD)); /* frozen parameters are gathered too */
    ck_assert_uint_eq(z3.reduce_scatter, 2 * LAYER);
    ck_assert_uint_eq(z3.grads, 2 * (EMB + 4 * LAYER) / 4);
    ck_model_free(m);
}
END_TEST

/* The warning's per-GPU figures are the derivation's at 8 GPUs, and its fewest GPU counts
 * the smallest at which the derivation fits. */
START_TEST(warning_figures_are_the_derivation)
{
    ck_model *m = load_even();
    ck_static_mem whole = derive(m, 1, 0);
    const uint64_t budget = 4 * whole.n_params, act = 1000; /* parameters and gradients */
    ck_sharding_figures f;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_warning_sharding_figures(m, &whole, budget, act, &f, &err), CK_OK);
    for (unsigned zero = 1; zero <= 3; zero++) {
        ck_static_mem at8 = derive(m, CK_WARNING_SHOWN_GPUS, zero);
        ck_assert_uint_eq(f.per_gpu[zero - 1], at8.total);
        uint64_t n = f.fewest[zero - 1];
        if (n == 0) {
            ck_assert_uint_gt(derive(m, CK_WARNING_MAX_GPUS, zero).total + act, budget);
            continue;
        }
        ck_assert_uint_le(derive(m, n, zero).total + act, budget);
        if (n > 1)
            ck_assert_uint_gt(derive(m, n - 1, zero).total + act, budget);
    }
    ck_assert_uint_eq(f.fewest[CK_ZERO_1], 0); /* keeps 4 bytes a parameter whole */
    ck_assert_uint_gt(f.fewest[CK_ZERO_3], 1);
    ck_assert_uint_eq(f.per_gpu[CK_OFFLOAD], whole.total - whole.optimizer - whole.master);
    ck_warning x;
    ck_assert_int_eq(ck_warning_static_over_budget(m, &whole, budget, act, &x, &err), CK_OK);
    char z3[32], expect[160];
    ck_size_format(f.per_gpu[CK_ZERO_3], z3, sizeof z3);
    snprintf(expect, sizeof expect, "(and parameters) over 8 GPUs %s, fits with the smallest plan "
             "from %llu GPUs", z3, (unsigned long long)f.fewest[CK_ZERO_3]);
    fx_assert_has(x.message, expect, NULL);
    ck_model_free(m);
}
END_TEST

static Suite *zero_suite(void)
{
    Suite *s = suite_create("zero");
    TCase *tc = tcase_create("zero");
    tcase_add_test(tc, zero_bytes_per_parameter);
    tcase_add_test(tc, layouts_that_shard_nothing);
    tcase_add_test(tc, shares_round_up_per_tensor);
    tcase_add_test(tc, stages_shrink_and_shares_cover_the_whole);
    tcase_add_test(tc, buffers_of_the_largest_units);
    tcase_add_test(tc, warning_figures_are_the_derivation);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(zero_suite)
