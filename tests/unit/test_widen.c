/* sim/widen: the f32 views the kernels compute on, and the rounding of what they wrote back
 * into 16-bit tensors; and a 16-bit training step against the f32 one. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/workload.h"
#include "sim/exec.h"
#include "sim/kernel.h"
#include "sim/widen.h"
#include "tests/unit/check_main.h"

#define CODES 65536

static bool is_nan_code(ck_dtype d, uint16_t c)
{
    return d == CK_BF16 ? (c & 0x7f80u) == 0x7f80u && (c & 0x7fu)
                        : (c & 0x7c00u) == 0x7c00u && (c & 0x3ffu);
}

/* Every code of a 16-bit buffer reads as its exact value and, written back unchanged,
 * comes back as the same code (NaNs stay NaNs). */
static void every_code_round_trips(ck_dtype d)
{
    uint16_t *buf = malloc(CODES * sizeof *buf);
    ck_assert_ptr_nonnull(buf);
    for (size_t c = 0; c < CODES; c++)
        buf[c] = (uint16_t)c;
    ck_widen w = {0};
    float *v = ck_widen_view(&w, buf, d, CODES, true);
    ck_assert_int_eq(ck_widen_check(&w, NULL), CK_OK);
    ck_assert_ptr_ne(v, (void *)buf);
    ck_assert_uint_eq(w.peak, CODES * sizeof(float));
    for (size_t c = 0; c < CODES; c++) {
        float want = d == CK_BF16 ? ck_kernel_bf16_to_f32((uint16_t)c) : ck_kernel_f16_to_f32((uint16_t)c);
        ck_assert(is_nan_code(d, (uint16_t)c) ? isnan(v[c]) : memcmp(&v[c], &want, 4) == 0);
    }
    ck_widen_finish(&w);
    ck_assert_uint_eq(w.live, 0);
    for (size_t c = 0; c < CODES; c++)
        ck_assert(is_nan_code(d, (uint16_t)c) ? is_nan_code(d, buf[c]) : buf[c] == c);
    free(buf);
}

START_TEST(bf16_codes_round_trip_through_a_view)
{
    every_code_round_trips(CK_BF16);
}
END_TEST

START_TEST(f16_codes_round_trip_through_a_view)
{
    every_code_round_trips(CK_F16);
}
END_TEST

/* A value half-way between two neighbouring codes is stored as the even one; a value a
 * little above the midpoint as the upper one: round to nearest, ties to even, for every
 * finite positive code below the largest. */
static void stores_round_to_nearest_even(ck_dtype d)
{
    uint16_t top = d == CK_BF16 ? 0x7f7f : 0x7bff, n = top;
    uint16_t *buf = calloc(2 * n, sizeof *buf);
    ck_assert_ptr_nonnull(buf);
    ck_widen w = {0};
    float *v = ck_widen_view(&w, buf, d, 2 * (uint64_t)n, true);
    for (uint16_t c = 0; c < n; c++) {
        float lo = ck_kernel_load(d, &c, 0);
        uint16_t c1 = (uint16_t)(c + 1);
        float hi = ck_kernel_load(d, &c1, 0);
        double mid = ((double)lo + hi) / 2; /* exact in f32: one more bit than 16-bit codes */
        v[2 * c] = (float)mid;
        v[2 * c + 1] = nextafterf((float)mid, INFINITY);
    }
    ck_widen_finish(&w);
    for (uint16_t c = 0; c < n; c++) {
        ck_assert_uint_eq(buf[2 * c], (c & 1u) ? c + 1u : c);
        ck_assert_uint_eq(buf[2 * c + 1], c + 1u);
    }
    free(buf);
}

START_TEST(bf16_stores_round_to_nearest_even)
{
    stores_round_to_nearest_even(CK_BF16);
}
END_TEST

START_TEST(f16_stores_round_to_nearest_even)
{
    stores_round_to_nearest_even(CK_F16);
}
END_TEST

/* Between the two 16-bit dtypes a cast is exact to f32 and then rounded once, for every
 * code; f32 to f32 keeps every bit, NaN payloads too. */
START_TEST(casts_between_16_bit_dtypes_round_once)
{
    uint16_t *in = malloc(CODES * sizeof *in), *out = malloc(CODES * sizeof *out);
    ck_assert(in && out);
    for (size_t c = 0; c < CODES; c++)
        in[c] = (uint16_t)c;
    ck_kernel_cast_forward(out, CK_F16, in, CK_BF16, CODES);
    for (size_t c = 0; c < CODES; c++)
        if (!is_nan_code(CK_BF16, (uint16_t)c))
            ck_assert_uint_eq(out[c], ck_kernel_f32_to_f16(ck_kernel_bf16_to_f32((uint16_t)c)));
    ck_kernel_cast_forward(out, CK_BF16, in, CK_F16, CODES);
    for (size_t c = 0; c < CODES; c++)
        if (!is_nan_code(CK_F16, (uint16_t)c))
            ck_assert_uint_eq(out[c], ck_kernel_f32_to_bf16(ck_kernel_f16_to_f32((uint16_t)c)));
    uint32_t bits[3] = {0x7fa00001u, 0x80000000u, 0x3f800001u}, copy[3];
    ck_kernel_cast_forward(copy, CK_F32, bits, CK_F32, 3);
    ck_assert(memcmp(copy, bits, sizeof bits) == 0);
    free(in);
    free(out);
}
END_TEST

/* A gradient accumulated in a pass: read, added to in f32, rounded once. A view only read
 * is never written back; one buffer asked for twice is one view. */
START_TEST(accumulation_reads_adds_and_rounds_once)
{
    uint16_t g[3] = {ck_kernel_f32_to_bf16(1.0f), ck_kernel_f32_to_bf16(-0.3f),
                     ck_kernel_f32_to_bf16(1e-3f)};
    uint16_t x[3], before[3];
    for (size_t i = 0; i < 3; i++)
        x[i] = ck_kernel_f32_to_bf16(0.1f * (float)(i + 1));
    memcpy(before, x, sizeof x);
    float add[3] = {0x1.8p-9f, 0.2f, 3.0f};
    ck_widen w = {0};
    float *dg = ck_widen_view(&w, g, CK_BF16, 3, true);
    ck_assert_ptr_eq(ck_widen_view(&w, g, CK_BF16, 3, true), dg);
    float *xv = ck_widen_view(&w, x, CK_BF16, 3, false);
    ck_assert_int_eq(ck_widen_check(&w, NULL), CK_OK);
    float want[3];
    for (size_t i = 0; i < 3; i++) {
        want[i] = ck_kernel_bf16_to_f32(g[i]) + add[i] + add[i];
        dg[i] += add[i]; /* two contributions, as a node reading one tensor twice */
        dg[i] += add[i];
        xv[i] = 7.0f;
    }
    ck_widen_finish(&w);
    for (size_t i = 0; i < 3; i++)
        ck_assert_uint_eq(g[i], ck_kernel_f32_to_bf16(want[i]));
    /* 1 + 2 * 0.75 * 2^-8 is 1.5 ulps of bf16 above 1: rounded once it is 1 + 2^-7; rounding
     * after each contribution (0.375 of an ulp each, under half) would leave 1. */
    ck_assert_uint_eq(g[0], 0x3f81);
    ck_assert(memcmp(x, before, sizeof x) == 0);
}
END_TEST

/* f32 and integer buffers are their own views, with no scratch. */
START_TEST(f32_and_integer_buffers_pass_through)
{
    float f[4] = {1, 2, 3, 4};
    int32_t ids[4] = {1, 2, 3, 4};
    ck_widen w = {0};
    ck_assert_ptr_eq(ck_widen_view(&w, f, CK_F32, 4, true), f);
    ck_assert_ptr_eq(ck_widen_view(&w, ids, CK_I32, 4, false), ids);
    ck_assert_ptr_null(ck_widen_view(&w, NULL, CK_BF16, 4, true));
    ck_assert_uint_eq(w.n, 0);
    ck_assert_uint_eq(w.peak, 0);
    ck_widen_finish(&w);
}
END_TEST

/* The kernel's workspace is the tracked one when it is large enough, else zeroed scratch. */
START_TEST(workspace_is_scratch_only_when_the_f32_kernel_needs_more)
{
    float ws[8];
    ck_widen w = {0};
    ck_assert_ptr_eq(ck_widen_workspace(&w, ws, sizeof ws, sizeof ws), ws);
    float *big = ck_widen_workspace(&w, ws, sizeof ws, 2 * sizeof ws);
    ck_assert_ptr_nonnull(big);
    ck_assert_ptr_ne(big, ws);
    for (size_t i = 0; i < 16; i++)
        ck_assert(big[i] == 0.0f);
    ck_assert_uint_eq(w.live, 2 * sizeof ws);
    ck_widen_finish(&w);
    ck_assert_uint_eq(w.live, 0);
}
END_TEST

static void load_model(const char *path, ck_workload *w)
{
    ck_err err = {{0}};
    ck_workload_opts wo;
    ck_workload_opts_default(&wo);
    ck_assert_msg(ck_workload_load(path, &wo, w, &err) == CK_OK, "%s", err.msg);
}

/* Standard attention's f32 kernel keeps f32 scores: twice the bytes the op table declares
 * for bf16 scores (B*H*T*T*2); flash attention's row of f32 scores is the same either way. */
START_TEST(kernel_workspace_is_the_f32_description)
{
    ck_workload w;
    load_model("models/gpt2-tiny-bf16.json", &w);
    ck_err err = {{0}};
    bool seen = false;
    for (size_t k = 0; k < w.model->n_nodes; k++) {
        const ck_node *n = &w.model->nodes[k];
        uint64_t ws[2];
        ck_assert_int_eq(ck_widen_kernel_workspace(w.model, n, ws, &err), CK_OK);
        if (n->op->kind == CK_OP_ATTENTION) {
            uint64_t scores = 4 * 4 * 64 * 64; /* B, H, T, T of gpt2-tiny */
            ck_assert_uint_eq(n->info.fwd_ws_bytes, 2 * scores);
            ck_assert_uint_eq(ws[0], 4 * scores);
            ck_assert_uint_eq(ws[1], 4 * scores);
            seen = true;
        } else { /* the op table's own figures (the node's add what no kernel uses) */
            ck_op_info own;
            const ck_ttype *out = &w.model->tensors[n->output].type;
            ck_ttype in[CK_OP_MAX_ARITY];
            for (size_t i = 0; i < n->op->arity; i++)
                in[i] = w.model->tensors[n->inputs[i]].type;
            ck_assert_int_eq(ck_op_describe(n->op, &n->attrs, in, out, &own, "f", "n", &err), CK_OK);
            ck_assert_uint_eq(ws[0], own.fwd_ws_bytes);
            /* cross_entropy's, nll_loss's gradient of the log-probabilities, is logits-sized:
             * in f32, twice the bf16 figure */
            bool logits_sized = n->op->kind == CK_OP_CROSS_ENTROPY;
            ck_assert_uint_eq(ws[1], own.bwd_ws_bytes * (logits_sized ? 2 : 1));
        }
    }
    ck_assert(seen);
    ck_workload_free(&w);
    load_model("models/llama-tiny-f16.json", &w);
    for (size_t k = 0; k < w.model->n_nodes; k++) {
        uint64_t ws[2];
        ck_assert_int_eq(ck_widen_kernel_workspace(w.model, &w.model->nodes[k], ws, &err), CK_OK);
        ck_assert_uint_eq(ws[0], w.model->nodes[k].info.fwd_ws_bytes);
    }
    ck_workload_free(&w);
}
END_TEST

/* ---- a 16-bit step against the f32 one ---- */

typedef struct {
    double loss;
    float *grads;
    size_t n;
    uint64_t static_bytes, predicted_static;
} step_result;

/* An executor of w's model, seed 42, and its store-everything schedule into *base. */
static ck_exec *executor(ck_workload *w, ck_schedule *base)
{
    ck_err err = {{0}};
    ck_exec *e;
    ck_exec_opts opts = {.seed = 42};
    ck_assert_msg(ck_exec_create(w->model, &w->chain, w->stage_first, &opts, &e, &err) == CK_OK,
                  "%s", err.msg);
    ck_assert_int_eq(ck_schedule_baseline(&w->chain, base, &err), CK_OK);
    return e;
}

/* One store-everything step of the model at path. */
static step_result one_step(const char *path)
{
    ck_workload w;
    load_model(path, &w);
    ck_err err = {{0}};
    ck_schedule base = {0};
    ck_exec *e = executor(&w, &base);
    ck_step_stats st;
    ck_assert_msg(ck_exec_step(e, &base, 0, &st, NULL, &err) == CK_OK, "%s", err.msg);
    step_result r = {.loss = st.loss, .static_bytes = st.static_bytes,
                     .predicted_static = w.statics.total};
    const float *g = ck_exec_gradients(e, &r.n);
    r.grads = malloc(r.n * sizeof *g);
    ck_assert_ptr_nonnull(r.grads);
    memcpy(r.grads, g, r.n * sizeof *g);
    ck_schedule_free(&base);
    ck_exec_free(e);
    ck_workload_free(&w);
    return r;
}

/* ||a - b|| / ||b||. */
static double relative_error(const step_result *a, const step_result *b)
{
    double d = 0, n = 0;
    for (size_t i = 0; i < b->n; i++) {
        d += ((double)a->grads[i] - b->grads[i]) * ((double)a->grads[i] - b->grads[i]);
        n += (double)b->grads[i] * b->grads[i];
    }
    return sqrt(d / n);
}

/* The same step (same initial parameters before rounding, tokens and dropout masks) in
 * bf16 and in f32. bf16 keeps 8 significant bits, a relative rounding error of at most
 * 2^-9 (0.2%) per store, and a value goes through a dozen or so rounded stores from the
 * embedding to a gradient: the stated tolerances are 0.1% on the loss (cross-entropy
 * averages the rounding out) and 3% on the gradients (norm of the difference over the
 * f32 norm; measured: 0.9%). A conversion that read or stored the wrong elements is far
 * outside both; the bf16 model's gradients are all bf16 values, amp's f32 ones. */
START_TEST(bf16_step_is_close_to_the_f32_step)
{
    step_result f32 = one_step("models/gpt2-tiny.json");
    const char *models[] = {"models/gpt2-tiny-bf16.json", "models/gpt2-tiny-amp.json"};
    for (size_t m = 0; m < 2; m++) {
        step_result low = one_step(models[m]);
        ck_assert_uint_eq(low.n, f32.n);
        ck_assert_uint_eq(low.static_bytes, low.predicted_static);
        double loss_err = fabs(low.loss - f32.loss) / f32.loss, grad_err = relative_error(&low, &f32);
        fprintf(stderr, "%s: loss %.6f (f32 %.6f), gradients' relative error %.4f\n", models[m],
                low.loss, f32.loss, grad_err);
        ck_assert_msg(loss_err < 0.001, "%s: loss %g against %g", models[m], low.loss, f32.loss);
        ck_assert_msg(grad_err < 0.03, "%s: gradients off by %g", models[m], grad_err);
        ck_assert(low.loss != f32.loss);
        size_t exact16 = 0;
        for (size_t i = 0; i < low.n; i++)
            exact16 += ck_kernel_bf16_to_f32(ck_kernel_f32_to_bf16(low.grads[i])) == low.grads[i];
        /* bf16 gradients are all bf16 values; amp's are f32 ones, few of them bf16. */
        if (m == 0)
            ck_assert_uint_eq(exact16, low.n);
        else
            ck_assert_uint_lt(exact16, low.n / 2);
        free(low.grads);
    }
    ck_assert_uint_eq(f32.static_bytes, f32.predicted_static);
    free(f32.grads);
}
END_TEST

/* How many gammas (initialised to ones) of gpt2-tiny-bf16 left 1.0 in four Adam steps,
 * with its master weights or with them turned off. */
static size_t gammas_moved(bool master)
{
    char path[] = "/tmp/ckplan-widen-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *in = fopen("models/gpt2-tiny-bf16.json", "r"), *out = fdopen(fd, "w");
    ck_assert(in && out);
    char line[1024];
    while (fgets(line, sizeof line, in)) {
        char *mw = strstr(line, "\"master_weights\": true");
        if (mw && !master)
            memcpy(mw, "\"master_weights\":false", strlen("\"master_weights\":false"));
        fputs(line, out);
    }
    fclose(in);
    ck_assert_int_eq(fclose(out), 0);
    ck_workload w;
    load_model(path, &w);
    remove(path);
    ck_assert_int_eq(w.model->training.master_weights, master);
    ck_err err = {{0}};
    ck_schedule base = {0};
    ck_exec *e = executor(&w, &base);
    for (uint64_t step = 0; step < 4; step++)
        ck_assert_msg(ck_exec_step(e, &base, step, NULL, NULL, &err) == CK_OK, "%s", err.msg);
    size_t n;
    ck_exec_gradients(e, &n);
    float *p = malloc(n * sizeof *p);
    ck_assert_ptr_nonnull(p);
    ck_exec_parameters(e, p);
    size_t at = 0, moved = 0, gammas = 0;
    for (size_t k = 0; k < w.model->n_nodes; k++) {
        const ck_op_info *info = &w.model->nodes[k].info;
        for (size_t i = 0; i < info->n_param_tensors; i++)
            for (uint64_t j = 0; info->params[i].init == CK_INIT_ONES && j < info->params[i].numel; j++) {
                gammas++;
                moved += p[at + info->params[i].offset + j] != 1.0f;
            }
        at += info->n_params;
    }
    ck_assert_uint_eq(at, n);
    ck_assert_uint_eq(gammas, 9 * 128); /* two layernorms per layer and the final one */
    free(p);
    ck_schedule_free(&base);
    ck_exec_free(e);
    ck_workload_free(&w);
    return moved;
}

/* Adam moves a parameter by about its learning rate, 1e-3, a step: less than half a bf16
 * ulp at 1.0 (2^-9 below it), so bf16 parameters updated in place never leave 1.0. The f32
 * master copy accumulates the steps and its rounding moves the bf16 parameters. */
START_TEST(master_weights_keep_small_updates)
{
    ck_assert_uint_eq(gammas_moved(false), 0);
    size_t moved = gammas_moved(true);
    fprintf(stderr, "gpt2-tiny-bf16: %zu of 1152 gammas moved with master weights\n", moved);
    ck_assert_uint_gt(moved, 100);
}
END_TEST

static Suite *widen_suite(void)
{
    Suite *s = suite_create("widen");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bf16_codes_round_trip_through_a_view);
    tcase_add_test(tc, f16_codes_round_trip_through_a_view);
    tcase_add_test(tc, bf16_stores_round_to_nearest_even);
    tcase_add_test(tc, f16_stores_round_to_nearest_even);
    tcase_add_test(tc, casts_between_16_bit_dtypes_round_once);
    tcase_add_test(tc, accumulation_reads_adds_and_rounds_once);
    tcase_add_test(tc, f32_and_integer_buffers_pass_through);
    tcase_add_test(tc, workspace_is_scratch_only_when_the_f32_kernel_needs_more);
    tcase_add_test(tc, kernel_workspace_is_the_f32_description);
    tcase_add_test(tc, bf16_step_is_close_to_the_f32_step);
    tcase_add_test(tc, master_weights_keep_small_updates);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(widen_suite)
