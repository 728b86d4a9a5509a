/* Linear-layer kernel speed: ck_kernel_linear_forward and ck_kernel_linear_backward on the linear layers
 * of models/gpt2-tiny.json and models/gpt2-small.json, against cblas_sgemm alone on the
 * same shapes and transposes, so the table shows what the kernels add to the products
 * (the bias broadcast and the bias-gradient column sums). Prints a markdown table.
 *
 * Usage: bench_kernels [tiny|small] (default both). The median of REPEATS timed calls
 * after WARMUP untimed ones; kernel and raw sgemm calls alternate, and which goes first
 * alternates too, so that cache warmth, a change of clock speed or a noisy neighbour
 * affects both columns alike. */
#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/kernel.h"
#include "sim/clock.h"

#define WARMUP 2
#define MAX_REPEATS 101

typedef struct {
    const char *model, *layer;
    size_t N, C, OC;
    int repeats;
} shape;

/* N = B*T rows. gpt2-tiny: B=4, T=64, C=128; gpt2-small: B=8, T=1024, C=768. */
static const shape shapes[] = {
    {"gpt2-tiny", "qkv", 256, 128, 384, 101},     {"gpt2-tiny", "proj", 256, 128, 128, 101},
    {"gpt2-tiny", "fc1", 256, 128, 512, 101},     {"gpt2-tiny", "fc2", 256, 512, 128, 101},
    {"gpt2-small", "qkv", 8192, 768, 2304, 7},   {"gpt2-small", "proj", 8192, 768, 768, 7},
    {"gpt2-small", "fc1", 8192, 768, 3072, 7},   {"gpt2-small", "fc2", 8192, 3072, 768, 7},
};

static float *random_floats(size_t n, unsigned *state)
{
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "bench_kernels: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        *state = *state * 1664525u + 1013904223u;
        x[i] = (float)(*state >> 8) * 0x1p-24f - 0.5f;
    }
    return x;
}

/* The products alone, exactly as the kernels issue them. */
static void raw_forward(float *out, const float *inp, const float *w, size_t N, size_t C,
                        size_t OC)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)OC, (int)C, 1.0f, inp,
                (int)C, w, (int)C, 0.0f, out, (int)OC);
}

static void raw_backward(float *dinp, float *dw, const float *dout, const float *inp,
                         const float *w, size_t N, size_t C, size_t OC)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)C, (int)OC, 1.0f, dout,
                (int)OC, w, (int)C, 1.0f, dinp, (int)C);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)OC, (int)C, (int)N, 1.0f, dout,
                (int)OC, inp, (int)C, 1.0f, dw, (int)C);
}

typedef struct {
    double kf, rf, kb, rb; /* median seconds: kernel / raw, forward / backward */
} timings;

static timings bench(const shape *s)
{
    unsigned state = 12345;
    size_t N = s->N, C = s->C, OC = s->OC;
    float *inp = random_floats(N * C, &state), *w = random_floats(OC * C, &state);
    float *bias = random_floats(OC, &state), *dout = random_floats(N * OC, &state);
    float *out = random_floats(N * OC, &state), *dinp = random_floats(N * C, &state);
    float *dw = random_floats(OC * C, &state), *db = random_floats(OC, &state);
    double kf[MAX_REPEATS], rf[MAX_REPEATS], kb[MAX_REPEATS], rb[MAX_REPEATS];
    for (int r = -WARMUP; r < s->repeats; r++) {
        /* Whichever runs second finds the operands in cache: alternate the order. */
        bool kernel_first = r % 2 == 0;
        double tk_f = 0, tr_f = 0, tk_b = 0, tr_b = 0;
        for (int turn = 0; turn < 2; turn++) {
            double t0 = ck_clock_seconds();
            if ((turn == 0) == kernel_first) {
                ck_kernel_linear_forward(out, inp, w, bias, N, C, OC);
                tk_f = ck_clock_seconds() - t0;
            } else {
                raw_forward(out, inp, w, N, C, OC);
                tr_f = ck_clock_seconds() - t0;
            }
        }
        for (int turn = 0; turn < 2; turn++) {
            double t0 = ck_clock_seconds();
            if ((turn == 0) == kernel_first) {
                ck_kernel_linear_backward(dinp, dw, db, dout, inp, w, N, C, OC);
                tk_b = ck_clock_seconds() - t0;
            } else {
                raw_backward(dinp, dw, dout, inp, w, N, C, OC);
                tr_b = ck_clock_seconds() - t0;
            }
        }
        /* Zeroed between repetitions, outside the timed calls, so that the accumulated
         * gradients stay bounded. */
        memset(dinp, 0, N * C * sizeof *dinp);
        memset(dw, 0, OC * C * sizeof *dw);
        if (r >= 0) {
            kf[r] = tk_f;
            rf[r] = tr_f;
            kb[r] = tk_b;
            rb[r] = tr_b;
        }
    }
    size_t n = (size_t)s->repeats;
    timings t = {ck_clock_median(kf, n), ck_clock_median(rf, n), ck_clock_median(kb, n), ck_clock_median(rb, n)};
    free(inp);
    free(w);
    free(bias);
    free(dout);
    free(out);
    free(dinp);
    free(dw);
    free(db);
    return t;
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    if (only && strcmp(only, "tiny") != 0 && strcmp(only, "small") != 0) {
        fprintf(stderr, "usage: %s [tiny|small]\n", argv[0]);
        return 2;
    }
    printf("OpenBLAS %s, %d threads; median of the repetitions after %d warm-up calls; "
           "GFLOP/s = 2*N*C*OC per product (1 forward, 2 backward).\n\n",
           openblas_get_config(), openblas_get_num_threads(), WARMUP);
    printf("| model | layer | N | C | OC | fwd GFLOP/s kernel | fwd sgemm | fwd ratio "
           "| bwd GFLOP/s kernel | bwd sgemm | bwd ratio | fwd+bwd ratio |\n");
    printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        if (only && strcmp(only, s->model + strlen("gpt2-")) != 0)
            continue;
        timings t = bench(s);
        double gf = 2.0 * (double)s->N * (double)s->C * (double)s->OC * 1e-9;
        printf("| %s | %s | %zu | %zu | %zu | %.1f | %.1f | %.3f | %.1f | %.1f | %.3f | %.3f |\n",
               s->model, s->layer, s->N, s->C, s->OC, gf / t.kf, gf / t.rf, t.rf / t.kf,
               2 * gf / t.kb, 2 * gf / t.rb, t.rb / t.kb, (t.rf + t.rb) / (t.kf + t.kb));
        fflush(stdout);
    }
    return 0;
}
