/* Kernel tests. Every backward is checked against central finite differences of a
 * double-precision reference forward written here, independently of sim/kernel.c: the
 * loss is sum(g * out) for a random upstream gradient g, the kernel's f32 gradient is
 * compared with d loss / d x of the double reference for every element of every input and
 * parameter. Every forward is compared with the same reference.
 *
 * Tolerances. The finite differences are taken in double with step 1e-5 on smooth
 * functions of values of order 1: truncation ~h^2 = 1e-10 and cancellation ~1e-16 / h =
 * 1e-11, so the reference gradient is exact far below f32 precision and what is measured
 * is the kernel's f32 rounding: a few units of 2^-24 (6e-8) times the magnitude of the
 * terms summed, with at most a few dozen terms here. An element passes when
 * |got - want| <= rtol * (|want| + max |want| over the tensor): the second term keeps
 * gradients that cancel to nearly zero from demanding an impossible relative accuracy.
 * rtol is 1e-6 for forwards (largest error seen 8e-8) and 1e-5 for gradients (largest
 * seen 1.5e-7, and under 1e-6 for cross-entropy, whose logits near 100 lose 7 bits in
 * x - lse): 10x margin or more, while a wrong formula (a missing term, a wrong scale, a
 * swapped head, a dropped element kept) gives errors of 1e-2 to 1.
 *
 * Accumulation: every backward is called twice on the same gradient buffers, and the
 * second call must double what the first wrote (a kernel that assigns instead of adding
 * fails), before the first result goes to the finite-difference check. */
#include "sim/kernel.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_main.h"

#define RTOL_FWD 1e-6
#define RTOL_GRAD 1e-5
#define FD_STEP 1e-5

/* ---- scratch memory: freed at the end of each test, exact sizes so ASan sees overruns ---- */

static void *allocs[256];
static size_t n_allocs;

static void *scratch(size_t bytes)
{
    ck_assert_uint_lt(n_allocs, sizeof allocs / sizeof allocs[0]);
    void *p = calloc(bytes ? bytes : 1, 1);
    ck_assert_ptr_nonnull(p);
    allocs[n_allocs++] = p;
    return p;
}

static float *fbuf(size_t n) { return scratch(n * sizeof(float)); }

/* Buffers a forward writes (outputs, saved tensors, workspace) start as NaN, so an element
 * the kernel forgets to write, or workspace it reads before writing, shows up. Gradient
 * buffers start at zero, as the callers allocate them. */
static float *obuf(size_t n)
{
    float *x = fbuf(n);
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
    return x;
}
static double *dbuf(size_t n) { return scratch(n * sizeof(double)); }

static void free_scratch(void)
{
    for (size_t i = 0; i < n_allocs; i++)
        free(allocs[i]);
    n_allocs = 0;
}

/* ---- deterministic random numbers for the test data (not the RNG under test) ---- */

static uint64_t lcg_state;

static void seed_data(uint64_t s) { lcg_state = s * 2862933555777941757ULL + 1; }

/* Uniform in [-1, 1). */
static double urand(void)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg_state >> 11) * 0x1p-53 * 2.0 - 1.0;
}

static float *frand(size_t n)
{
    float *x = fbuf(n);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)urand();
    return x;
}

static double *to_double(const float *x, size_t n)
{
    double *d = dbuf(n);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

static float *copy_f(const float *x, size_t n)
{
    float *c = fbuf(n);
    memcpy(c, x, n * sizeof *c);
    return c;
}

/* ---- comparisons ---- */

static double max_abs(const double *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(x[i]));
    return m;
}

static void assert_close(const char *what, const float *got, const double *want, size_t n,
                         double rtol)
{
    double scale = max_abs(want, n);
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        ck_assert_msg(err <= rtol * (fabs(want[i]) + scale),
                      "%s[%zu]: got %.9g, want %.9g (error %.3g, scale %.3g)", what, i,
                      (double)got[i], want[i], err, scale);
    }
}

/* The second backward call added as much as the first: got == 2 * once, up to the rounding
 * of one addition per element (sgemm may add its partial sums in several steps). */
static void assert_doubled(const char *what, const float *twice, const float *once, size_t n)
{
    double *w = dbuf(n);
    for (size_t i = 0; i < n; i++)
        w[i] = 2.0 * once[i];
    assert_close(what, twice, w, n, 1e-6);
}

/* ---- the finite-difference harness ---- */

typedef struct ref_case ref_case;
typedef void (*ref_fn)(const ref_case *rc, double *out);

/* A double reference forward with its inputs and dimensions; the loss is sum(g * out). */
struct ref_case {
    ref_fn fn;
    double *in[4];
    size_t len[4];
    size_t n_out;
    const double *g; /* NULL: a scalar loss, g = 1 */
    size_t B, T, C, OC, V, H, KV, D, n;
    const int32_t *ids;
    bool bias, pos;
    float p;
    ck_rng_key key;
    double theta;
    size_t R, n_parts, width[3]; /* lora */
    double alpha, cap; /* lora; softcap */
};

static double ref_loss(const ref_case *rc, double *out)
{
    rc->fn(rc, out);
    double l = 0.0;
    for (size_t i = 0; i < rc->n_out; i++)
        l += (rc->g ? rc->g[i] : 1.0) * out[i];
    return l;
}

/* d loss / d in[k], by central differences of the double reference. */
static double *fd_grad(const ref_case *rc, size_t k)
{
    double *out = dbuf(rc->n_out), *grad = dbuf(rc->len[k]);
    for (size_t e = 0; e < rc->len[k]; e++) {
        double x = rc->in[k][e];
        rc->in[k][e] = x + FD_STEP;
        double lp = ref_loss(rc, out);
        rc->in[k][e] = x - FD_STEP;
        double lm = ref_loss(rc, out);
        rc->in[k][e] = x;
        grad[e] = (lp - lm) / (2.0 * FD_STEP);
    }
    return grad;
}

static void assert_fd(const char *what, const ref_case *rc, size_t k, const float *grad)
{
    assert_close(what, grad, fd_grad(rc, k), rc->len[k], RTOL_GRAD);
}

static void assert_forward(const char *what, const ref_case *rc, const float *out)
{
    double *want = dbuf(rc->n_out);
    rc->fn(rc, want);
    assert_close(what, out, want, rc->n_out, RTOL_FWD);
}

/* Input k of rc: n random values, as f32 for the kernel (returned) and double. */
static float *ref_input(ref_case *rc, size_t k, size_t n)
{
    float *x = frand(n);
    rc->in[k] = to_double(x, n);
    rc->len[k] = n;
    return x;
}

/* ---- double reference forwards, written from the math, not from kernels.c ---- */

static void ref_embedding(const ref_case *rc, double *out)
{
    const double *wte = rc->in[0], *wpe = rc->in[1];
    for (size_t bt = 0; bt < rc->B * rc->T; bt++)
        for (size_t c = 0; c < rc->C; c++)
            out[bt * rc->C + c] = wte[(size_t)rc->ids[bt] * rc->C + c] +
                                  (rc->pos ? wpe[(bt % rc->T) * rc->C + c] : 0.0);
}

static void ref_linear(const ref_case *rc, double *out)
{
    const double *x = rc->in[0], *w = rc->in[1], *b = rc->in[2];
    for (size_t n = 0; n < rc->n; n++)
        for (size_t o = 0; o < rc->OC; o++) {
            double s = rc->bias ? b[o] : 0.0;
            for (size_t c = 0; c < rc->C; c++)
                s += x[n * rc->C + c] * w[o * rc->C + c];
            out[n * rc->OC + o] = s;
        }
}

/* Layer norm, with its statistics written when asked. */
static void ref_layernorm_stats(const ref_case *rc, double *out, double *mean, double *rstd)
{
    const double *x = rc->in[0], *w = rc->in[1], *b = rc->in[2];
    size_t C = rc->C;
    for (size_t n = 0; n < rc->n; n++) {
        double m = 0.0, v = 0.0;
        for (size_t c = 0; c < C; c++)
            m += x[n * C + c] / (double)C;
        for (size_t c = 0; c < C; c++)
            v += (x[n * C + c] - m) * (x[n * C + c] - m) / (double)C;
        double r = 1.0 / sqrt(v + 1e-5);
        for (size_t c = 0; c < C; c++)
            out[n * C + c] = (x[n * C + c] - m) * r * w[c] + b[c];
        if (mean) {
            mean[n] = m;
            rstd[n] = r;
        }
    }
}

static void ref_layernorm(const ref_case *rc, double *out)
{
    ref_layernorm_stats(rc, out, NULL, NULL);
}

static void ref_rmsnorm_stats(const ref_case *rc, double *out, double *rstd)
{
    const double *x = rc->in[0], *w = rc->in[1];
    size_t C = rc->C;
    for (size_t n = 0; n < rc->n; n++) {
        double ms = 0.0;
        for (size_t c = 0; c < C; c++)
            ms += x[n * C + c] * x[n * C + c] / (double)C;
        double r = 1.0 / sqrt(ms + 1e-5);
        for (size_t c = 0; c < C; c++)
            out[n * C + c] = x[n * C + c] * r * w[c];
        if (rstd)
            rstd[n] = r;
    }
}

static void ref_rmsnorm(const ref_case *rc, double *out) { ref_rmsnorm_stats(rc, out, NULL); }

static void ref_gelu(const ref_case *rc, double *out)
{
    const double k = sqrt(2.0 / M_PI);
    for (size_t i = 0; i < rc->n; i++) {
        double x = rc->in[0][i];
        out[i] = 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
    }
}

static void ref_relu(const ref_case *rc, double *out)
{
    for (size_t i = 0; i < rc->n; i++)
        out[i] = fmax(rc->in[0][i], 0.0);
}

static void ref_silu(const ref_case *rc, double *out)
{
    for (size_t i = 0; i < rc->n; i++)
        out[i] = rc->in[0][i] / (1.0 + exp(-rc->in[0][i]));
}

static void ref_add(const ref_case *rc, double *out)
{
    for (size_t i = 0; i < rc->n; i++)
        out[i] = rc->in[0][i] + rc->in[1][i];
}

static void ref_mul(const ref_case *rc, double *out)
{
    for (size_t i = 0; i < rc->n; i++)
        out[i] = rc->in[0][i] * rc->in[1][i];
}

/* The mask comes from the RNG under test (tested on its own below): a fixed function of
 * (key, element), the same in the reference and the kernel. */
static void ref_dropout(const ref_case *rc, double *out)
{
    for (size_t i = 0; i < rc->n; i++)
        out[i] = ck_rng_keep(rc->key, i, rc->p) ? rc->in[0][i] / (1.0 - rc->p) : 0.0;
}

/* Causal grouped-query attention, straight from the definition: for each (b, h, i),
 * softmax over j <= i of q_i . k_j / sqrt(D), dropout of element ((b H + h) T + i) T + j,
 * weighted sum of v_j. Query head h reads kv head h / (H / KV). */
static void ref_attention_full(const ref_case *rc, double *out, double *probs, double *lse,
                               double *capped)
{
    size_t B = rc->B, T = rc->T, H = rc->H, KV = rc->KV, D = rc->D;
    size_t W = (H + 2 * KV) * D;
    const double *qkv = rc->in[0];
    double s[64];
    ck_assert_uint_le(T, 64);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            size_t kvh = h / (H / KV);
            for (size_t i = 0; i < T; i++) {
                const double *q = qkv + (b * T + i) * W + h * D;
                double mx = -INFINITY, sum = 0.0;
                for (size_t j = 0; j <= i; j++) {
                    const double *k = qkv + (b * T + j) * W + (H + kvh) * D;
                    s[j] = 0.0;
                    for (size_t d = 0; d < D; d++)
                        s[j] += q[d] * k[d];
                    s[j] /= sqrt((double)D);
                    if (rc->cap > 0.0) {
                        if (capped)
                            capped[((b * H + h) * T + i) * T + j] = tanh(s[j] / rc->cap);
                        s[j] = rc->cap * tanh(s[j] / rc->cap);
                    }
                    mx = fmax(mx, s[j]);
                }
                for (size_t j = 0; j <= i; j++)
                    sum += exp(s[j] - mx);
                size_t row = ((b * H + h) * T + i) * T;
                if (lse)
                    lse[(b * H + h) * T + i] = mx + log(sum);
                double *o = out + (b * T + i) * H * D + h * D;
                for (size_t d = 0; d < D; d++)
                    o[d] = 0.0;
                for (size_t j = 0; j < T; j++) {
                    double pj = j <= i ? exp(s[j] - mx) / sum : 0.0;
                    if (probs)
                        probs[row + j] = pj;
                    if (j > i)
                        continue;
                    if (rc->p > 0.0f)
                        pj = ck_rng_keep(rc->key, row + j, rc->p) ? pj / (1.0 - rc->p) : 0.0;
                    const double *v = qkv + (b * T + j) * W + (H + KV + kvh) * D;
                    for (size_t d = 0; d < D; d++)
                        o[d] += pj * v[d];
                }
            }
        }
}

static void ref_attention(const ref_case *rc, double *out)
{
    ref_attention_full(rc, out, NULL, NULL, NULL);
}

/* Mean over rows of log sum_v exp(x_v) - x_target. */
static void ref_cross_entropy_lse(const ref_case *rc, double *out, double *lse)
{
    double total = 0.0;
    for (size_t n = 0; n < rc->n; n++) {
        const double *x = rc->in[0] + n * rc->V;
        double mx = -INFINITY, sum = 0.0;
        for (size_t v = 0; v < rc->V; v++)
            mx = fmax(mx, x[v]);
        for (size_t v = 0; v < rc->V; v++)
            sum += exp(x[v] - mx);
        double l = mx + log(sum);
        if (lse)
            lse[n] = l;
        total += l - x[rc->ids[n]];
    }
    out[0] = total / (double)rc->n;
}

static void ref_cross_entropy(const ref_case *rc, double *out)
{
    ref_cross_entropy_lse(rc, out, NULL);
}

static void ref_mse(const ref_case *rc, double *out)
{
    double total = 0.0;
    for (size_t i = 0; i < rc->n; i++) {
        double e = rc->in[0][i] - rc->in[1][i];
        total += e * e;
    }
    out[0] = total / (double)rc->n;
}

/* ---- small sizes shared by the tests ---- */

/* OC_ = 10: the bias gradient's column sums see a block of 8 columns and a remainder. */
enum { B_ = 2, T_ = 5, C_ = 8, OC_ = 10, N_ = B_ * T_ };

/* ---- embedding ---- */

static void embedding_case(bool pos)
{
    enum { V = 7 };
    seed_data(pos ? 1 : 2);
    int32_t ids[N_];
    for (size_t i = 0; i < N_; i++)
        ids[i] = (int32_t)(i * 3 % 6); /* tokens repeat; token 6 is never used */
    float *wte = frand(V * C_), *wpe = pos ? frand(T_ * C_) : NULL;
    float *out = obuf(N_ * C_), *dout = frand(N_ * C_);
    ck_kernel_embedding_forward(out, ids, wte, wpe, B_, T_, C_);

    ref_case rc = {.fn = ref_embedding, .n_out = N_ * C_, .g = to_double(dout, N_ * C_),
                   .B = B_, .T = T_, .C = C_, .ids = ids, .pos = pos};
    rc.in[0] = to_double(wte, V * C_);
    rc.len[0] = V * C_;
    rc.in[1] = pos ? to_double(wpe, T_ * C_) : NULL;
    rc.len[1] = T_ * C_;
    assert_forward("embedding out", &rc, out);

    float *dwte = fbuf(V * C_), *dwpe = pos ? fbuf(T_ * C_) : NULL;
    ck_kernel_embedding_backward(dwte, dwpe, dout, ids, B_, T_, C_);
    float *dwte1 = copy_f(dwte, V * C_), *dwpe1 = pos ? copy_f(dwpe, T_ * C_) : NULL;
    ck_kernel_embedding_backward(dwte, dwpe, dout, ids, B_, T_, C_);
    assert_doubled("dwte", dwte, dwte1, V * C_);
    assert_fd("dwte", &rc, 0, dwte1);
    if (pos) {
        assert_doubled("dwpe", dwpe, dwpe1, T_ * C_);
        assert_fd("dwpe", &rc, 1, dwpe1);
    }
    free_scratch();
}

START_TEST(embedding_with_positions) { embedding_case(true); }
END_TEST

START_TEST(embedding_without_positions) { embedding_case(false); }
END_TEST

/* ---- linear ---- */

static void linear_case(bool bias)
{
    seed_data(bias ? 3 : 4);
    float *x = frand(N_ * C_), *w = frand(OC_ * C_), *b = bias ? frand(OC_) : NULL;
    float *out = obuf(N_ * OC_), *dout = frand(N_ * OC_);
    ck_kernel_linear_forward(out, x, w, b, N_, C_, OC_);

    ref_case rc = {.fn = ref_linear, .n_out = N_ * OC_, .g = to_double(dout, N_ * OC_),
                   .n = N_, .C = C_, .OC = OC_, .bias = bias};
    rc.in[0] = to_double(x, N_ * C_);
    rc.len[0] = N_ * C_;
    rc.in[1] = to_double(w, OC_ * C_);
    rc.len[1] = OC_ * C_;
    rc.in[2] = bias ? to_double(b, OC_) : NULL;
    rc.len[2] = OC_;
    assert_forward("linear out", &rc, out);

    float *dx = fbuf(N_ * C_), *dw = fbuf(OC_ * C_), *db = bias ? fbuf(OC_) : NULL;
    ck_kernel_linear_backward(dx, dw, db, dout, x, w, N_, C_, OC_);
    float *dx1 = copy_f(dx, N_ * C_), *dw1 = copy_f(dw, OC_ * C_);
    float *db1 = bias ? copy_f(db, OC_) : NULL;
    ck_kernel_linear_backward(dx, dw, db, dout, x, w, N_, C_, OC_);
    assert_doubled("linear dinp", dx, dx1, N_ * C_);
    assert_doubled("linear dweight", dw, dw1, OC_ * C_);
    assert_fd("linear dinp", &rc, 0, dx1);
    assert_fd("linear dweight", &rc, 1, dw1);
    if (bias) {
        assert_doubled("linear dbias", db, db1, OC_);
        assert_fd("linear dbias", &rc, 2, db1);
    }
    /* A model input needs no gradient: dinp NULL still gives the parameters' gradients. */
    float *dw_only = fbuf(OC_ * C_);
    ck_kernel_linear_backward(NULL, dw_only, NULL, dout, x, w, N_, C_, OC_);
    ck_assert(memcmp(dw_only, dw1, OC_ * C_ * sizeof *dw1) == 0);
    free_scratch();
}

START_TEST(linear_with_bias) { linear_case(true); }
END_TEST

START_TEST(linear_without_bias) { linear_case(false); }
END_TEST

/* ---- norms ---- */

START_TEST(layernorm)
{
    seed_data(5);
    float *x = frand(N_ * C_), *w = frand(C_), *b = frand(C_);
    for (size_t i = 0; i < N_ * C_; i++)
        x[i] = x[i] * 2.0f + 3.0f; /* a mean far from 0: the statistics matter */
    float *out = obuf(N_ * C_), *mean = obuf(N_), *rstd = obuf(N_), *dout = frand(N_ * C_);
    ck_kernel_layernorm_forward(out, mean, rstd, x, w, b, N_, C_, 1e-5);

    ref_case rc = {.fn = ref_layernorm, .n_out = N_ * C_, .g = to_double(dout, N_ * C_),
                   .n = N_, .C = C_};
    rc.in[0] = to_double(x, N_ * C_);
    rc.len[0] = N_ * C_;
    rc.in[1] = to_double(w, C_);
    rc.len[1] = C_;
    rc.in[2] = to_double(b, C_);
    rc.len[2] = C_;
    assert_forward("layernorm out", &rc, out);
    double *rout = dbuf(N_ * C_), *rmean = dbuf(N_), *rrstd = dbuf(N_);
    ref_layernorm_stats(&rc, rout, rmean, rrstd);
    assert_close("layernorm mean", mean, rmean, N_, RTOL_FWD);
    assert_close("layernorm rstd", rstd, rrstd, N_, RTOL_FWD);

    float *dx = fbuf(N_ * C_), *dw = fbuf(C_), *db = fbuf(C_);
    ck_kernel_layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, N_, C_);
    float *dx1 = copy_f(dx, N_ * C_), *dw1 = copy_f(dw, C_), *db1 = copy_f(db, C_);
    ck_kernel_layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, N_, C_);
    assert_doubled("layernorm dinp", dx, dx1, N_ * C_);
    assert_doubled("layernorm dweight", dw, dw1, C_);
    assert_doubled("layernorm dbias", db, db1, C_);
    assert_fd("layernorm dinp", &rc, 0, dx1);
    assert_fd("layernorm dweight", &rc, 1, dw1);
    assert_fd("layernorm dbias", &rc, 2, db1);
    free_scratch();
}
END_TEST

/* The norms add the eps they are given: on a constant row, layernorm's variance is 0, so
 * rstd = 1/sqrt(eps); rmsnorm's mean square is x^2. */
START_TEST(norms_take_their_eps)
{
    float x[4] = {0.5f, 0.5f, 0.5f, 0.5f}, w[4] = {1, 1, 1, 1}, b[4] = {0}, out[4], mean, rstd,
          qkv[12], qout[12], qrstd[2];
    ck_kernel_layernorm_forward(out, &mean, &rstd, x, w, b, 1, 4, 0.25);
    ck_assert_float_eq_tol(rstd, 2.0f, 1e-6f);
    ck_kernel_rmsnorm_forward(out, &rstd, NULL, x, w, 1, 4, 0.25);
    ck_assert_float_eq_tol(rstd, (float)(1.0 / sqrt(0.5)), 1e-6f);
    for (int i = 0; i < 12; i++)
        qkv[i] = 0.5f;
    ck_kernel_qknorm_forward(qout, qrstd, NULL, NULL, qkv, w, w, 1, 1, 1, 4, 0.75); /* q, k, v heads of 4 */
    ck_assert_float_eq_tol(qrstd[0], 1.0f, 1e-6f);
    ck_assert_float_eq_tol(qrstd[1], 1.0f, 1e-6f);
}
END_TEST

START_TEST(rmsnorm)
{
    seed_data(6);
    float *x = frand(N_ * C_), *w = frand(C_);
    float *out = obuf(N_ * C_), *rstd = obuf(N_), *dout = frand(N_ * C_);
    ck_kernel_rmsnorm_forward(out, rstd, NULL, x, w, N_, C_, 1e-5);

    ref_case rc = {.fn = ref_rmsnorm, .n_out = N_ * C_, .g = to_double(dout, N_ * C_),
                   .n = N_, .C = C_};
    rc.in[0] = to_double(x, N_ * C_);
    rc.len[0] = N_ * C_;
    rc.in[1] = to_double(w, C_);
    rc.len[1] = C_;
    assert_forward("rmsnorm out", &rc, out);
    double *rout = dbuf(N_ * C_), *rrstd = dbuf(N_);
    ref_rmsnorm_stats(&rc, rout, rrstd);
    assert_close("rmsnorm rstd", rstd, rrstd, N_, RTOL_FWD);

    float *dx = fbuf(N_ * C_), *dw = fbuf(C_);
    ck_kernel_rmsnorm_backward(dx, dw, dout, x, w, rstd, N_, C_);
    float *dx1 = copy_f(dx, N_ * C_), *dw1 = copy_f(dw, C_);
    ck_kernel_rmsnorm_backward(dx, dw, dout, x, w, rstd, N_, C_);
    assert_doubled("rmsnorm dinp", dx, dx1, N_ * C_);
    assert_doubled("rmsnorm dweight", dw, dw1, C_);
    assert_fd("rmsnorm dinp", &rc, 0, dx1);
    assert_fd("rmsnorm dweight", &rc, 1, dw1);
    free_scratch();
}
END_TEST

/* ---- element-wise ---- */

enum { EW_N = N_ * C_ };

/* Inputs in [-3, 3] (the curved part of gelu and silu), kept 0.01 away from relu's kink so
 * the finite difference never straddles it. */
static float *ew_input(void)
{
    float *x = frand(EW_N);
    for (size_t i = 0; i < EW_N; i++) {
        x[i] *= 3.0f;
        if (fabsf(x[i]) < 0.01f)
            x[i] = 0.02f;
    }
    return x;
}

typedef enum { EW_GELU, EW_RELU, EW_SILU } ew_kind;

static void unary_case(ew_kind kind)
{
    static const ref_fn refs[] = {ref_gelu, ref_relu, ref_silu};
    static const char *names[] = {"gelu", "relu", "silu"};
    seed_data(7 + (uint64_t)kind);
    float *x = ew_input(), *out = obuf(EW_N), *dout = frand(EW_N), *dx = fbuf(EW_N);
    ref_case rc = {.fn = refs[kind], .n_out = EW_N, .g = to_double(dout, EW_N), .n = EW_N};
    rc.in[0] = to_double(x, EW_N);
    rc.len[0] = EW_N;
    float *dx1 = NULL;
    for (int call = 0; call < 2; call++) {
        switch (kind) {
        case EW_GELU:
            ck_kernel_gelu_forward(out, x, EW_N);
            ck_kernel_gelu_backward(dx, x, dout, EW_N);
            break;
        case EW_RELU:
            ck_kernel_relu_forward(out, x, EW_N);
            ck_kernel_relu_backward(dx, out, dout, EW_N);
            break;
        case EW_SILU:
            ck_kernel_silu_forward(out, x, EW_N);
            ck_kernel_silu_backward(dx, x, dout, EW_N);
            break;
        }
        if (call == 0)
            dx1 = copy_f(dx, EW_N);
    }
    assert_forward(names[kind], &rc, out);
    assert_doubled(names[kind], dx, dx1, EW_N);
    assert_fd(names[kind], &rc, 0, dx1);
    free_scratch();
}

START_TEST(gelu) { unary_case(EW_GELU); }
END_TEST

START_TEST(relu) { unary_case(EW_RELU); }
END_TEST

START_TEST(silu) { unary_case(EW_SILU); }
END_TEST

static void binary_case(bool is_mul)
{
    seed_data(is_mul ? 10 : 11);
    float *a = frand(EW_N), *b = frand(EW_N), *out = obuf(EW_N), *dout = frand(EW_N);
    float *da = fbuf(EW_N), *db = fbuf(EW_N);
    ref_case rc = {.fn = is_mul ? ref_mul : ref_add, .n_out = EW_N, .g = to_double(dout, EW_N),
                   .n = EW_N};
    rc.in[0] = to_double(a, EW_N);
    rc.len[0] = EW_N;
    rc.in[1] = to_double(b, EW_N);
    rc.len[1] = EW_N;
    if (is_mul) {
        ck_kernel_mul_forward(out, a, b, EW_N);
        ck_kernel_mul_backward(da, db, dout, a, b, EW_N);
    } else {
        ck_kernel_add_forward(out, a, b, EW_N);
        ck_kernel_add_backward(da, db, dout, EW_N);
    }
    float *da1 = copy_f(da, EW_N), *db1 = copy_f(db, EW_N);
    if (is_mul)
        ck_kernel_mul_backward(da, db, dout, a, b, EW_N);
    else
        ck_kernel_add_backward(da, db, dout, EW_N);
    assert_forward(is_mul ? "mul" : "add", &rc, out);
    assert_doubled("da", da, da1, EW_N);
    assert_doubled("db", db, db1, EW_N);
    assert_fd("da", &rc, 0, da1);
    assert_fd("db", &rc, 1, db1);
    free_scratch();
}

START_TEST(add) { binary_case(false); }
END_TEST

START_TEST(mul) { binary_case(true); }
END_TEST

/* A node that reads one tensor twice passes the same gradient buffer for both inputs:
 * x * x must give 2 x dout, x + x 2 dout. */
START_TEST(binary_ops_with_one_input_twice)
{
    seed_data(12);
    float *x = frand(EW_N), *dout = frand(EW_N), *dm = fbuf(EW_N), *da = fbuf(EW_N);
    ck_kernel_mul_backward(dm, dm, dout, x, x, EW_N);
    ck_kernel_add_backward(da, da, dout, EW_N);
    double *wm = dbuf(EW_N), *wa = dbuf(EW_N);
    for (size_t i = 0; i < EW_N; i++) {
        wm[i] = 2.0 * x[i] * dout[i];
        wa[i] = 2.0 * dout[i];
    }
    assert_close("x*x", dm, wm, EW_N, RTOL_FWD);
    assert_close("x+x", da, wa, EW_N, RTOL_FWD);
    free_scratch();
}
END_TEST

/* ---- dropout ---- */

static void dropout_case(float p)
{
    seed_data(13);
    ck_rng_key key = {42, 7, 3};
    float *x = frand(EW_N), *out = obuf(EW_N), *dout = frand(EW_N), *dx = fbuf(EW_N);
    uint8_t *mask = scratch(EW_N);
    ck_kernel_dropout_forward(out, mask, x, p, key, EW_N);
    ref_case rc = {.fn = ref_dropout, .n_out = EW_N, .g = to_double(dout, EW_N), .n = EW_N,
                   .p = p, .key = key};
    rc.in[0] = to_double(x, EW_N);
    rc.len[0] = EW_N;
    assert_forward("dropout out", &rc, out);
    size_t kept = 0;
    for (size_t i = 0; i < EW_N; i++) {
        ck_assert_uint_eq(mask[i], (unsigned)ck_rng_keep(key, i, p));
        kept += mask[i];
    }
    if (p > 0.0f) /* the case is not vacuous: some dropped, most kept */
        ck_assert(kept > EW_N / 2 && kept < EW_N);
    else
        ck_assert_uint_eq(kept, EW_N);
    ck_kernel_dropout_backward(dx, dout, mask, p, EW_N);
    float *dx1 = copy_f(dx, EW_N);
    ck_kernel_dropout_backward(dx, dout, mask, p, EW_N);
    assert_doubled("dropout dinp", dx, dx1, EW_N);
    assert_fd("dropout dinp", &rc, 0, dx1);
    free_scratch();
}

START_TEST(dropout) { dropout_case(0.3f); }
END_TEST

START_TEST(dropout_p0_is_identity)
{
    dropout_case(0.0f);
    seed_data(14);
    float *x = frand(EW_N), *out = obuf(EW_N);
    uint8_t *mask = scratch(EW_N);
    ck_kernel_dropout_forward(out, mask, x, 0.0f, (ck_rng_key){1, 2, 3}, EW_N);
    ck_assert(memcmp(out, x, EW_N * sizeof *x) == 0);
    free_scratch();
}
END_TEST

/* ---- the RNG ---- */

START_TEST(rng_keep_fraction)
{
    /* 1e5 Bernoulli(0.9) draws: standard deviation of the fraction sqrt(0.09 / 1e5) =
     * 9.5e-4; 0.005 is over 5 of them (a false failure has probability < 1e-6, and the
     * draws are fixed anyway), while a generator off by 1% in its threshold fails. */
    enum { n = 100000 };
    const float ps[] = {0.1f, 0.5f};
    for (size_t k = 0; k < 2; k++) {
        size_t kept = 0;
        for (uint64_t i = 0; i < n; i++)
            kept += (size_t)ck_rng_keep((ck_rng_key){1234, 5, 6}, i, ps[k]);
        double frac = (double)kept / n;
        ck_assert_msg(fabs(frac - (1.0 - ps[k])) < 0.005, "p=%g kept %g", (double)ps[k], frac);
    }
    for (uint64_t i = 0; i < 1000; i++) {
        ck_assert(ck_rng_keep((ck_rng_key){1, 2, 3}, i, 0.0f));
        ck_assert(!ck_rng_keep((ck_rng_key){1, 2, 3}, i, 1.0f));
    }
}
END_TEST

START_TEST(rng_bits_are_balanced)
{
    /* Each of the 32 bits is set about half the time over 1e5 consecutive elements
     * (standard deviation 158 counts; 1000 is over 6 of them), so the low bits of a
     * counter do not leak through. */
    enum { n = 100000 };
    size_t ones[32] = {0};
    for (uint64_t i = 0; i < n; i++) {
        uint32_t u = ck_rng_u32((ck_rng_key){9, 0, 0}, i);
        for (int b = 0; b < 32; b++)
            ones[b] += (u >> b) & 1u;
    }
    for (int b = 0; b < 32; b++)
        ck_assert_msg(ones[b] > n / 2 - 1000 && ones[b] < n / 2 + 1000, "bit %d: %zu", b,
                      ones[b]);
}
END_TEST

/* Fraction of elements where two streams' dropout decisions differ: independent streams
 * with p = 0.1 differ with probability 2 p (1 - p) = 0.18. */
static double mask_difference(ck_rng_key a, ck_rng_key b, size_t n)
{
    size_t diff = 0;
    for (uint64_t i = 0; i < n; i++)
        diff += ck_rng_keep(a, i, 0.1f) != ck_rng_keep(b, i, 0.1f);
    return (double)diff / (double)n;
}

START_TEST(rng_determinism_and_streams)
{
    enum { n = 100000 };
    ck_rng_key key = {77, 10, 4};
    float *x = frand(n), *o1 = fbuf(n), *o2 = fbuf(n);
    uint8_t *m1 = scratch(n), *m2 = scratch(n);
    ck_kernel_dropout_forward(o1, m1, x, 0.1f, key, n);
    ck_kernel_dropout_forward(o2, m2, x, 0.1f, key, n);
    ck_assert(memcmp(m1, m2, n) == 0);
    ck_assert(memcmp(o1, o2, n * sizeof *o1) == 0);
    ck_assert_uint_eq(ck_rng_u32(key, 12345), ck_rng_u32(key, 12345));
    /* Every part of the key selects an independent stream (0.18 +- 0.01, the standard
     * deviation being 0.0012), including swapping step and node. */
    ck_rng_key others[] = {{78, 10, 4}, {77, 11, 4}, {77, 10, 5}, {77, 4, 10}};
    for (size_t k = 0; k < 4; k++) {
        double d = mask_difference(key, others[k], n);
        ck_assert_msg(fabs(d - 0.18) < 0.01, "stream %zu differs on %g", k, d);
    }
    /* Neighbouring elements are not copies of each other either. */
    size_t same = 0;
    for (uint64_t i = 0; i + 1 < n; i++)
        same += ck_rng_u32(key, i) == ck_rng_u32(key, i + 1);
    ck_assert_uint_eq(same, 0);
    free_scratch();
}
END_TEST

/* ---- attention ---- */

typedef struct {
    size_t B, T, H, KV, D;
    float p, cap;
} att_dims;

typedef struct {
    float *out, *probs, *dropped, *capped, *lse, *ws, *dqkv;
    uint8_t *mask;
} att_run;

static size_t att_w(att_dims a) { return (a.H + 2 * a.KV) * a.D; }

static ck_rng_key att_key(void) { return (ck_rng_key){2024, 3, 17}; }

/* Runs the standard or flash forward and backward (backward twice when `twice`), with
 * buffers of exactly the sizes planner/op declares. */
static att_run run_attention(att_dims a, bool flash, const float *qkv, const float *dout,
                             bool twice, float **dqkv_once)
{
    att_run r = {0};
    size_t S = a.B * a.H * a.T * a.T, n_qkv = a.B * a.T * att_w(a);
    r.out = obuf(a.B * a.T * a.H * a.D);
    r.dqkv = fbuf(n_qkv);
    if (flash) {
        r.lse = obuf(a.B * a.H * a.T);
        float *fws = obuf(a.T), *bws = obuf(2 * a.T);
        ck_kernel_attention_flash_forward(r.out, r.lse, qkv, fws, a.B, a.T, a.H, a.KV, a.D, a.p,
                                          a.cap, att_key());
        for (int call = 0; call < (twice ? 2 : 1); call++) {
            ck_kernel_attention_flash_backward(r.dqkv, dout, qkv, r.out, r.lse, bws, a.B, a.T, a.H,
                                               a.KV, a.D, a.p, a.cap, att_key());
            if (call == 0 && dqkv_once)
                *dqkv_once = copy_f(r.dqkv, n_qkv);
        }
    } else {
        r.probs = obuf(S);
        r.ws = obuf(S);
        if (a.p > 0.0f) {
            r.mask = scratch(S);
            memset(r.mask, 0xab, S);
            r.dropped = obuf(S);
        }
        if (a.cap > 0.0f)
            r.capped = obuf(S);
        ck_kernel_attention_forward(r.out, r.probs, r.mask, r.dropped, r.capped, qkv, r.ws, a.B,
                                    a.T, a.H, a.KV, a.D, a.p, a.cap, att_key());
        for (int call = 0; call < (twice ? 2 : 1); call++) {
            ck_kernel_attention_backward(r.dqkv, dout, qkv, r.probs, r.mask, r.dropped, r.capped,
                                         r.ws, a.B, a.T, a.H, a.KV, a.D, a.p, a.cap, att_key());
            if (call == 0 && dqkv_once)
                *dqkv_once = copy_f(r.dqkv, n_qkv);
        }
    }
    return r;
}

static void attention_fd_case(att_dims a, bool flash, uint64_t seed)
{
    seed_data(seed);
    size_t n_qkv = a.B * a.T * att_w(a), n_out = a.B * a.T * a.H * a.D;
    size_t S = a.B * a.H * a.T * a.T;
    float *qkv = frand(n_qkv), *dout = frand(n_out);
    for (size_t i = 0; i < n_qkv; i++)
        qkv[i] *= 2.0f; /* scores of order 1: softmax far from uniform */
    float *dqkv1 = NULL;
    att_run r = run_attention(a, flash, qkv, dout, true, &dqkv1);

    ref_case rc = {.fn = ref_attention, .n_out = n_out, .g = to_double(dout, n_out), .B = a.B,
                   .T = a.T, .H = a.H, .KV = a.KV, .D = a.D, .p = a.p, .key = att_key(),
                   .cap = a.cap};
    rc.in[0] = to_double(qkv, n_qkv);
    rc.len[0] = n_qkv;
    assert_forward("attention out", &rc, r.out);
    double *rout = dbuf(n_out), *rprobs = dbuf(S), *rlse = dbuf(a.B * a.H * a.T);
    double *rcapped = dbuf(S);
    ref_attention_full(&rc, rout, rprobs, rlse, rcapped);
    if (flash) {
        assert_close("attention lse", r.lse, rlse, a.B * a.H * a.T, RTOL_FWD);
    } else {
        assert_close("attention probs", r.probs, rprobs, S, RTOL_FWD);
        if (a.cap > 0.0f)
            assert_close("attention capped", r.capped, rcapped, S, RTOL_FWD);
        if (a.p > 0.0f) {
            size_t dropped = 0;
            for (size_t e = 0; e < S; e++) {
                size_t i = e / a.T % a.T, j = e % a.T;
                int keep = j <= i && ck_rng_keep(att_key(), e, a.p);
                ck_assert_uint_eq(r.mask[e], (unsigned)keep);
                double want = keep ? r.probs[e] / (1.0 - a.p) : 0.0;
                ck_assert_msg(fabs(r.dropped[e] - want) <= RTOL_FWD * want, "dropped[%zu]", e);
                dropped += j <= i && !keep;
            }
            ck_assert_uint_gt(dropped, 0); /* the dropout case drops something */
        }
    }
    assert_doubled("attention dqkv", r.dqkv, dqkv1, n_qkv);
    assert_fd(flash ? "flash dqkv" : "attention dqkv", &rc, 0, dqkv1);
    free_scratch();
}

/* Grouped-query (H=4 over KV=2) and plain multi-head (H=KV=4), without and with dropout,
 * without and with a softcap of 1.5 (scores reach about 5: the cap saturates), in both
 * forms: 16 cases, _i = (flash, dropout, grouped, softcap) bits. */
START_TEST(attention_fd)
{
    bool flash = _i & 1, drop = _i & 2, grouped = _i & 4, capped = _i & 8;
    att_dims a = {B_, T_, 4, grouped ? 2 : 4, 3, drop ? 0.2f : 0.0f, capped ? 1.5f : 0.0f};
    attention_fd_case(a, flash, 100 + (uint64_t)_i);
}
END_TEST

/* The flash form agrees with the standard one on a size where sgemm blocks, without and
 * with dropout and softcap: out and dqkv
 * to 1e-5 of the tensor's largest entry (2.2e-7 is the largest difference seen: the two
 * forms sum in different orders and flash recomputes the probabilities from lse). T = 33
 * fits one of flash's 64-row tiles; T = 150 takes three of queries and of keys, the last
 * one partial, where the online softmax rescales what earlier key tiles summed. */
START_TEST(flash_matches_standard)
{
    const float ps[] = {0.0f, 0.1f, 0.0f, 0.1f}, caps[] = {0.0f, 0.0f, 2.0f, 2.0f};
    const size_t Ts[] = {33, 150};
    for (size_t k = 0; k < 8; k++) {
        att_dims a = {2, Ts[k / 4], 4, 2, 16, ps[k % 4], caps[k % 4]};
        seed_data(200 + k);
        size_t n_qkv = a.B * a.T * att_w(a), n_out = a.B * a.T * a.H * a.D;
        float *qkv = frand(n_qkv), *dout = frand(n_out);
        att_run s = run_attention(a, false, qkv, dout, false, NULL);
        att_run f = run_attention(a, true, qkv, dout, false, NULL);
        double *so = to_double(s.out, n_out), *sd = to_double(s.dqkv, n_qkv);
        double so_max = max_abs(so, n_out), sd_max = max_abs(sd, n_qkv);
        for (size_t i = 0; i < n_out; i++)
            ck_assert_msg(fabs(f.out[i] - so[i]) <= 1e-5 * so_max, "out[%zu]: %g vs %g", i,
                          (double)f.out[i], so[i]);
        for (size_t i = 0; i < n_qkv; i++)
            ck_assert_msg(fabs(f.dqkv[i] - sd[i]) <= 1e-5 * sd_max, "dqkv[%zu]: %g vs %g", i,
                          (double)f.dqkv[i], sd[i]);
        free_scratch();
    }
}
END_TEST

/* Changing every q, k and v of the last token leaves the earlier outputs bit for bit
 * unchanged (position t attends to 0..t only) and changes the last one. */
START_TEST(attention_is_causal)
{
    bool flash = _i & 1;
    att_dims a = {2, 6, 4, 2, 3, (_i & 2) ? 0.2f : 0.0f, 0.0f};
    seed_data(300);
    size_t W = att_w(a), n_qkv = a.B * a.T * W, n_out = a.B * a.T * a.H * a.D;
    float *qkv = frand(n_qkv), *dout = frand(n_out);
    att_run r1 = run_attention(a, flash, qkv, dout, false, NULL);
    float *qkv2 = copy_f(qkv, n_qkv);
    for (size_t b = 0; b < a.B; b++)
        for (size_t c = 0; c < W; c++)
            qkv2[(b * a.T + a.T - 1) * W + c] += 0.5f;
    att_run r2 = run_attention(a, flash, qkv2, dout, false, NULL);
    size_t row = a.H * a.D;
    for (size_t b = 0; b < a.B; b++) {
        const float *o1 = r1.out + b * a.T * row, *o2 = r2.out + b * a.T * row;
        ck_assert(memcmp(o1, o2, (a.T - 1) * row * sizeof *o1) == 0);
        ck_assert(memcmp(o1 + (a.T - 1) * row, o2 + (a.T - 1) * row, row * sizeof *o1) != 0);
    }
    if (!flash) /* nothing is stored above the diagonal */
        for (size_t e = 0; e < a.B * a.H * a.T * a.T; e++)
            if (e % a.T > e / a.T % a.T) {
                ck_assert_float_eq(r1.probs[e], 0.0f);
                if (a.p > 0.0f)
                    ck_assert(r1.mask[e] == 0 && r1.dropped[e] == 0.0f);
            }
    free_scratch();
}
END_TEST

/* The same inputs give the same bits, call after call. */
START_TEST(kernels_are_deterministic)
{
    att_dims a = {2, 40, 4, 2, 16, 0.1f, 0.0f};
    seed_data(400);
    size_t n_qkv = a.B * a.T * att_w(a), n_out = a.B * a.T * a.H * a.D;
    float *qkv = frand(n_qkv), *dout = frand(n_out);
    for (int flash = 0; flash < 2; flash++) {
        att_run r1 = run_attention(a, flash, qkv, dout, false, NULL);
        att_run r2 = run_attention(a, flash, qkv, dout, false, NULL);
        ck_assert(memcmp(r1.out, r2.out, n_out * sizeof(float)) == 0);
        ck_assert(memcmp(r1.dqkv, r2.dqkv, n_qkv * sizeof(float)) == 0);
    }
    size_t N = 64, C = 48, OC = 80;
    float *x = frand(N * C), *w = frand(OC * C), *b = frand(OC), *dy = frand(N * OC);
    float *y1 = fbuf(N * OC), *y2 = fbuf(N * OC);
    float *dx1 = fbuf(N * C), *dx2 = fbuf(N * C), *dw1 = fbuf(OC * C), *dw2 = fbuf(OC * C);
    float *db1 = fbuf(OC), *db2 = fbuf(OC);
    ck_kernel_linear_forward(y1, x, w, b, N, C, OC);
    ck_kernel_linear_forward(y2, x, w, b, N, C, OC);
    ck_kernel_linear_backward(dx1, dw1, db1, dy, x, w, N, C, OC);
    ck_kernel_linear_backward(dx2, dw2, db2, dy, x, w, N, C, OC);
    ck_assert(memcmp(y1, y2, N * OC * sizeof(float)) == 0);
    ck_assert(memcmp(dx1, dx2, N * C * sizeof(float)) == 0);
    ck_assert(memcmp(dw1, dw2, OC * C * sizeof(float)) == 0);
    ck_assert(memcmp(db1, db2, OC * sizeof(float)) == 0);
    free_scratch();
}
END_TEST

/* ---- losses ---- */

START_TEST(cross_entropy)
{
    enum { V = 11 };
    seed_data(500);
    float *logits = frand(N_ * V), *dlogits = fbuf(N_ * V), *lse = obuf(N_);
    for (size_t i = 0; i < N_ * V; i++)
        logits[i] = logits[i] * 4.0f + 100.0f; /* exp(100) overflows f32: the max must go */
    int32_t targets[N_];
    for (size_t n = 0; n < N_; n++)
        targets[n] = (int32_t)(n * 7 % V);
    float loss = ck_kernel_cross_entropy_forward(lse, NULL, logits, targets, N_, V);
    ck_kernel_cross_entropy_backward(dlogits, lse, NULL, logits, targets, N_, V);
    float *d1 = copy_f(dlogits, N_ * V);
    float loss2 = ck_kernel_cross_entropy_forward(lse, NULL, logits, targets, N_, V);
    ck_kernel_cross_entropy_backward(dlogits, lse, NULL, logits, targets, N_, V);
    ck_assert_float_eq(loss, loss2);

    ref_case rc = {.fn = ref_cross_entropy, .n_out = 1, .n = N_, .V = V, .ids = targets};
    rc.in[0] = to_double(logits, N_ * V);
    rc.len[0] = N_ * V;
    double rloss, *rlse = dbuf(N_);
    ref_cross_entropy_lse(&rc, &rloss, rlse);
    ck_assert_msg(isfinite(loss) && fabs(loss - rloss) <= RTOL_FWD * fabs(rloss), "loss %g vs %g",
                  (double)loss, rloss);
    assert_close("cross-entropy lse", lse, rlse, N_, RTOL_FWD);
    assert_doubled("dlogits", dlogits, d1, N_ * V);
    assert_fd("dlogits", &rc, 0, d1);

    /* PyTorch's unfused form: the same loss and gradient, and logp = logits - lse kept. */
    float *logp = obuf(N_ * V), *dlp = fbuf(N_ * V);
    float loss3 = ck_kernel_cross_entropy_forward(NULL, logp, logits, targets, N_, V);
    ck_kernel_cross_entropy_backward(dlp, NULL, logp, NULL, targets, N_, V); /* logits unread */
    ck_assert_msg(fabs(loss3 - rloss) <= RTOL_FWD * fabs(rloss), "logp loss %g vs %g",
                  (double)loss3, rloss);
    double *rlogp = dbuf(N_ * V);
    for (size_t i = 0; i < N_ * V; i++)
        rlogp[i] = rc.in[0][i] - rlse[i / V];
    assert_close("log-probabilities", logp, rlogp, N_ * V, RTOL_FWD);
    assert_fd("dlogits from logp", &rc, 0, dlp);
    free_scratch();
}
END_TEST

START_TEST(mse)
{
    seed_data(501);
    float *pred = frand(EW_N), *target = frand(EW_N), *dpred = fbuf(EW_N);
    float loss = ck_kernel_mse_forward(pred, target, EW_N);
    ck_kernel_mse_backward(dpred, pred, target, EW_N);
    float *d1 = copy_f(dpred, EW_N);
    ck_kernel_mse_backward(dpred, pred, target, EW_N);
    ref_case rc = {.fn = ref_mse, .n_out = 1, .n = EW_N};
    rc.in[0] = to_double(pred, EW_N);
    rc.len[0] = EW_N;
    rc.in[1] = to_double(target, EW_N);
    rc.len[1] = EW_N;
    double rloss;
    ref_mse(&rc, &rloss);
    ck_assert_msg(fabs(loss - rloss) <= RTOL_FWD * rloss, "loss %g vs %g", (double)loss, rloss);
    assert_doubled("dpred", dpred, d1, EW_N);
    assert_fd("dpred", &rc, 0, d1);
    free_scratch();
}
END_TEST

/* ---- swiglu ---- */

static void ref_swiglu(const ref_case *rc, double *out)
{
    for (size_t i = 0; i < rc->n; i++) {
        double g = rc->in[0][i];
        out[i] = g / (1.0 + exp(-g)) * rc->in[1][i];
    }
}

/* A fused gated unit out = f(gate) up, with f and f' given in double: its kernels against
 * the reference and finite differences, and with one tensor as both inputs, whose gradient
 * is f'(x) x + f(x). */
typedef struct {
    const char *name;
    ref_fn ref;
    double (*f)(double), (*df)(double);
    void (*forward)(float *, const float *, const float *, size_t);
    void (*backward)(float *, float *, const float *, const float *, const float *, size_t);
} gated_unit;

static void check_gated(const gated_unit *u, uint64_t seed)
{
    seed_data(seed);
    ref_case rc = {.fn = u->ref, .n_out = EW_N, .n = EW_N};
    float *g = ew_input(), *up = ref_input(&rc, 1, EW_N), *out = obuf(EW_N), *dout = frand(EW_N);
    rc.in[0] = to_double(g, EW_N);
    rc.len[0] = EW_N;
    rc.g = to_double(dout, EW_N);
    float *dg = fbuf(EW_N), *du = fbuf(EW_N), *dx = fbuf(EW_N);
    u->forward(out, g, up, EW_N);
    u->backward(dg, du, dout, g, up, EW_N);
    float *dg1 = copy_f(dg, EW_N), *du1 = copy_f(du, EW_N);
    u->backward(dg, du, dout, g, up, EW_N);
    assert_forward(u->name, &rc, out);
    assert_doubled("dgate", dg, dg1, EW_N);
    assert_doubled("dup", du, du1, EW_N);
    assert_fd("dgate", &rc, 0, dg1);
    assert_fd("dup", &rc, 1, du1);
    u->backward(dx, dx, dout, g, g, EW_N);
    double *want = dbuf(EW_N);
    for (size_t i = 0; i < EW_N; i++)
        want[i] = dout[i] * (u->df(g[i]) * g[i] + u->f(g[i]));
    assert_close("one tensor as both inputs", dx, want, EW_N, RTOL_GRAD);
    free_scratch();
}

static double ref_silu1(double x) { return x / (1.0 + exp(-x)); }

/* silu'(x) = s (1 + x (1 - s)). */
static double ref_dsilu(double x)
{
    double sg = 1.0 / (1.0 + exp(-x));
    return sg * (1.0 + x * (1.0 - sg));
}

START_TEST(swiglu)
{
    gated_unit u = {"swiglu", ref_swiglu, ref_silu1, ref_dsilu, ck_kernel_swiglu_forward,
                    ck_kernel_swiglu_backward};
    check_gated(&u, 701);
}
END_TEST

/* ---- cast ---- */

typedef struct {
    const char *name;
    uint16_t (*from_f32)(float);
    float (*to_f32)(uint16_t);
} half_format;

static const half_format halves[] = {
    {"bf16", ck_kernel_f32_to_bf16, ck_kernel_bf16_to_f32},
    {"f16", ck_kernel_f32_to_f16, ck_kernel_f16_to_f32},
};

/* Every one of the 65536 codes converts to f32 and back to itself (NaNs to a NaN). */
START_TEST(half_codes_round_trip)
{
    for (size_t f = 0; f < 2; f++)
        for (uint32_t code = 0; code < 65536; code++) {
            float x = halves[f].to_f32((uint16_t)code);
            uint16_t back = halves[f].from_f32(x);
            if (isnan(x))
                ck_assert_msg(isnan(halves[f].to_f32(back)), "%s %04x", halves[f].name, code);
            else
                ck_assert_msg(back == code, "%s %04x -> %g -> %04x", halves[f].name, code,
                              (double)x, back);
        }
}
END_TEST

/* Rounding to nearest, ties to even, checked from the definition: no code of the same sign
 * is nearer than the result, and on a tie the result's code is even. Values are spread over
 * every exponent the formats reach (subnormals, overflow), plus the exact midpoints between
 * neighbouring codes. */
static void assert_nearest_even(const half_format *hf, float x)
{
    uint16_t h = hf->from_f32(x);
    double want = x, got = hf->to_f32(h), err = fabs(got - want);
    ck_assert_msg(!isnan(got), "%s(%g) is NaN", hf->name, want);
    ck_assert_msg(signbit(got) == signbit(want), "%s(%g): sign", hf->name, want);
    uint16_t mag = h & 0x7fff;
    if (isinf(got)) { /* overflow: at least half a step past the largest finite value */
        double top = hf->to_f32((uint16_t)(mag - 1)), below = hf->to_f32((uint16_t)(mag - 2));
        ck_assert_msg(fabs(want) >= top + (top - below) / 2, "%s(%g) overflows", hf->name, want);
        return;
    }
    for (int step = -1; step <= 1; step += 2) {
        int nb = (int)mag + step;
        if (nb < 0 || nb > 0x7fff)
            continue;
        double other = hf->to_f32((uint16_t)((h & 0x8000) | nb));
        if (isnan(other))
            continue;
        double oerr = fabs(other - want);
        ck_assert_msg(err < oerr || (err == oerr && (h & 1) == 0),
                      "%s(%.9g) = %.9g, but %.9g is nearer or an even tie", hf->name, want, got,
                      other);
    }
}

START_TEST(half_rounding_is_nearest_even)
{
    seed_data(801);
    for (size_t f = 0; f < 2; f++) {
        for (int i = 0; i < 20000; i++) {
            float x = (float)(urand() * ldexp(1.0, (int)(urand() * 140.0))); /* to 2^140 */
            float tiny = (float)(urand() * 0x1p-14); /* the f16 subnormal range */
            assert_nearest_even(&halves[f], x);
            assert_nearest_even(&halves[f], tiny);
        }
        for (uint32_t code = 0; code < 0x7bff; code += 7) { /* midpoints, in f32 exactly */
            double lo = halves[f].to_f32((uint16_t)code), hi = halves[f].to_f32((uint16_t)(code + 1));
            if (isfinite(hi) && !isnan(lo))
                assert_nearest_even(&halves[f], (float)((lo + hi) / 2));
        }
    }
    /* Fixed points of the formats: 65504 is f16's largest; 65520, the midpoint to the next
     * power of two, rounds to infinity; 2^-24 its smallest; 2^-25, half of it, to zero. */
    ck_assert_uint_eq(ck_kernel_f32_to_f16(65504.0f), 0x7bff);
    ck_assert_uint_eq(ck_kernel_f32_to_f16(65519.0f), 0x7bff);
    ck_assert_uint_eq(ck_kernel_f32_to_f16(65520.0f), 0x7c00);
    ck_assert_uint_eq(ck_kernel_f32_to_f16(-1e10f), 0xfc00);
    ck_assert_uint_eq(ck_kernel_f32_to_f16(0x1p-24f), 0x0001);
    ck_assert_uint_eq(ck_kernel_f32_to_f16(0x1p-25f), 0x0000);
    ck_assert_uint_eq(ck_kernel_f32_to_f16(0x1.8p-25f), 0x0001);
    ck_assert_uint_eq(ck_kernel_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);      /* tie: to even */
    ck_assert_uint_eq(ck_kernel_f32_to_f16(1.0f + 0x1.8p-10f), 0x3c02);    /* tie: to even */
    ck_assert_uint_eq(ck_kernel_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);      /* tie: to even */
    ck_assert_uint_eq(ck_kernel_f32_to_bf16(1.0f + 0x1.8p-7f), 0x3f82);    /* tie: to even */
    ck_assert_uint_eq(ck_kernel_f32_to_bf16(3.4e38f), 0x7f80);             /* to infinity */
    ck_assert(isnan(ck_kernel_bf16_to_f32(ck_kernel_f32_to_bf16(NAN))));
    ck_assert(isnan(ck_kernel_f16_to_f32(ck_kernel_f32_to_f16(NAN))));
    ck_assert(isinf(ck_kernel_f16_to_f32(ck_kernel_f32_to_f16(INFINITY))));
}
END_TEST

/* The forward rounds each value; the backward accumulates the gradient converted back, in
 * the input's dtype: exactly for f32, rounded once per call for a 16-bit input. */
START_TEST(cast_forward_and_backward)
{
    enum { N = 257 };
    seed_data(802);
    float *x = frand(N), *dout = frand(N), *dx = fbuf(N);
    uint16_t *low = scratch(N * 2), *dlow = scratch(N * 2);
    float *wide = obuf(N);
    ck_kernel_cast_forward(low, CK_BF16, x, CK_F32, N);
    ck_kernel_cast_forward(wide, CK_F32, low, CK_BF16, N);
    for (size_t i = 0; i < N; i++) {
        ck_assert_uint_eq(low[i], ck_kernel_f32_to_bf16(x[i]));
        ck_assert_float_eq(wide[i], ck_kernel_bf16_to_f32(low[i]));
        ck_assert(fabs(wide[i] - x[i]) <= fabs(x[i]) * 0x1p-8);
    }
    /* f32 -> f16 backward: dout is f16, dx f32 */
    uint16_t *dhalf = scratch(N * 2);
    ck_kernel_cast_forward(dhalf, CK_F16, dout, CK_F32, N);
    ck_kernel_cast_backward(dx, CK_F32, dhalf, CK_F16, N);
    ck_kernel_cast_backward(dx, CK_F32, dhalf, CK_F16, N);
    for (size_t i = 0; i < N; i++)
        ck_assert_float_eq(dx[i], 2.0f * ck_kernel_f16_to_f32(dhalf[i]));
    /* bf16 -> f32 backward: dout f32, din bf16, accumulated and rounded each call */
    ck_kernel_cast_backward(dlow, CK_BF16, dout, CK_F32, N);
    ck_kernel_cast_backward(dlow, CK_BF16, dout, CK_F32, N);
    for (size_t i = 0; i < N; i++) {
        uint16_t once = ck_kernel_f32_to_bf16(dout[i]);
        ck_assert_uint_eq(dlow[i], ck_kernel_f32_to_bf16(ck_kernel_bf16_to_f32(once) + dout[i]));
    }
    free_scratch();
}
END_TEST

/* ---- rope ---- */

/* Each pair (2j, 2j+1) of a q or k head at position t, read as the complex number
 * x_2j + i x_2j+1, is multiplied by e^(i t w_j), w_j = theta^(-2j/D); v is copied. */
static void ref_rope(const ref_case *rc, double *out)
{
    size_t W = (rc->H + 2 * rc->KV) * rc->D;
    for (size_t bt = 0; bt < rc->B * rc->T; bt++) {
        double t = (double)(bt % rc->T);
        const double *x = rc->in[0] + bt * W;
        double *y = out + bt * W;
        for (size_t c = 0; c < W; c++)
            y[c] = x[c];
        for (size_t h = 0; h < rc->H + rc->KV; h++)
            for (size_t j = 0; j < rc->D / 2; j++) {
                double w = exp(-2.0 * (double)j / (double)rc->D * log(rc->theta));
                double re = cos(t * w), im = sin(t * w);
                const double *z = x + h * rc->D + 2 * j;
                y[h * rc->D + 2 * j] = z[0] * re - z[1] * im;
                y[h * rc->D + 2 * j + 1] = z[0] * im + z[1] * re;
            }
    }
}

/* Rotations by up to 7 radians, with theta 3 so that the later pairs turn too; four q heads
 * and two kv heads of 6 values. */
START_TEST(rope)
{
    enum { B = 2, T = 8, H = 4, KV = 2, D = 6, W = (H + 2 * KV) * D, N = B * T * W };
    seed_data(601);
    float *x = frand(N), *out = obuf(N), *dout = frand(N), *dx = fbuf(N);
    ref_case rc = {.fn = ref_rope, .n_out = N, .g = to_double(dout, N), .B = B, .T = T, .H = H,
                   .KV = KV, .D = D, .theta = 3.0};
    rc.in[0] = to_double(x, N);
    rc.len[0] = N;
    ck_kernel_rope_forward(out, x, B, T, H, KV, D, 3.0);
    ck_kernel_rope_backward(dx, dout, B, T, H, KV, D, 3.0);
    float *dx1 = copy_f(dx, N);
    ck_kernel_rope_backward(dx, dout, B, T, H, KV, D, 3.0);
    assert_forward("rope", &rc, out);
    assert_doubled("rope dinp", dx, dx1, N);
    assert_fd("rope dinp", &rc, 0, dx1);
    /* Position 0 is not rotated, and v heads never are. */
    for (size_t c = 0; c < W; c++)
        ck_assert_float_eq(out[c], x[c]);
    for (size_t c = (H + KV) * D; c < W; c++)
        ck_assert_float_eq(out[3 * W + c], x[3 * W + c]);
    free_scratch();
}
END_TEST

/* ---- lora ---- */

/* rc->in: x [n, C], y [n, OC], A [P*R, C], B [OC, R]; output column o of part p (the
 * columns of part p follow those of parts before it) adds alpha/R sum_r B[o, r]
 * (A x)[p R + r]. */
static void ref_lora(const ref_case *rc, double *out)
{
    const double *x = rc->in[0], *y = rc->in[1], *A = rc->in[2], *B = rc->in[3];
    size_t R = rc->R, C = rc->C, OC = rc->OC;
    for (size_t n = 0; n < rc->n; n++)
        for (size_t o = 0, p = 0, end = rc->width[0]; o < OC; o++) {
            if (o == end)
                end += rc->width[++p];
            double sum = 0.0;
            for (size_t r = 0; r < R; r++) {
                double m = 0.0;
                for (size_t c = 0; c < C; c++)
                    m += A[(p * R + r) * C + c] * x[n * C + c];
                sum += B[o * R + r] * m;
            }
            out[n * OC + o] = y[n * OC + o] + rc->alpha / (double)R * sum;
        }
}

/* One adapter, and q, k, v adapters on a packed qkv of 2 q heads and 1 kv head of 3:
 * against the reference and finite differences for x, y, A and B; mid is A x. */
static void check_lora(size_t n_parts, const size_t *width, size_t OC)
{
    enum { N = 6, C = 5, R = 2 };
    size_t MW = n_parts * R;
    ref_case rc = {.fn = ref_lora, .n_out = N * OC, .n = N, .C = C, .OC = OC, .R = R,
                   .n_parts = n_parts, .alpha = 3.0};
    memcpy(rc.width, width, n_parts * sizeof *width);
    float *x = ref_input(&rc, 0, N * C), *y = ref_input(&rc, 1, N * OC);
    float *A = ref_input(&rc, 2, MW * C), *B = ref_input(&rc, 3, OC * R);
    float *out = obuf(N * OC), *mid = obuf(N * MW), *dout = frand(N * OC), *ws = obuf(N * MW);
    float *dx = fbuf(N * C), *dy = fbuf(N * OC), *dA = fbuf(MW * C), *dB = fbuf(OC * R);
    rc.g = to_double(dout, N * OC);
    float s = 1.5f; /* alpha / R */
    ck_kernel_lora_forward(out, mid, x, y, A, B, N, C, OC, R, n_parts, width, s);
    assert_forward("lora", &rc, out);
    double *want_mid = dbuf(N * MW);
    for (size_t n = 0; n < N; n++)
        for (size_t j = 0; j < MW; j++)
            for (size_t c = 0; c < C; c++)
                want_mid[n * MW + j] += (double)A[j * C + c] * x[n * C + c];
    assert_close("lora mid", mid, want_mid, N * MW, RTOL_FWD);
    ck_kernel_lora_backward(dx, dy, dA, dB, ws, dout, x, mid, A, B, N, C, OC, R, n_parts, width, s);
    float *grads[] = {dx, dy, dA, dB}, *once[4];
    size_t lens[] = {N * C, N * OC, MW * C, OC * R};
    for (size_t k = 0; k < 4; k++)
        once[k] = copy_f(grads[k], lens[k]);
    ck_kernel_lora_backward(dx, dy, dA, dB, ws, dout, x, mid, A, B, N, C, OC, R, n_parts, width, s);
    const char *names[] = {"lora dx", "lora dy", "lora dA", "lora dB"};
    for (size_t k = 0; k < 4; k++) {
        assert_doubled(names[k], grads[k], once[k], lens[k]);
        assert_fd(names[k], &rc, k, once[k]);
    }
    free_scratch();
}

START_TEST(lora)
{
    seed_data(801);
    size_t one[] = {7}, qkv[] = {6, 3, 3};
    check_lora(1, one, 7);
    check_lora(3, qkv, 12);
}
END_TEST

/* ---- qknorm ---- */

/* rc->in: qkv [n, (H + 2*KV) * D], q_gamma [D], k_gamma [D]; each q and k head of D values
 * x becomes x / sqrt(mean(x^2) + 1e-6) * gamma, v heads are copied. rstd: NULL or
 * [n, H + KV]. */
static void ref_qknorm_stats(const ref_case *rc, double *out, double *rstd)
{
    size_t D = rc->D, W = (rc->H + 2 * rc->KV) * D;
    for (size_t n = 0; n < rc->n; n++)
        for (size_t h = 0; h < rc->H + 2 * rc->KV; h++) {
            const double *x = rc->in[0] + n * W + h * D;
            double *y = out + n * W + h * D;
            bool normed = h < rc->H + rc->KV;
            const double *g = rc->in[h < rc->H ? 1 : 2];
            double ss = 0.0;
            for (size_t d = 0; d < D; d++)
                ss += x[d] * x[d];
            double r = 1.0 / sqrt(ss / (double)D + 1e-6);
            for (size_t d = 0; d < D; d++)
                y[d] = normed ? x[d] * r * g[d] : x[d];
            if (rstd && normed)
                rstd[n * (rc->H + rc->KV) + h] = r;
        }
}

static void ref_qknorm(const ref_case *rc, double *out) { ref_qknorm_stats(rc, out, NULL); }

/* 3 q heads sharing 1 kv head, heads of 4, with gammas away from 1 so that q_gamma and
 * k_gamma swapped, or v normalised, show. The backward from the q and k heads the forward
 * kept (written out) adds exactly what the one from the whole input does. */
START_TEST(qknorm)
{
    enum { N = 6, H = 3, KV = 1, D = 4, W = (H + 2 * KV) * D };
    seed_data(901);
    ref_case rc = {.fn = ref_qknorm, .n_out = N * W, .n = N, .H = H, .KV = KV, .D = D};
    float *x = ref_input(&rc, 0, N * W), *qg = ref_input(&rc, 1, D), *kg = ref_input(&rc, 2, D);
    float *out = obuf(N * W), *rstd = obuf(N * (H + KV)), *dout = frand(N * W);
    float *dx = fbuf(N * W), *dqg = fbuf(D), *dkg = fbuf(D);
    rc.g = to_double(dout, N * W);
    float *normed = obuf(N * (H + KV) * D), *heads = obuf(N * (H + KV) * D);
    ck_kernel_qknorm_forward(out, rstd, normed, heads, x, qg, kg, N, H, KV, D, 1e-6);
    for (size_t n = 0; n < N; n++)
        ck_assert(memcmp(heads + n * (H + KV) * D, x + n * W, (H + KV) * D * sizeof *x) == 0);
    assert_forward("qknorm", &rc, out);
    double *want_rstd = dbuf(N * (H + KV)), *scratch_out = dbuf(N * W);
    ref_qknorm_stats(&rc, scratch_out, want_rstd);
    assert_close("qknorm rstd", rstd, want_rstd, N * (H + KV), RTOL_FWD);
    /* Qwen3RMSNorm written out keeps x rstd of each q and k head, the v heads left out */
    double *want_normed = dbuf(N * (H + KV) * D);
    for (size_t n = 0; n < N; n++)
        for (size_t h = 0; h < H + KV; h++)
            for (size_t j = 0; j < D; j++)
                want_normed[(n * (H + KV) + h) * D + j] = rc.in[0][n * W + h * D + j] * want_rstd[n * (H + KV) + h];
    assert_close("qknorm x rstd", normed, want_normed, N * (H + KV) * D, RTOL_FWD);
    ck_kernel_qknorm_backward(dx, dqg, dkg, dout, x, false, qg, kg, rstd, N, H, KV, D);
    float *grads[] = {dx, dqg, dkg}, *once[3];
    size_t lens[] = {N * W, D, D};
    for (size_t k = 0; k < 3; k++)
        once[k] = copy_f(grads[k], lens[k]);
    ck_kernel_qknorm_backward(dx, dqg, dkg, dout, heads, true, qg, kg, rstd, N, H, KV, D);
    const char *names[] = {"qknorm dx", "qknorm dq_gamma", "qknorm dk_gamma"};
    for (size_t k = 0; k < 3; k++) {
        assert_doubled(names[k], grads[k], once[k], lens[k]);
        assert_fd(names[k], &rc, k, once[k]);
    }
    free_scratch();
}
END_TEST

/* ---- geglu ---- */

static double ref_gelu_tanh(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void ref_geglu(const ref_case *rc, double *out)
{
    for (size_t i = 0; i < rc->n; i++)
        out[i] = ref_gelu_tanh(rc->in[0][i]) * rc->in[1][i];
}

/* The element-wise kernels run in vectorised blocks of 8 and a scalar tail (sim/kernel.c,
 * EACH): an element's value must not depend on where it falls. Each kernel runs on 1001
 * values and on the same values from the second on (shifted by one: another lane, another
 * alignment, the tail); every result must be the same bits (enough values that two
 * formulas 1 ulp apart, one per loop, would differ somewhere). */
typedef void (*unary_fn)(float *restrict, const float *restrict, size_t);
typedef void (*unary_grad_fn)(float *restrict, const float *restrict, const float *restrict,
                              size_t);

START_TEST(elementwise_position_independent)
{
    enum { N = 1001 };
    const unary_fn fwd[] = {ck_kernel_gelu_forward, ck_kernel_silu_forward};
    const unary_grad_fn bwd[] = {ck_kernel_gelu_backward, ck_kernel_silu_backward};
    seed_data(41);
    float *x = frand(N), *dout = frand(N), *up = frand(N);
    for (size_t i = 0; i < N; i++)
        x[i] *= 6.0f;
    for (size_t k = 0; k < 3; k++) {
        float *o1 = fbuf(N), *o2 = fbuf(N), *d1 = fbuf(N), *d2 = fbuf(N), *u1 = fbuf(N),
              *u2 = fbuf(N);
        if (k < 2) {
            fwd[k](o1, x, N);
            fwd[k](o2, x + 1, N - 1);
            bwd[k](d1, x, dout, N);
            bwd[k](d2, x + 1, dout + 1, N - 1);
        } else {
            ck_kernel_swiglu_forward(o1, x, up, N);
            ck_kernel_swiglu_forward(o2, x + 1, up + 1, N - 1);
            ck_kernel_swiglu_backward(d1, u1, dout, x, up, N);
            ck_kernel_swiglu_backward(d2, u2, dout + 1, x + 1, up + 1, N - 1);
        }
        for (size_t i = 0; i + 1 < N; i++) {
            ck_assert_msg(memcmp(&o1[i + 1], &o2[i], sizeof(float)) == 0, "kernel %zu: out[%zu]", k, i + 1);
            ck_assert_msg(memcmp(&d1[i + 1], &d2[i], sizeof(float)) == 0, "kernel %zu: dx[%zu]", k, i + 1);
            ck_assert_msg(memcmp(&u1[i + 1], &u2[i], sizeof(float)) == 0, "kernel %zu: dup[%zu]", k, i + 1);
        }
    }
    free_scratch();
}
END_TEST

/* Far from [-3, 3], where the hand-written exp underflows (below -87.34), overflows
 * (above 88.37) or feeds a tanh near 1 or 0: gelu, silu and their gradients against double
 * formulas to 1e-6 relatively (or 1e-30 absolutely, for results of order e^-88), and a
 * NaN input gives NaN. */
static double ref_silu_at(double x) { return x / (1.0 + exp(-x)); }

START_TEST(elementwise_extremes)
{
    static const float xs[] = {-100.0f, -88.5f, -87.4f, -50.0f, -10.0f, -1e-3f, 0.0f, 1e-3f,
                               1.0f, 10.0f, 50.0f, 88.5f, 100.0f};
    enum { N = sizeof xs / sizeof xs[0] };
    float out[N], dx[N] = {0}, ones[N];
    for (size_t i = 0; i < N; i++)
        ones[i] = 1.0f;
    for (int kind = 0; kind < 2; kind++) {
        memset(dx, 0, sizeof dx);
        (kind ? ck_kernel_silu_forward : ck_kernel_gelu_forward)(out, xs, N);
        (kind ? ck_kernel_silu_backward : ck_kernel_gelu_backward)(dx, xs, ones, N);
        for (size_t i = 0; i < N; i++) {
            double x = xs[i], h = 1e-4 * (fabs(x) > 1 ? fabs(x) : 1);
            double (*f)(double) = kind ? ref_silu_at : ref_gelu_tanh;
            double want = f(x), dwant = (f(x + h) - f(x - h)) / (2 * h);
            ck_assert_msg(fabs(out[i] - want) <= 1e-6 * fabs(want) + 1e-30, "%s(%g) = %g, not %g",
                          kind ? "silu" : "gelu", x, (double)out[i], want);
            ck_assert_msg(fabs(dx[i] - dwant) <= 1e-4 * fabs(dwant) + 1e-30,
                          "%s'(%g) = %g, not %g", kind ? "silu" : "gelu", x, (double)dx[i], dwant);
        }
        float nan_in = NAN, nan_out = 0.0f;
        (kind ? ck_kernel_silu_forward : ck_kernel_gelu_forward)(&nan_out, &nan_in, 1);
        ck_assert(isnan(nan_out));
    }
}
END_TEST

/* gelu' by central differences of the reference. */
static double ref_dgelu_tanh(double x)
{
    return (ref_gelu_tanh(x + FD_STEP) - ref_gelu_tanh(x - FD_STEP)) / (2 * FD_STEP);
}

START_TEST(geglu)
{
    gated_unit u = {"geglu", ref_geglu, ref_gelu_tanh, ref_dgelu_tanh, ck_kernel_geglu_forward,
                    ck_kernel_geglu_backward};
    check_gated(&u, 1001);
}
END_TEST

/* ---- softcap ---- */

static void ref_softcap(const ref_case *rc, double *out)
{
    for (size_t i = 0; i < rc->n; i++)
        out[i] = rc->cap * tanh(rc->in[0][i] / rc->cap);
}

/* Inputs in [-3, 3] against a cap of 1.5: both the linear middle and the saturated ends;
 * every output lies strictly inside (-cap, cap). */
START_TEST(softcap)
{
    seed_data(1101);
    float *x = ew_input(), *out = obuf(EW_N), *dout = frand(EW_N), *dx = fbuf(EW_N);
    ref_case rc = {.fn = ref_softcap, .n_out = EW_N, .g = to_double(dout, EW_N), .n = EW_N,
                   .cap = 1.5};
    rc.in[0] = to_double(x, EW_N);
    rc.len[0] = EW_N;
    ck_kernel_softcap_forward(out, x, 1.5f, EW_N);
    ck_kernel_softcap_backward(dx, out, dout, 1.5f, EW_N);
    float *dx1 = copy_f(dx, EW_N);
    ck_kernel_softcap_backward(dx, out, dout, 1.5f, EW_N);
    assert_forward("softcap", &rc, out);
    assert_doubled("softcap dinp", dx, dx1, EW_N);
    assert_fd("softcap dinp", &rc, 0, dx1);
    for (size_t i = 0; i < EW_N; i++)
        ck_assert(fabsf(out[i]) < 1.5f);
    free_scratch();
}
END_TEST

/* ---- scale ---- */

static void ref_scale(const ref_case *rc, double *out)
{
    for (size_t i = 0; i < rc->n; i++)
        out[i] = rc->alpha * rc->in[0][i];
}

START_TEST(scale)
{
    seed_data(1201);
    float *x = ew_input(), *out = obuf(EW_N), *dout = frand(EW_N), *dx = fbuf(EW_N);
    ref_case rc = {.fn = ref_scale, .n_out = EW_N, .g = to_double(dout, EW_N), .n = EW_N,
                   .alpha = 2.75};
    rc.in[0] = to_double(x, EW_N);
    rc.len[0] = EW_N;
    ck_kernel_scale_forward(out, x, 2.75f, EW_N);
    ck_kernel_scale_backward(dx, dout, 2.75f, EW_N);
    float *dx1 = copy_f(dx, EW_N);
    ck_kernel_scale_backward(dx, dout, 2.75f, EW_N);
    assert_forward("scale", &rc, out);
    assert_doubled("scale dinp", dx, dx1, EW_N);
    assert_fd("scale dinp", &rc, 0, dx1);
    free_scratch();
}
END_TEST

static Suite *kernels_suite(void)
{
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, embedding_with_positions);
    tcase_add_test(tc, embedding_without_positions);
    tcase_add_test(tc, linear_with_bias);
    tcase_add_test(tc, linear_without_bias);
    tcase_add_test(tc, layernorm);
    tcase_add_test(tc, rmsnorm);
    tcase_add_test(tc, norms_take_their_eps);
    tcase_add_test(tc, gelu);
    tcase_add_test(tc, elementwise_position_independent);
    tcase_add_test(tc, elementwise_extremes);
    tcase_add_test(tc, relu);
    tcase_add_test(tc, silu);
    tcase_add_test(tc, add);
    tcase_add_test(tc, mul);
    tcase_add_test(tc, binary_ops_with_one_input_twice);
    tcase_add_test(tc, dropout);
    tcase_add_test(tc, dropout_p0_is_identity);
    tcase_add_test(tc, rng_keep_fraction);
    tcase_add_test(tc, rng_bits_are_balanced);
    tcase_add_test(tc, rng_determinism_and_streams);
    tcase_add_loop_test(tc, attention_fd, 0, 16);
    tcase_add_test(tc, flash_matches_standard);
    tcase_add_loop_test(tc, attention_is_causal, 0, 4);
    tcase_add_test(tc, kernels_are_deterministic);
    tcase_add_test(tc, cross_entropy);
    tcase_add_test(tc, mse);
    tcase_add_test(tc, rope);
    tcase_add_test(tc, lora);
    tcase_add_test(tc, qknorm);
    tcase_add_test(tc, geglu);
    tcase_add_test(tc, softcap);
    tcase_add_test(tc, scale);
    tcase_add_test(tc, swiglu);
    tcase_add_test(tc, half_codes_round_trip);
    tcase_add_test(tc, half_rounding_is_nearest_even);
    tcase_add_test(tc, cast_forward_and_backward);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(kernels_suite)
