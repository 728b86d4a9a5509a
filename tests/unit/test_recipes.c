/* Training recipes and optimizers: the static memory each keeps, against hand counts, the
 * activation dtype a recipe sets, which of --recipe, training.recipe and the file's own
 * dtypes wins, and the parameter count by part. */
#include "planner/training.h"

#include <string.h>

#include "planner/derive.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

/* x [2, 4, 60] -> up: linear 60 -> 70 with bias -> ln: layernorm -> down: linear 70 -> 60,
 * no bias -> mse against y. The parameter tensors: up.weight [70, 60] (4200 elements),
 * up.bias [70], ln.gamma [70], ln.beta [70], down.weight [60, 70] (4200): 8610 in all. The
 * first %s is put before "inputs": a "training" object, a "dtype". */
#define SHAPED                                                                                  \
    "{'format': 'ckplan-model/1', 'name': 's', 'dims': {'B': 2, 'T': 4, 'C': 60, 'H': 70}, %s"  \
    " 'inputs': [{'name': 'x', 'shape': ['B', 'T', 'C']}, {'name': 'y', 'shape': ['B', 'T', 'C']}]," \
    " 'nodes': [{'name': 'up', 'op': 'linear', 'out': 'H', 'inputs': ['x']},"                   \
    " {'name': 'ln', 'op': 'layernorm', 'inputs': ['up']},"                                     \
    " {'name': 'down', 'op': 'linear', 'out': 'C', 'bias': false, 'inputs': ['ln']},"           \
    " {'name': 'loss', 'op': 'mse', 'inputs': ['down', 'y']}]}"
#define SHAPED_PARAMS 8610ULL
#define Y_ELEMENTS (2 * 4 * 60)

/* Optimizer state of SHAPED, by hand:
 * adafactor: f32 row and column for each matrix, full for each vector:
 *   4 * ((70 + 60) + 70 + 70 + 70 + (60 + 70)) = 4 * 470;
 * adam8bit: the two matrices (4200 >= 4096 elements) keep two u8 states and one f32 absmax
 *   per 256 elements each: 2 * (4200 + 4 * 17) apiece; the three vectors (70 < 4096) two
 *   f32 states: 2 * 4 * 210. */
#define ADAFACTOR_BYTES (4ULL * 470)
#define ADAM8BIT_BYTES (2 * 2ULL * (4200 + 4 * 17) + 2 * 4ULL * 210)

static ck_static_mem static_of(const ck_model *m)
{
    ck_static_mem sm;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_derive_static_memory(m, NULL, &sm, &err), CK_OK);
    ck_assert_uint_eq(sm.total, sm.params + sm.grads + sm.optimizer + sm.master + sm.held_inputs);
    return sm;
}

static ck_model *shaped(const char *recipe, const char *optimizer)
{
    ck_model_opts o = {.recipe = recipe, .optimizer = optimizer};
    return fx_load_opts(&o, SHAPED, "");
}

/* What each recipe keeps, by hand: bytes of a parameter, its gradient, its master copy,
 * one element of state that follows the parameters; the activation dtype. */
static const struct {
    const char *recipe;
    uint64_t param, grad, master, state;
    ck_dtype act;
} by_recipe[] = {
    {"fp32", 4, 4, 0, 4, CK_F32},
    {"amp-bf16", 4, 4, 0, 4, CK_BF16},
    {"bf16-master", 2, 2, 4, 4, CK_BF16},
    {"bf16", 2, 2, 0, 2, CK_BF16},
};

static uint64_t state_by_hand(const char *optimizer, uint64_t state)
{
    const uint64_t n = SHAPED_PARAMS;
    return strcmp(optimizer, "momentum") == 0 ? n * state
           : strcmp(optimizer, "adam") == 0 || strcmp(optimizer, "adamw") == 0 ? 2 * n * state
           : strcmp(optimizer, "adafactor") == 0 ? ADAFACTOR_BYTES
           : strcmp(optimizer, "adam8bit") == 0 ? ADAM8BIT_BYTES
                                                : 0; /* none, sgd */
}

START_TEST(every_recipe_and_optimizer_against_hand_counts)
{
    static const char *const optimizers[] = {"none", "sgd", "momentum", "adam", "adamw",
                                             "adafactor", "adam8bit"};
    for (size_t r = 0; r < sizeof by_recipe / sizeof by_recipe[0]; r++)
        for (size_t o = 0; o < sizeof optimizers / sizeof optimizers[0]; o++) {
            ck_model *m = shaped(by_recipe[r].recipe, optimizers[o]);
            ck_static_mem sm = static_of(m);
            const char *what = by_recipe[r].recipe;
            ck_assert_msg(sm.n_params == SHAPED_PARAMS, "%s", what);
            ck_assert_msg(sm.params == SHAPED_PARAMS * by_recipe[r].param, "%s", what);
            ck_assert_msg(sm.grads == SHAPED_PARAMS * by_recipe[r].grad, "%s", what);
            ck_assert_msg(sm.master == SHAPED_PARAMS * by_recipe[r].master, "%s", what);
            ck_assert_msg(sm.optimizer == state_by_hand(optimizers[o], by_recipe[r].state),
                          "%s %s: %llu", what, optimizers[o], (unsigned long long)sm.optimizer);
            /* the recipe's activation dtype is the inputs' default: y, held, is static */
            ck_assert_int_eq(m->dtype, by_recipe[r].act);
            ck_assert_int_eq(m->tensors[0].type.dtype, by_recipe[r].act);
            ck_assert_uint_eq(sm.held_inputs, Y_ELEMENTS * ck_dtype_bytes(by_recipe[r].act));
            ck_model_free(m);
        }
}
END_TEST

static uint64_t per_param_with_adam(const char *recipe)
{
    ck_model *m = shaped(recipe, "adam");
    ck_static_mem sm = static_of(m);
    ck_model_free(m);
    uint64_t weights = sm.total - sm.held_inputs;
    ck_assert_uint_eq(weights % SHAPED_PARAMS, 0);
    return weights / SHAPED_PARAMS;
}

/* The figures: 16 bytes a parameter with Adam in f32, with autocast and with bf16
 * master weights (Megatron, DeepSpeed), 8 in pure bf16. */
START_TEST(bytes_per_parameter_with_adam)
{
    ck_assert_uint_eq(per_param_with_adam("fp32"), 4 + 4 + 8);
    ck_assert_uint_eq(per_param_with_adam("amp-bf16"), 4 + 4 + 8);
    ck_assert_uint_eq(per_param_with_adam("bf16-master"), 2 + 2 + 4 + 8);
    ck_assert_uint_eq(per_param_with_adam("bf16"), 2 + 2 + 4);
}
END_TEST

/* Autocast halves the activations the step saves; the static memory stays. */
START_TEST(amp_bf16_halves_saved_activations)
{
    ck_model *f = shaped("fp32", "adam"), *a = shaped("amp-bf16", "adam");
    uint64_t saved_f, saved_a;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_derive_saved_bytes(f, 0, 2, &saved_f, &err), CK_OK);
    ck_assert_int_eq(ck_derive_saved_bytes(a, 0, 2, &saved_a, &err), CK_OK);
    /* up saves x, ln saves up's output (activations) and its f32 mean and rstd [2, 4] */
    ck_assert_uint_eq(saved_f, 4 * (480 + 560) + 2 * 4 * 8);
    ck_assert_uint_eq(saved_a, 2 * (480 + 560) + 2 * 4 * 8);
    ck_assert_uint_eq(static_of(f).total - static_of(f).held_inputs,
                      static_of(a).total - static_of(a).held_inputs);
    ck_model_free(f);
    ck_model_free(a);
}
END_TEST

static uint64_t state_of(ck_optimizer o, size_t rank, uint64_t d0, uint64_t d1)
{
    ck_training t = {.optimizer = o, .state_dtype = CK_F32};
    ck_param p = {.name = "w", .rank = rank, .dim = {d0, d1}, .numel = rank == 2 ? d0 * d1 : d0};
    uint64_t bytes;
    ck_assert(ck_training_state_bytes(&t, &p, &bytes));
    return bytes;
}

/* bitsandbytes keeps tensors under min_8bit_size (4096 elements) in 32-bit, and rounds
 * the absmax blocks up; Adafactor factors matrices only. */
START_TEST(optimizer_state_at_its_boundaries)
{
    ck_assert_uint_eq(state_of(CK_OPT_ADAM8BIT, 1, 4095, 0), 2 * 4 * 4095);
    ck_assert_uint_eq(state_of(CK_OPT_ADAM8BIT, 1, 4096, 0), 2 * (4096 + 4 * 16));
    ck_assert_uint_eq(state_of(CK_OPT_ADAM8BIT, 2, 4097, 1), 2 * (4097 + 4 * 17));
    ck_assert_uint_eq(state_of(CK_OPT_ADAFACTOR, 2, 1000, 30), 4 * 1030);
    ck_assert_uint_eq(state_of(CK_OPT_ADAFACTOR, 1, 1000, 0), 4 * 1000);
    /* a tied head's table belongs to its embedding, which keeps the state */
    ck_training t = {.optimizer = CK_OPT_ADAFACTOR, .state_dtype = CK_F32};
    ck_param tied = {.name = "weight", .tied = true, .rank = 2, .dim = {50, 8}, .numel = 0};
    uint64_t bytes = 1;
    ck_assert(ck_training_state_bytes(&t, &tied, &bytes));
    ck_assert_uint_eq(bytes, 0);
    /* overflow is reported, not wrapped */
    ck_param huge = {.name = "w", .rank = 1, .dim = {UINT64_MAX / 4, 0}, .numel = UINT64_MAX / 4};
    t.optimizer = CK_OPT_ADAM;
    ck_assert(!ck_training_state_bytes(&t, &huge, &bytes));
}
END_TEST

/* training.recipe is the default; --recipe replaces it and the file's own dtypes. */
START_TEST(recipe_from_the_file_and_the_command_line)
{
    ck_model *m = fx_load(SHAPED, "'training': {'recipe': 'bf16-master', 'optimizer': 'adam'},");
    ck_assert_int_eq(m->training.recipe, CK_RECIPE_BF16_MASTER);
    ck_assert_int_eq(m->dtype, CK_BF16);
    ck_assert(m->training.master_weights);
    ck_model_free(m);
    /* fields that agree with the recipe may be given beside it */
    m = fx_load(SHAPED, "'dtype': 'bf16', 'training': {'recipe': 'bf16-master', 'param_dtype': "
                        "'bf16', 'grad_dtype': 'bf16', 'master_weights': true},");
    ck_assert_int_eq(m->training.param_dtype, CK_BF16);
    ck_model_free(m);
    ck_model_opts fp32 = {.recipe = "fp32"};
    m = fx_load_opts(&fp32, SHAPED, "'dtype': 'bf16', 'training': {'recipe': 'bf16', "
                                    "'param_dtype': 'bf16', 'optimizer': 'adam'},");
    ck_assert_int_eq(m->training.recipe, CK_RECIPE_FP32);
    ck_assert_int_eq(m->dtype, CK_F32);
    ck_assert_int_eq(m->training.param_dtype, CK_F32);
    ck_assert_int_eq(m->training.optimizer, CK_OPT_ADAM); /* the file's, as no --optimizer */
    ck_model_free(m);
    /* without a recipe, the file's mix, with f32 optimizer state */
    m = fx_load(SHAPED, "'dtype': 'f16', 'training': {'param_dtype': 'f16', 'optimizer': 'adam'},");
    ck_assert_int_eq(m->training.recipe, CK_RECIPE_CUSTOM);
    ck_assert_uint_eq(static_of(m).optimizer, 8 * SHAPED_PARAMS);
    ck_assert_uint_eq(static_of(m).params, 2 * SHAPED_PARAMS);
    ck_model_free(m);
}
END_TEST

START_TEST(contradictions_and_unknown_names_are_refused)
{
    fx_assert_has(fx_refuse(SHAPED, "'training': {'recipe': 'bf16', 'param_dtype': 'f32'},"),
                  FX_FILE ": training.param_dtype: f32 contradicts training.recipe \"bf16\", "
                  "which sets param_dtype to bf16", NULL);
    fx_assert_has(fx_refuse(SHAPED, "'training': {'recipe': 'amp-bf16', 'grad_dtype': 'bf16'},"),
                  FX_FILE ": training.grad_dtype: bf16 contradicts training.recipe \"amp-bf16\"", NULL);
    fx_assert_has(fx_refuse(SHAPED, "'dtype': 'f32', 'training': {'recipe': 'amp-bf16'},"),
                  FX_FILE ": dtype: f32 contradicts training.recipe \"amp-bf16\", which sets "
                  "dtype to bf16", NULL);
    fx_assert_has(fx_refuse(SHAPED, "'training': {'recipe': 'bf16-master', 'param_dtype': 'bf16', "
                                    "'master_weights': false},"),
                  FX_FILE ": training.master_weights: false contradicts training.recipe "
                  "\"bf16-master\", which sets master_weights to true", NULL);
    fx_assert_has(fx_refuse(SHAPED, "'training': {'recipe': 'fp16'},"),
                  FX_FILE ": training.recipe: expected one of fp32, amp-bf16, bf16-master, bf16, "
                  "got \"fp16\"", NULL);
    fx_assert_has(fx_refuse(SHAPED, "'training': {'recipe': 7},"), FX_FILE ": training.recipe", NULL);
    ck_model_opts bad = {.recipe = "bf32"};
    fx_assert_has(fx_refuse_opts(&bad, SHAPED, ""), FX_FILE ": --recipe: expected one of fp32, "
                  "amp-bf16, bf16-master, bf16, got \"bf32\"", NULL);
    bad = (ck_model_opts){.optimizer = "lion"};
    fx_assert_has(fx_refuse_opts(&bad, SHAPED, ""), FX_FILE ": --optimizer: expected one of none, "
                  "sgd, momentum, adam, adamw, adafactor, adam8bit, got \"lion\"", NULL);
}
END_TEST

/* docs/model-format.md section 5: V*C + T*C before the first layer, 12C^2 + 13C in each of
 * the 12, and the final layernorm's 2C after them (the head is tied: no parameters). */
START_TEST(gpt2_small_parameters_by_part)
{
    ck_model *m = fx_load_file("models/gpt2-small.json");
    const uint64_t V = 50257, T = 1024, C = 768, L = 12;
    ck_static_mem sm = static_of(m);
    ck_assert_uint_eq(sm.parts.embeddings, V * C + T * C);
    ck_assert_uint_eq(sm.parts.n_layers, L);
    ck_assert_uint_eq(sm.parts.per_layer, 12 * C * C + 13 * C);
    ck_assert_uint_eq(sm.parts.layers, L * (12 * C * C + 13 * C));
    ck_assert_uint_eq(sm.parts.head, 2 * C);
    ck_assert_uint_eq(sm.parts.embeddings + sm.parts.layers + sm.parts.head, sm.n_params);
    ck_model_free(m);
}
END_TEST

/* Instances of different blocks have no one per-layer count, and a top-level op between
 * them belongs to the layers; a model without blocks has no parts. */
START_TEST(parameter_parts_of_other_shapes)
{
    ck_model *m = fx_load(
        FX_BASE "'blocks': {'a': {'input': 'u', 'nodes': [{'name': 'l', 'op': 'linear', 'out': 'C', "
        "'inputs': ['u']}]}, 'b': {'input': 'u', 'nodes': [{'name': 'l', 'op': 'linear', 'out': 'C', "
        "'bias': false, 'inputs': ['u']}, {'name': 'n', 'op': 'layernorm', 'inputs': ['l']}]}},"
        " 'nodes': [{'name': 'pre', 'op': 'linear', 'out': 'C', 'inputs': ['x']},"
        " {'name': 'ha', 'block': 'a', 'repeat': 2, 'inputs': ['pre']},"
        " {'name': 'mid', 'op': 'layernorm', 'inputs': ['ha']},"
        " {'name': 'hb', 'block': 'b', 'repeat': 1, 'inputs': ['mid']},"
        " {'name': 'post', 'op': 'linear', 'out': 'C', 'bias': false, 'inputs': ['hb']},"
        " {'name': 'loss', 'op': 'mse', 'inputs': ['post', 'y']}]}");
    ck_static_mem sm = static_of(m);
    ck_assert_uint_eq(sm.parts.embeddings, 64 + 8);
    ck_assert_uint_eq(sm.parts.n_layers, 3);
    ck_assert_uint_eq(sm.parts.per_layer, 0);
    ck_assert_uint_eq(sm.parts.layers, 2 * (64 + 8) + 16 + (64 + 16));
    ck_assert_uint_eq(sm.parts.head, 64);
    ck_model_free(m);
    m = fx_load(SHAPED, "");
    sm = static_of(m);
    ck_assert_uint_eq(sm.n_params, SHAPED_PARAMS);
    ck_assert_uint_eq(sm.parts.n_layers, 0);
    ck_assert_uint_eq(sm.parts.embeddings + sm.parts.layers + sm.parts.head, 0);
    ck_model_free(m);
}
END_TEST

static Suite *recipes_suite(void)
{
    Suite *s = suite_create("recipes");
    TCase *tc = tcase_create("static");
    tcase_add_test(tc, every_recipe_and_optimizer_against_hand_counts);
    tcase_add_test(tc, bytes_per_parameter_with_adam);
    tcase_add_test(tc, amp_bf16_halves_saved_activations);
    tcase_add_test(tc, optimizer_state_at_its_boundaries);
    tcase_add_test(tc, recipe_from_the_file_and_the_command_line);
    tcase_add_test(tc, contradictions_and_unknown_names_are_refused);
    tcase_add_test(tc, gpt2_small_parameters_by_part);
    tcase_add_test(tc, parameter_parts_of_other_shapes);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(recipes_suite)
