#include "sim/kernel.h"

#include <assert.h>
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <string.h>

/* cblas takes int dimensions; a size beyond INT_MAX is a caller error (no tensor of the
 * shipped models comes close), caught here rather than silently wrapped. */
static int bdim(size_t n)
{
    assert(n <= (size_t)INT_MAX);
    return (int)n;
}

/* ---- vectorisable element-wise math ----
 *
 * The build's -O2 vectorises a loop (SSE, 4 floats at a time) only when it can prove its
 * trip count a multiple of the vector width, its pointers restrict-qualified, its body free
 * of calls and branches, and its callees inlined. So the element-wise kernels run through
 * EACH over restrict-qualified pointers, and their math is written here branch-free:
 * libm's tanhf and expf are calls, and tanhf alone (through expm1f) took a third of a
 * gpt2-tiny step. Each element gets the same operations in the vector loop and in the
 * scalar tail (and no fused multiply-add: C11 mode contracts none), so a value does not
 * depend on which loop it falls in, nor on its buffer's alignment. */

/* for (size_t I = 0; I < N; I++) BODY, in blocks of 8 elements (an inner loop of a known
 * trip count, which -O2 vectorises wherever the function is inlined), then over the rest. */
#define EACH(I, N, ...)                                                                    \
    do {                                                                                   \
        size_t each_n_ = (N), each_b_ = 0;                                                 \
        for (; each_b_ + 8 <= each_n_; each_b_ += 8)                                       \
            for (size_t each_l_ = 0; each_l_ < 8; each_l_++) {                             \
                size_t I = each_b_ + each_l_;                                              \
                __VA_ARGS__;                                                               \
            }                                                                              \
        for (size_t I = each_b_; I < each_n_; I++) {                                       \
            __VA_ARGS__;                                                                   \
        }                                                                                  \
    } while (0)

/* Bit casts through a union, which C11 allows (the rounding trick of exp_vec needs them). */
typedef union {
    float f;
    uint32_t u;
} float_bits;

static inline uint32_t bits_of(float x)
{
    return (float_bits){.f = x}.u;
}

static inline float float_of(uint32_t b)
{
    return (float_bits){.u = b}.f;
}

/* c ? a : b with masks: -O2 turns no float conditional into a select (float compares may
 * trap), so a ?: would leave a branch in the loop. */
static inline float pick(bool c, float a, float b)
{
    uint32_t m = -(uint32_t)c;
    return float_of((bits_of(a) & m) | (bits_of(b) & ~m));
}

/* e^x within 1.4 ulp (Cody and Waite's reduction x = n ln 2 + r, |r| <= ln 2 / 2, then
 * Cephes' degree-6 polynomial for e^r, scaled by 2^n through the exponent bits). Below
 * -87.34 (where e^x is subnormal) it gives 0, above 88.376 infinity (expf's limit is
 * 88.72: no caller needs that last step, their exponents are at most 0 or, in a sigmoid,
 * give 1 / (1 + e^x) = 0 either way); NaN stays NaN. */
static inline float exp_vec(float x)
{
    bool under = x < -87.33654f, over = x > 88.37626f;
    float safe = pick(under | over, 0.0f, x);
    float t = safe * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: rounds to n */
    float n = t - 12582912.0f;
    float r = safe - n * 0.693359375f - n * -2.12194440e-4f;
    float y = (((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
                 4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f) * r * r +
              r + 1.0f;
    float e = y * float_of((bits_of(t) - 0x4B400000u + 127u) << 23); /* y 2^n */
    return pick(under, 0.0f, pick(over, INFINITY, e));
}

/* sigmoid(x) = 1 / (1 + e^-x). */
static inline float sigmoid_vec(float x)
{
    return 1.0f / (1.0f + exp_vec(-x));
}

/* Row sums in 8 interleaved partial sums, added up in a fixed order at the end: a
 * vectorised reduction, and the same bits for the same row wherever it lies. */
#define SUM_LANES 8

static float lanes_total(const float *lane)
{
    float s = 0.0f;
    for (size_t l = 0; l < SUM_LANES; l++)
        s += lane[l];
    return s;
}

/* sum x[i] a[i] (a NULL: sum x[i]), in 8 lanes. */
static float dot_vec(const float *restrict x, const float *restrict a, size_t n)
{
    float lane[SUM_LANES] = {0};
    size_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (size_t l = 0; l < SUM_LANES; l++)
            lane[l] += x[i + l] * a[i + l];
    float s = lanes_total(lane);
    for (; i < n; i++)
        s += x[i] * a[i];
    return s;
}

/* In double, for the norms' statistics: sum (x[i] - shift)^2 (squares) or sum x[i] - shift,
 * in 8 lanes; one loop per form, since -O2 vectorises no loop with a branch. */
static double lanes_total_double(const double *lane)
{
    double s = 0.0;
    for (size_t l = 0; l < SUM_LANES; l++)
        s += lane[l];
    return s;
}

static double sum_double(const float *restrict x, double shift, bool squares, size_t n)
{
    double lane[SUM_LANES] = {0}, s;
    size_t i = 0;
    if (squares)
        for (; i + SUM_LANES <= n; i += SUM_LANES)
            for (size_t l = 0; l < SUM_LANES; l++)
                lane[l] += (x[i + l] - shift) * (x[i + l] - shift);
    else
        for (; i + SUM_LANES <= n; i += SUM_LANES)
            for (size_t l = 0; l < SUM_LANES; l++)
                lane[l] += x[i + l] - shift;
    s = lanes_total_double(lane);
    for (; i < n; i++)
        s += squares ? (x[i] - shift) * (x[i] - shift) : x[i] - shift;
    return s;
}

/* max x[i]; -infinity for n = 0; NaN entries are passed over. */
static float max_vec(const float *restrict x, size_t n)
{
    float lane[SUM_LANES], m = -INFINITY;
    for (size_t l = 0; l < SUM_LANES; l++)
        lane[l] = -INFINITY;
    size_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (size_t l = 0; l < SUM_LANES; l++)
            lane[l] = pick(x[i + l] > lane[l], x[i + l], lane[l]);
    for (size_t l = 0; l < SUM_LANES; l++)
        m = pick(lane[l] > m, lane[l], m);
    for (; i < n; i++)
        m = pick(x[i] > m, x[i], m);
    return m;
}

/* out[i] = e^(x[i] - shift) (out NULL: not stored; out may be x); returns their sum. Each
 * block of 8 is loaded before it is stored, so that in place it vectorises too. */
static float exp_shifted(float *out, const float *x, float shift, size_t n)
{
    float lane[SUM_LANES] = {0};
    size_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES) {
        float e[SUM_LANES];
        for (size_t l = 0; l < SUM_LANES; l++)
            e[l] = exp_vec(x[i + l] - shift);
        for (size_t l = 0; l < SUM_LANES; l++)
            lane[l] += e[l];
        if (out)
            memcpy(out + i, e, sizeof e);
    }
    float s = lanes_total(lane);
    for (; i < n; i++) {
        float e = exp_vec(x[i] - shift);
        s += e;
        if (out)
            out[i] = e;
    }
    return s;
}

/* x *= k. */
static void scale_in_place(float *restrict x, float k, size_t n)
{
    EACH(i, n, x[i] *= k);
}

/* x = keep x / (1 - p) in place, keep[i] 0 or 1 (dropout with its draws made). */
static void keep_in_place(float *restrict x, const uint8_t *restrict keep, float scale, size_t n)
{
    EACH(i, n, x[i] = pick(keep[i], x[i] * scale, 0.0f));
}

/* d += s (distinct buffers). */
static void add_into(float *restrict d, const float *restrict s, size_t n)
{
    EACH(i, n, d[i] += s[i]);
}

/* d += k s. */
static void add_scaled_into(float *restrict d, const float *restrict s, float k, size_t n)
{
    EACH(i, n, d[i] += k * s[i]);
}

/* ---- embedding ---- */

/* out[b,t,:] = wte[ids[b,t],:] + wpe[t,:]. ids must lie in [0, V): the caller validates
 * token ids when it loads them, so the kernel does not pay for a check per row. */
void ck_kernel_embedding_forward(float *out, const int32_t *ids, const float *wte, const float *wpe,
                          size_t B, size_t T, size_t C)
{
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) {
            float *o = out + (b * T + t) * C;
            const float *e = wte + (size_t)ids[b * T + t] * C;
            if (wpe) {
                ck_kernel_add_forward(o, e, wpe + t * C, C);
            } else {
                memcpy(o, e, C * sizeof *o);
            }
        }
}

/* dwte[ids[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:]. Rows are visited in a fixed
 * order, so a token repeated in the batch accumulates identically on every call. */
void ck_kernel_embedding_backward(float *dwte, float *dwpe, const float *dout, const int32_t *ids,
                           size_t B, size_t T, size_t C)
{
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) {
            const float *d = dout + (b * T + t) * C;
            add_into(dwte + (size_t)ids[b * T + t] * C, d, C);
            if (dwpe)
                add_into(dwpe + t * C, d, C);
        }
}

/* ---- linear ---- */

/* out = inp W^T + bias. The bias is broadcast into out first so that a single sgemm with
 * beta = 1 adds the product: one pass over out instead of two. */
void ck_kernel_linear_forward(float *out, const float *inp, const float *weight, const float *bias,
                       size_t N, size_t C, size_t OC)
{
    float beta = 0.0f;
    if (bias) {
        for (size_t n = 0; n < N; n++)
            memcpy(out + n * OC, bias, OC * sizeof *out);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bdim(N), bdim(OC), bdim(C), 1.0f, inp,
                bdim(C), weight, bdim(C), beta, out, bdim(OC));
}

/* a[o] += sum over rows of x[n, o], in row order (deterministic). Written out in blocks
 * of 8 columns with restrict parameters (the bias gradient never overlaps the upstream
 * gradient) so that -O2 vectorises it: the plain loop stayed scalar and cost 10% of the
 * backward on gpt2-tiny's shapes. */
static void column_sums(float *restrict a, const float *restrict x, size_t N, size_t OC)
{
    for (size_t n = 0; n < N; n++) {
        const float *row = x + n * OC;
        size_t o = 0;
        for (; o + 8 <= OC; o += 8) {
            a[o + 0] += row[o + 0];
            a[o + 1] += row[o + 1];
            a[o + 2] += row[o + 2];
            a[o + 3] += row[o + 3];
            a[o + 4] += row[o + 4];
            a[o + 5] += row[o + 5];
            a[o + 6] += row[o + 6];
            a[o + 7] += row[o + 7];
        }
        for (; o < OC; o++)
            a[o] += row[o];
    }
}

/* dinp += dout W; dW += dout^T inp; dbias += sum over rows of dout. A NULL gradient is not
 * required (an input that needs none, a frozen weight); without dweight, inp is not read
 * (a frozen linear keeps no input). */
/* The products of ck_kernel_linear_backward, dout's rows ld floats apart (ld >= OC). */
static void linear_backward_rows(float *dinp, float *dweight, const float *dout, size_t ld,
                                 const float *inp, const float *weight, size_t N, size_t C, size_t OC)
{
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bdim(N), bdim(C), bdim(OC), 1.0f,
                    dout, bdim(ld), weight, bdim(C), 1.0f, dinp, bdim(C));
    if (dweight)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bdim(OC), bdim(C), bdim(N), 1.0f, dout,
                    bdim(ld), inp, bdim(C), 1.0f, dweight, bdim(C));
}

void ck_kernel_linear_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, size_t N, size_t C, size_t OC)
{
    linear_backward_rows(dinp, dweight, dout, OC, inp, weight, N, C, OC);
    if (dbias)
        column_sums(dbias, dout, N, OC);
}

/* ---- normalisation ---- */

/* out = (x - m) r w + b. */
static void layernorm_row(float *restrict out, const float *restrict x,
                          const float *restrict weight, const float *restrict bias, float m,
                          float r, size_t C)
{
    EACH(c, C, out[c] = (x[c] - m) * r * weight[c] + bias[c]);
}

/* mean = sum x / C, var = sum (x - mean)^2 / C (two passes, in double: no cancellation
 * for rows with a large mean), rstd = 1/sqrt(var + eps), out = (x - mean) rstd w + b. */
void ck_kernel_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, size_t N, size_t C, double eps)
{
    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * C;
        double m = sum_double(x, 0.0, false, C) / (double)C, v = sum_double(x, m, true, C);
        float r = (float)(1.0 / sqrt(v / (double)C + eps)), mf = (float)m;
        layernorm_row(out + n * C, x, weight, bias, mf, r, C);
        mean[n] = mf;
        rstd[n] = r;
    }
}

/* sums[0] = sum g, sums[1] = sum g xhat, in 8 lanes each (g = d w, xhat = (x - m) r). */
static void layernorm_row_sums(float *sums, const float *restrict d, const float *restrict x,
                               const float *restrict weight, float m, float r, size_t C)
{
    float lane_g[SUM_LANES] = {0}, lane_gx[SUM_LANES] = {0};
    size_t c = 0;
    for (; c + SUM_LANES <= C; c += SUM_LANES)
        for (size_t l = 0; l < SUM_LANES; l++) {
            float xhat = (x[c + l] - m) * r, g = d[c + l] * weight[c + l];
            lane_g[l] += g;
            lane_gx[l] += g * xhat;
        }
    sums[0] = lanes_total(lane_g);
    sums[1] = lanes_total(lane_gx);
    for (; c < C; c++) {
        float xhat = (x[c] - m) * r, g = d[c] * weight[c];
        sums[0] += g;
        sums[1] += g * xhat;
    }
}

static void layernorm_row_dx(float *restrict dx, const float *restrict d, const float *restrict x,
                             const float *restrict weight, float m, float r, float mean_g,
                             float mean_gx, size_t C)
{
    EACH(c, C, dx[c] += r * (d[c] * weight[c] - mean_g - (x[c] - m) * r * mean_gx));
}

static void layernorm_row_dparams(float *restrict dweight, float *restrict dbias,
                                  const float *restrict d, const float *restrict x, float m,
                                  float r, size_t C)
{
    EACH(c, C, dweight[c] += d[c] * ((x[c] - m) * r); dbias[c] += d[c]);
}

/* With xhat = (x - mean) rstd and g = dout w:
 *   dx = rstd (g - mean(g) - xhat mean(g xhat)),  dw += dout xhat,  db += dout.
 * dinp, or dweight and dbias together, may be NULL: not required. */
void ck_kernel_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                           const float *inp, const float *weight, const float *mean,
                           const float *rstd, size_t N, size_t C)
{
    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * C, *d = dout + n * C;
        float m = mean[n], r = rstd[n], sums[2];
        layernorm_row_sums(sums, d, x, weight, m, r, C);
        if (dinp)
            layernorm_row_dx(dinp + n * C, d, x, weight, m, r, sums[0] / (float)C,
                             sums[1] / (float)C, C);
        if (dweight)
            layernorm_row_dparams(dweight, dbias, d, x, m, r, C);
    }
}

/* One row of C values: rstd = 1/sqrt(mean(x^2) + eps), out = x rstd w; returns rstd. */
static float rms_row_forward(float *restrict out, const float *restrict x,
                             const float *restrict weight, size_t C, double eps)
{
    double ss = sum_double(x, 0.0, true, C);
    float r = (float)(1.0 / sqrt(ss / (double)C + eps));
    EACH(c, C, out[c] = x[c] * r * weight[c]);
    return r;
}

/* With g = dout w, d rstd / dx_k = -rstd^3 x_k / C, so
 *   dx = rstd (g - x rstd^2 mean(g x)),  dw += dout x rstd. dx or dweight may be NULL. */
static void rms_row_dx(float *restrict dx, const float *restrict d, const float *restrict x,
                       const float *restrict weight, float r, float k, size_t C)
{
    EACH(c, C, dx[c] += r * (d[c] * weight[c] - x[c] * k));
}

static void rms_row_dweight(float *restrict dweight, const float *restrict d,
                            const float *restrict x, float r, size_t C)
{
    EACH(c, C, dweight[c] += d[c] * x[c] * r);
}

static void rms_row_backward(float *dx, float *dweight, const float *d, const float *x,
                             const float *weight, float r, size_t C)
{
    float lane[SUM_LANES] = {0}, sum_gx;
    size_t c = 0;
    for (; c + SUM_LANES <= C; c += SUM_LANES)
        for (size_t l = 0; l < SUM_LANES; l++)
            lane[l] += d[c + l] * weight[c + l] * x[c + l];
    sum_gx = lanes_total(lane);
    for (; c < C; c++)
        sum_gx += d[c] * weight[c] * x[c];
    float k = r * r * sum_gx / (float)C;
    if (dx)
        rms_row_dx(dx, d, x, weight, r, k, C);
    if (dweight)
        rms_row_dweight(dweight, d, x, r, C);
}

void ck_kernel_rmsnorm_forward(float *out, float *rstd, float *normed, const float *inp,
                               const float *weight, size_t N, size_t C, double eps)
{
    for (size_t n = 0; n < N; n++) {
        rstd[n] = rms_row_forward(out + n * C, inp + n * C, weight, C, eps);
        for (size_t c = 0; normed && c < C; c++)
            normed[n * C + c] = inp[n * C + c] * rstd[n];
    }
}

void ck_kernel_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                         const float *weight, const float *rstd, size_t N, size_t C)
{
    for (size_t n = 0; n < N; n++)
        rms_row_backward(dinp ? dinp + n * C : NULL, dweight, dout + n * C, inp + n * C, weight, rstd[n], C);
}

/* Row n, head h < H + KV: rstd[n, h] and out = rmsnorm(x, q_gamma or k_gamma); v copied.
 * With heads (written out), the q and k heads are copied there too, [N, (H + KV) D]: what
 * the backward reads instead of inp. */
void ck_kernel_qknorm_forward(float *out, float *rstd, float *normed, float *heads,
                              const float *inp, const float *q_gamma, const float *k_gamma,
                              size_t N, size_t H, size_t KV, size_t D, double eps)
{
    size_t W = (H + 2 * KV) * D;
    for (size_t n = 0; n < N; n++) {
        for (size_t h = 0; h < H + KV; h++) {
            const float *x = inp + n * W + h * D;
            float r = rms_row_forward(out + n * W + h * D, x, h < H ? q_gamma : k_gamma, D, eps);
            rstd[n * (H + KV) + h] = r;
            for (size_t j = 0; normed && j < D; j++)
                normed[(n * (H + KV) + h) * D + j] = x[j] * r;
        }
        if (heads)
            memcpy(heads + n * (H + KV) * D, inp + n * W, (H + KV) * D * sizeof *heads);
        memcpy(out + n * W + (H + KV) * D, inp + n * W + (H + KV) * D, KV * D * sizeof *out);
    }
}

/* Each q and k head as rmsnorm's backward, with its own gamma's gradient; dv += dout. x is
 * the forward's input, or (heads) its q and k heads alone. */
void ck_kernel_qknorm_backward(float *dinp, float *dq_gamma, float *dk_gamma, const float *dout,
                               const float *x, bool heads, const float *q_gamma,
                               const float *k_gamma, const float *rstd, size_t N, size_t H,
                               size_t KV, size_t D)
{
    size_t W = (H + 2 * KV) * D, xw = heads ? (H + KV) * D : W;
    for (size_t n = 0; n < N; n++) {
        for (size_t h = 0; h < H + KV; h++) {
            size_t at = n * W + h * D;
            rms_row_backward(dinp ? dinp + at : NULL, h < H ? dq_gamma : dk_gamma, dout + at,
                             x + n * xw + h * D, h < H ? q_gamma : k_gamma,
                             rstd[n * (H + KV) + h], D);
        }
        if (dinp)
            add_into(dinp + n * W + (H + KV) * D, dout + n * W + (H + KV) * D, KV * D);
    }
}

/* ---- element-wise ---- */

#define GELU_S 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

/* With u = s (x + a x^3) and e = exp(-2|u|): tanh(u) = sign(u) (1 - e) / (1 + e), and
 * 1 - tanh(u)^2 = 4e / (1 + e)^2 (exact in e, where 1 - t^2 from a rounded t near 1 is
 * not). Returns 1 + tanh(u) and sets *sech2 = 1 - tanh(u)^2 when sech2 is not NULL. */
static inline float gelu_one_plus_tanh(float x, float *sech2)
{
    float u = GELU_S * (x + GELU_A * x * x * x);
    float e = exp_vec(-2.0f * fabsf(u)), q = 1.0f / (1.0f + e);
    if (sech2)
        *sech2 = 4.0f * e * q * q;
    return 1.0f + copysignf((1.0f - e) * q, u);
}

/* gelu(x) = x/2 (1 + tanh(s (x + a x^3))). */
static inline float gelu_tanh(float x)
{
    return 0.5f * x * gelu_one_plus_tanh(x, NULL);
}

/* gelu'(x) = (1 + t)/2 + x/2 (1 - t^2) s (1 + 3 a x^2), t = tanh(s (x + a x^3)). */
static inline float gelu_tanh_grad(float x)
{
    float sech2, one_plus_t = gelu_one_plus_tanh(x, &sech2);
    return 0.5f * one_plus_t + 0.5f * x * sech2 * GELU_S * (1.0f + 3.0f * GELU_A * x * x);
}

void ck_kernel_gelu_forward(float *restrict out, const float *restrict inp, size_t n)
{
    EACH(i, n, out[i] = gelu_tanh(inp[i]));
}

void ck_kernel_gelu_backward(float *restrict dinp, const float *restrict inp,
                             const float *restrict dout, size_t n)
{
    EACH(i, n, dinp[i] += gelu_tanh_grad(inp[i]) * dout[i]);
}

/* out = gelu(gate) up. */
void ck_kernel_geglu_forward(float *restrict out, const float *restrict gate,
                             const float *restrict up, size_t n)
{
    EACH(i, n, out[i] = gelu_tanh(gate[i]) * up[i]);
}

static void geglu_dgate(float *restrict dgate, const float *restrict dout,
                        const float *restrict gate, const float *restrict up, size_t n)
{
    EACH(i, n, dgate[i] += dout[i] * up[i] * gelu_tanh_grad(gate[i]));
}

static void geglu_dup(float *restrict dup, const float *restrict dout, const float *restrict gate,
                      size_t n)
{
    EACH(i, n, dup[i] += dout[i] * gelu_tanh(gate[i]));
}

/* dgate += dout up gelu'(gate), then dup += dout gelu(gate): one pass each, so that they
 * may be one buffer. */
void ck_kernel_geglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                              const float *up, size_t n)
{
    geglu_dgate(dgate, dout, gate, up, n);
    geglu_dup(dup, dout, gate, n);
}

/* relu(x) = max(x, 0). */
void ck_kernel_relu_forward(float *restrict out, const float *restrict inp, size_t n)
{
    EACH(i, n, out[i] = pick(inp[i] > 0.0f, inp[i], 0.0f));
}

/* relu'(x) = [out > 0]: the output alone decides, which is why relu saves it. */
void ck_kernel_relu_backward(float *restrict dinp, const float *restrict out,
                             const float *restrict dout, size_t n)
{
    EACH(i, n, dinp[i] = pick(out[i] > 0.0f, dinp[i] + dout[i], dinp[i]));
}

/* silu(x) = x sigmoid(x). */
void ck_kernel_silu_forward(float *restrict out, const float *restrict inp, size_t n)
{
    EACH(i, n, out[i] = inp[i] / (1.0f + exp_vec(-inp[i])));
}

/* silu'(x) = sig(x) (1 + x (1 - sig(x))). */
/* silu'(x) from sig = sigmoid(x). */
static inline float silu_grad_of(float x, float sig)
{
    return sig * (1.0f + x * (1.0f - sig));
}

static inline float silu_grad(float x)
{
    return silu_grad_of(x, sigmoid_vec(x));
}

void ck_kernel_silu_backward(float *restrict dinp, const float *restrict inp,
                             const float *restrict dout, size_t n)
{
    EACH(i, n, dinp[i] += dout[i] * silu_grad(inp[i]));
}

/* out = cap tanh(x / cap). */
void ck_kernel_softcap_forward(float *out, const float *inp, float cap, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = cap * tanhf(inp[i] / cap);
}

/* d/dx cap tanh(x / cap) = 1 - tanh^2 = 1 - (out / cap)^2: the output alone decides. */
void ck_kernel_softcap_backward(float *dinp, const float *out, const float *dout, float cap,
                                size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float t = out[i] / cap;
        dinp[i] += dout[i] * (1.0f - t * t);
    }
}

/* out = factor x. */
void ck_kernel_scale_forward(float *restrict out, const float *restrict inp, float factor, size_t n)
{
    EACH(i, n, out[i] = factor * inp[i]);
}

/* dx += factor dout. */
void ck_kernel_scale_backward(float *restrict dinp, const float *restrict dout, float factor,
                              size_t n)
{
    add_scaled_into(dinp, dout, factor, n);
}

/* out = a + b. */
void ck_kernel_add_forward(float *restrict out, const float *restrict a, const float *restrict b,
                           size_t n)
{
    EACH(i, n, out[i] = a[i] + b[i]);
}

/* da += dout, db += dout (da == db when a node adds a tensor to itself; either may be NULL,
 * not required). */
void ck_kernel_add_backward(float *da, float *db, const float *dout, size_t n)
{
    if (da)
        add_into(da, dout, n);
    if (db)
        add_into(db, dout, n);
}

/* out = a b. */
void ck_kernel_mul_forward(float *restrict out, const float *restrict a, const float *restrict b,
                           size_t n)
{
    EACH(i, n, out[i] = a[i] * b[i]);
}

/* d += dout x. */
static void add_product_into(float *restrict d, const float *restrict dout,
                             const float *restrict x, size_t n)
{
    EACH(i, n, d[i] += dout[i] * x[i]);
}

/* da += dout b, db += dout a. Either gradient may be NULL (not required); then the other
 * input is not read (the op keeps it only for that gradient). */
void ck_kernel_mul_backward(float *da, float *db, const float *dout, const float *a, const float *b,
                     size_t n)
{
    if (da)
        add_product_into(da, dout, b, n);
    if (db)
        add_product_into(db, dout, a, n);
}

/* ---- dropout ---- */

/* out = x keep / (1 - p), so the expected output equals x and evaluation needs no
 * rescaling. */
void ck_kernel_dropout_forward(float *out, uint8_t *mask, const float *inp, float p, ck_rng_key key,
                        size_t n)
{
    ck_rng_keep_run(key, 0, n, p, mask);
    memcpy(out, inp, n * sizeof *out);
    keep_in_place(out, mask, 1.0f / (1.0f - p), n);
}

/* dx += dout keep / (1 - p). */
void ck_kernel_dropout_backward(float *restrict dinp, const float *restrict dout,
                                const uint8_t *restrict mask, float p, size_t n)
{
    float scale = 1.0f / (1.0f - p);
    EACH(i, n, dinp[i] = pick(mask[i], dinp[i] + dout[i] * scale, dinp[i]));
}

/* ---- attention ---- */

/* Where head h's q, k and v start in the packed rows of batch b, with row stride w. */
typedef struct {
    size_t w, q, k, v;
} head_cols;

static head_cols cols_of(size_t h, size_t H, size_t KV, size_t D)
{
    size_t g = h / (H / KV); /* grouped-query: H/KV query heads share one kv head */
    return (head_cols){(H + 2 * KV) * D, h * D, (H + g) * D, (H + KV + g) * D};
}

/* Soft-capping of one head's causal scores S [T, T], in place: C = tanh(S / cap) into
 * capped (0 above the diagonal), S = cap C. */
static void soft_cap_scores(float *S, float *capped, size_t T, float cap)
{
    for (size_t i = 0; i < T; i++)
        for (size_t j = 0; j < T; j++) {
            float c = j <= i ? tanhf(S[i * T + j] / cap) : 0.0f;
            capped[i * T + j] = c;
            S[i * T + j] = cap * c;
        }
}

/* Per (b, h): S = Q K^T / sqrt(D) (sgemm, full square; the masked half is ignored), with
 * softcap S = cap tanh(S / cap) (its tanh saved in capped),
 * P = softmax over j <= i with the row max subtracted, Z = P keep / (1 - p) with keep drawn
 * for element ((b H + h) T + i) T + j, out_h = Z V (sgemm). Above the diagonal probs,
 * dropped and mask are 0, so the full-square products see zeros there. */
void ck_kernel_attention_forward(float *out, float *probs, uint8_t *mask, float *dropped,
                                 float *capped, const float *qkv, float *ws, size_t B, size_t T,
                                 size_t H, size_t KV, size_t D, float p, float cap,
                                 ck_rng_key key)
{
    float scale = 1.0f / sqrtf((float)D), keep_scale = 1.0f / (1.0f - p);
    size_t HD = H * D;
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            head_cols hc = cols_of(h, H, KV, D);
            const float *base = qkv + b * T * hc.w;
            size_t bh = (b * H + h) * T * T;
            float *S = ws + bh, *P = probs + bh;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bdim(T), bdim(T), bdim(D),
                        scale, base + hc.q, bdim(hc.w), base + hc.k, bdim(hc.w), 0.0f, S,
                        bdim(T));
            if (cap > 0.0f)
                soft_cap_scores(S, capped + bh, T, cap);
            for (size_t i = 0; i < T; i++) {
                const float *s = S + i * T;
                float *pr = P + i * T;
                float sum = exp_shifted(pr, s, max_vec(s, i + 1), i + 1);
                scale_in_place(pr, 1.0f / sum, i + 1);
                memset(pr + i + 1, 0, (T - i - 1) * sizeof *pr);
                if (p > 0.0f) {
                    uint8_t *m = mask + bh + i * T;
                    float *z = dropped + bh + i * T;
                    ck_rng_keep_run(key, bh + i * T, i + 1, p, m);
                    memcpy(z, pr, T * sizeof *z); /* zeros after the diagonal included */
                    keep_in_place(z, m, keep_scale, i + 1);
                    memset(m + i + 1, 0, T - i - 1);
                }
            }
            const float *Z = p > 0.0f ? dropped + bh : P;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bdim(T), bdim(D), bdim(T),
                        1.0f, Z, bdim(T), base + hc.v, bdim(hc.w), 0.0f,
                        out + b * T * HD + h * D, bdim(HD));
        }
}

/* ds = p (ds - r) scale: the softmax's backward, r = sum p ds. */
static void softmax_grad_row(float *restrict ds, const float *restrict pr, float r, float scale,
                             size_t n)
{
    EACH(j, n, ds[j] = pr[j] * (ds[j] - r) * scale);
}

/* Per (b, h), with s = 1/sqrt(D):
 *   dZ = dO V^T,  dV += Z^T dO,  dP = dZ keep / (1 - p),
 *   dS = P (dP - rowsum(P dP)) s   (softmax backward, the scale folded in; with softcap
 *        times 1 - C^2, the derivative of cap tanh(S / cap)),
 *   dQ += dS K,  dK += dS^T Q.
 * dZ lives in the workspace and is turned into dS in place. */
void ck_kernel_attention_backward(float *dqkv, const float *dout, const float *qkv,
                                  const float *probs, const uint8_t *mask, const float *dropped,
                                  const float *capped, float *ws, size_t B, size_t T, size_t H,
                                  size_t KV, size_t D, float p, float cap, ck_rng_key key)
{
    (void)key; /* the mask was saved by the forward */
    float scale = 1.0f / sqrtf((float)D), keep_scale = 1.0f / (1.0f - p);
    size_t HD = H * D;
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            head_cols hc = cols_of(h, H, KV, D);
            const float *base = qkv + b * T * hc.w;
            float *dbase = dqkv + b * T * hc.w;
            const float *dO = dout + b * T * HD + h * D;
            size_t bh = (b * H + h) * T * T;
            const float *P = probs + bh, *Z = p > 0.0f ? dropped + bh : P;
            float *dS = ws + bh;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bdim(T), bdim(T), bdim(D), 1.0f,
                        dO, bdim(HD), base + hc.v, bdim(hc.w), 0.0f, dS, bdim(T));
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bdim(T), bdim(D), bdim(T), 1.0f,
                        Z, bdim(T), dO, bdim(HD), 1.0f, dbase + hc.v, bdim(hc.w));
            for (size_t i = 0; i < T; i++) {
                float *ds = dS + i * T;
                const float *pr = P + i * T;
                if (p > 0.0f)
                    keep_in_place(ds, mask + bh + i * T, keep_scale, i + 1);
                softmax_grad_row(ds, pr, dot_vec(pr, ds, i + 1), scale, i + 1);
                if (cap > 0.0f) {
                    const float *c = capped + bh + i * T;
                    for (size_t j = 0; j <= i; j++)
                        ds[j] *= 1.0f - c[j] * c[j];
                }
                for (size_t j = i + 1; j < T; j++)
                    ds[j] = 0.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bdim(T), bdim(D), bdim(T), 1.0f,
                        dS, bdim(T), base + hc.k, bdim(hc.w), 1.0f, dbase + hc.q, bdim(hc.w));
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bdim(T), bdim(D), bdim(T), 1.0f,
                        dS, bdim(T), base + hc.q, bdim(hc.w), 1.0f, dbase + hc.k, bdim(hc.w));
        }
}

/* Flash attention works on tiles of FLASH_TILE query rows by FLASH_TILE key rows of one
 * (b, h), their scores on the stack (16 KiB a tile, two in the backward), as a GPU kernel
 * keeps its tiles in on-chip memory: whatever T, the memory beyond the op table's figures
 * stays this fixed amount. On whole tiles the products are sgemm calls; row by row they were
 * matrix-vector products and rank-one updates, and sger alone took a seventh of a
 * llama-tiny step. */
#define FLASH_TILE 64

/* One (b, h): where its rows of q, k, v and of their gradients start (row stride w), where
 * its rows of out and dout do (o_at, stride ow; out is written forward, dout read
 * backward), and the dropout element of its score (i, j), first + i T + j, the standard
 * form's numbering. */
typedef struct {
    const float *q, *k, *v, *dout;
    float *dq, *dk, *dv, *out;
    size_t w, o_at, ow, T, D;
    uint64_t first;
    float scale, cap, p, keep_scale;
    ck_rng_key key;
} flash_head;

static flash_head flash_head_of(float *out, const float *dout, const float *qkv, float *dqkv,
                                size_t b, size_t h, size_t T, size_t H, size_t KV, size_t D,
                                float p, float cap, ck_rng_key key)
{
    head_cols hc = cols_of(h, H, KV, D);
    size_t at = b * T * hc.w, oat = b * T * H * D + h * D;
    flash_head f = {.q = qkv + at + hc.q, .k = qkv + at + hc.k, .v = qkv + at + hc.v,
                    .dout = dout ? dout + oat : NULL, .out = out ? out + oat : NULL, .w = hc.w,
                    .o_at = oat, .ow = H * D,
                    .T = T, .D = D, .first = (b * H + h) * T * T, .scale = 1.0f / sqrtf((float)D),
                    .cap = cap, .p = p, .keep_scale = 1.0f / (1.0f - p), .key = key};
    if (dqkv) {
        f.dq = dqkv + at + hc.q;
        f.dk = dqkv + at + hc.k;
        f.dv = dqkv + at + hc.v;
    }
    return f;
}

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* How many of the nk keys from k0 query row i sees (j <= i). */
static size_t flash_cols(size_t i, size_t k0, size_t nk)
{
    return i < k0 ? 0 : min_size(i - k0 + 1, nk);
}

/* S[r][c] = q_{q0+r} . k_{k0+c} / sqrt(D), with softcap cap tanh(S / cap); rows of
 * FLASH_TILE. */
static void flash_scores(float *S, const flash_head *f, size_t q0, size_t nq, size_t k0, size_t nk)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bdim(nq), bdim(nk), bdim(f->D), f->scale,
                f->q + q0 * f->w, bdim(f->w), f->k + k0 * f->w, bdim(f->w), 0.0f, S, FLASH_TILE);
    for (size_t r = 0; f->cap > 0.0f && r < nq; r++)
        for (size_t c = 0; c < nk; c++)
            S[r * FLASH_TILE + c] = f->cap * tanhf(S[r * FLASH_TILE + c] / f->cap);
}

/* keep[c] for row i's scores with keys k0 .. k0 + n - 1 (all 1 without dropout). */
static void flash_keep(uint8_t *keep, const flash_head *f, size_t i, size_t k0, size_t n)
{
    if (f->p > 0.0f)
        ck_rng_keep_run(f->key, f->first + i * f->T + k0, n, f->p, keep);
    else
        memset(keep, 1, n);
}

/* One key tile of the online softmax for query rows q0 .. q0 + nq - 1: with m the running
 * row max (mx) and l the running sum of e^(s - m) (sum), a tile of larger max m' scales l
 * and out_i by e^(m - m'), adds its own e^(s - m') to l and e^(s - m') keep / (1 - p) v
 * to out_i. */
static void flash_forward_keys(const flash_head *f, float *mx, float *sum, size_t q0, size_t nq,
                               size_t k0, size_t nk)
{
    float S[FLASH_TILE * FLASH_TILE];
    uint8_t keep[FLASH_TILE];
    flash_scores(S, f, q0, nq, k0, nk);
    for (size_t r = 0; r < nq; r++) {
        size_t i = q0 + r, n = flash_cols(i, k0, nk);
        float *s = S + r * FLASH_TILE;
        memset(s + n, 0, (nk - n) * sizeof *s);
        if (n == 0)
            continue;
        float tile_max = max_vec(s, n), m = tile_max > mx[i] ? tile_max : mx[i];
        float alpha = exp_vec(mx[i] - m); /* 0 on the first tile, where mx is -infinity */
        sum[i] = sum[i] * alpha + exp_shifted(s, s, m, n);
        mx[i] = m;
        if (f->p > 0.0f) {
            flash_keep(keep, f, i, k0, n);
            keep_in_place(s, keep, f->keep_scale, n);
        }
        scale_in_place(f->out + i * f->ow, alpha, f->D);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bdim(nq), bdim(f->D), bdim(nk), 1.0f, S,
                FLASH_TILE, f->v + k0 * f->w, bdim(f->w), 1.0f, f->out + q0 * f->ow, bdim(f->ow));
}

/* Per (b, h), query tile by query tile, key tiles up to the diagonal: the row max in the
 * workspace and the row sum in lse while the tiles go by, then out_i /= l_i and
 * lse_i = m_i + log l_i, so out_i = sum_j e^(s_j - lse_i) keep_j / (1 - p) v_j. The dropout
 * draws use the standard form's element numbering, so both forms drop the same
 * probabilities. */
void ck_kernel_attention_flash_forward(float *out, float *lse, const float *qkv, float *ws,
                                       size_t B, size_t T, size_t H, size_t KV, size_t D, float p,
                                       float cap, ck_rng_key key)
{
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            flash_head f = flash_head_of(out, NULL, qkv, NULL, b, h, T, H, KV, D, p, cap, key);
            float *sum = lse + (b * H + h) * T;
            for (size_t i = 0; i < T; i++) {
                ws[i] = -INFINITY;
                sum[i] = 0.0f;
                /* written, never read: beta = 1 on stale values could carry a NaN */
                memset(f.out + i * f.ow, 0, D * sizeof *out);
            }
            for (size_t q0 = 0; q0 < T; q0 += FLASH_TILE) {
                size_t nq = min_size(FLASH_TILE, T - q0);
                for (size_t k0 = 0; k0 < q0 + nq; k0 += FLASH_TILE)
                    flash_forward_keys(&f, ws, sum, q0, nq, k0, min_size(FLASH_TILE, q0 + nq - k0));
            }
            for (size_t i = 0; i < T; i++) {
                scale_in_place(f.out + i * f.ow, 1.0f / sum[i], D);
                sum[i] = ws[i] + logf(sum[i]);
            }
        }
}

/* One row of a backward tile, on the scores s (into Z) and dP = dout_i . v_j (into dS):
 *   P = e^(s - lse_i), dS = P (dP keep / (1 - p) - Delta_i) / sqrt(D) dcap, Z = P keep / (1 - p),
 * where dcap = 1 - (s / cap)^2 is the derivative of the softcap (inv_cap 0 without one). */
static void flash_grad_row(float *restrict z, float *restrict ds, const uint8_t *restrict keep,
                           float lse, float delta, float scale, float inv_cap, float keep_scale,
                           size_t n)
{
    EACH(c, n, float ks = pick(keep[c], keep_scale, 0.0f), t = z[c] * inv_cap;
         float pr = exp_vec(z[c] - lse);
         ds[c] = pr * (ds[c] * ks - delta) * scale * (1.0f - t * t); z[c] = pr * ks);
}

/* The query tile from q0 against the key tile from k0: P and dP recomputed, then
 *   dv_j += sum_i Z_ij dout_i, dq_i += sum_j dS_ij k_j, dk_j += sum_i dS_ij q_i. */
static void flash_backward_tile(const flash_head *f, const float *lse, const float *delta,
                                size_t q0, size_t nq, size_t k0, size_t nk)
{
    float Z[FLASH_TILE * FLASH_TILE], dS[FLASH_TILE * FLASH_TILE];
    uint8_t keep[FLASH_TILE];
    int w = bdim(f->w), D = bdim(f->D), ow = bdim(f->ow);
    flash_scores(Z, f, q0, nq, k0, nk);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bdim(nq), bdim(nk), D, 1.0f,
                f->dout + q0 * f->ow, ow, f->v + k0 * f->w, w, 0.0f, dS, FLASH_TILE);
    float inv_cap = f->cap > 0.0f ? 1.0f / f->cap : 0.0f;
    for (size_t r = 0; r < nq; r++) {
        size_t i = q0 + r, n = flash_cols(i, k0, nk);
        float *z = Z + r * FLASH_TILE, *ds = dS + r * FLASH_TILE;
        flash_keep(keep, f, i, k0, n);
        flash_grad_row(z, ds, keep, lse[i], delta[i], f->scale, inv_cap, f->keep_scale, n);
        memset(z + n, 0, (nk - n) * sizeof *z);
        memset(ds + n, 0, (nk - n) * sizeof *ds);
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bdim(nk), D, bdim(nq), 1.0f, Z,
                FLASH_TILE, f->dout + q0 * f->ow, ow, 1.0f, f->dv + k0 * f->w, w);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bdim(nq), D, bdim(nk), 1.0f, dS,
                FLASH_TILE, f->k + k0 * f->w, w, 1.0f, f->dq + q0 * f->w, w);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bdim(nk), D, bdim(nq), 1.0f, dS,
                FLASH_TILE, f->q + q0 * f->w, w, 1.0f, f->dk + k0 * f->w, w);
}

/* Per (b, h), Delta_i = dout_i . out_i (= sum_j P_ij dP_ij, since out_i = sum_j Z_ij v_j)
 * into the workspace, then tile by tile as above, P recomputed from q, k and lse and keep
 * redrawn. */
void ck_kernel_attention_flash_backward(float *dqkv, const float *dout, const float *qkv,
                                        const float *out, const float *lse, float *ws, size_t B,
                                        size_t T, size_t H, size_t KV, size_t D, float p,
                                        float cap, ck_rng_key key)
{
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            flash_head f = flash_head_of(NULL, dout, qkv, dqkv, b, h, T, H, KV, D, p, cap, key);
            for (size_t i = 0; i < T; i++)
                ws[i] = dot_vec(f.dout + i * f.ow, out + f.o_at + i * f.ow, D);
            for (size_t q0 = 0; q0 < T; q0 += FLASH_TILE) {
                size_t nq = min_size(FLASH_TILE, T - q0);
                for (size_t k0 = 0; k0 < q0 + nq; k0 += FLASH_TILE)
                    flash_backward_tile(&f, lse + (b * H + h) * T, ws, q0, nq, k0,
                                        min_size(FLASH_TILE, q0 + nq - k0));
            }
        }
}

/* ---- optimizer ---- */

ck_kernel_adam_step ck_kernel_adam_at(uint64_t t, float lr, float decay)
{
    return (ck_kernel_adam_step){lr, decay, 1.0f - powf(CK_KERNEL_ADAM_B1, (float)t),
                                 1.0f - powf(CK_KERNEL_ADAM_B2, (float)t)};
}

/* sqrtf vectorises too: the build does not set errno from math functions
 * (-fno-math-errno). */
void ck_kernel_adam(float *restrict p, const float *restrict g, float *restrict m,
                    float *restrict v, size_t n, const ck_kernel_adam_step *st)
{
    float lr = st->lr, decay = st->decay, c1 = st->c1, c2 = st->c2;
    const float b1 = CK_KERNEL_ADAM_B1, b2 = CK_KERNEL_ADAM_B2;
    EACH(j, n, float q = p[j] - decay * p[j];
         m[j] = b1 * m[j] + (1.0f - b1) * g[j];
         v[j] = b2 * v[j] + (1.0f - b2) * g[j] * g[j];
         p[j] = q - lr * (m[j] / c1) / (sqrtf(v[j] / c2) + CK_KERNEL_ADAM_EPS));
}

/* ---- losses ---- */

/* lse = m + log sum_v exp(x[v] - m) of one row of V logits, m the row max. */
static float row_lse(const float *x, size_t V)
{
    float mx = max_vec(x, V);
    return mx + logf(exp_shifted(NULL, x, mx, V));
}

/* d[v] += (exp(z[v] - shift) - [v == t]) / N for one row: the softmax's gradient of a
 * mean cross-entropy, from the logits (shift the log-sum-exp) or the log-probabilities
 * (shift 0). */
static void add_row_gradient(float *restrict d, const float *restrict z, float shift, size_t V,
                             size_t t, float invN)
{
    EACH(v, V, d[v] += exp_vec(z[v] - shift) * invN);
    d[t] -= invN;
}

/* loss_n = lse_n - logits[n, target_n], lse_n = m + log sum_v exp(logits[n,v] - m) with m
 * the row max; dlogits[n,v] += (exp(logits[n,v] - lse_n) - [v == target_n]) / N. Targets
 * must lie in [0, V) (validated by the caller with the data). Writes lse [N], or (PyTorch's
 * unfused form: log_softmax kept whole, then nll_loss, whose gradient through log_softmax's
 * backward is the same) logp = logits - lse [N, V]: one of the two is NULL. */
float ck_kernel_cross_entropy_forward(float *lse, float *logp, const float *logits,
                                     const int32_t *targets, size_t N, size_t V)
{
    if (N == 0)
        return 0.0f;
    double total = 0.0;
    for (size_t n = 0; n < N; n++) {
        const float *x = logits + n * V;
        float l = row_lse(x, V);
        size_t t = (size_t)targets[n];
        if (logp) {
            float *lp = logp + n * V;
            for (size_t v = 0; v < V; v++)
                lp[v] = x[v] - l;
            total -= lp[t];
        } else {
            lse[n] = l;
            total += (double)l - x[t];
        }
    }
    return (float)(total / (double)N);
}

void ck_kernel_cross_entropy_backward(float *dlogits, const float *lse, const float *logp,
                                      const float *logits, const int32_t *targets, size_t N, size_t V)
{
    float invN = N ? 1.0f / (float)N : 0.0f;
    for (size_t n = 0; n < N; n++) {
        size_t t = (size_t)targets[n];
        if (logp)
            add_row_gradient(dlogits + n * V, logp + n * V, 0.0f, V, t, invN);
        else
            add_row_gradient(dlogits + n * V, logits + n * V, lse[n], V, t, invN);
    }
}

float ck_kernel_mse_forward(const float *pred, const float *target, size_t n)
{
    if (n == 0)
        return 0.0f;
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        float e = pred[i] - target[i];
        total += (double)e * e;
    }
    return (float)(total / (double)n);
}

void ck_kernel_mse_backward(float *dpred, const float *pred, const float *target, size_t n)
{
    float k = n ? 2.0f / (float)n : 0.0f;
    for (size_t i = 0; i < n; i++)
        dpred[i] += k * (pred[i] - target[i]);
}

/* ---- swiglu ---- */

void ck_kernel_swiglu_forward(float *restrict out, const float *restrict gate,
                              const float *restrict up, size_t n)
{
    EACH(i, n, out[i] = gate[i] / (1.0f + exp_vec(-gate[i])) * up[i]);
}

static void swiglu_dgate(float *restrict dgate, const float *restrict dout,
                         const float *restrict gate, const float *restrict up, size_t n)
{
    EACH(i, n, dgate[i] += dout[i] * up[i] * silu_grad(gate[i]));
}

static void swiglu_dup(float *restrict dup, const float *restrict dout, const float *restrict gate,
                       size_t n)
{
    EACH(i, n, dup[i] += dout[i] * gate[i] * sigmoid_vec(gate[i]));
}

/* Both gradients in one pass, one sigmoid each element. */
static void swiglu_grads(float *restrict dgate, float *restrict dup, const float *restrict dout,
                         const float *restrict gate, const float *restrict up, size_t n)
{
    EACH(i, n, float g = gate[i], sig = sigmoid_vec(g);
         dgate[i] += dout[i] * up[i] * silu_grad_of(g, sig); dup[i] += dout[i] * g * sig);
}

/* One pass for both gradients where they are distinct buffers; one each where they are one
 * (a node reading one tensor twice) or one is not required. */
void ck_kernel_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                               const float *up, size_t n)
{
    if (dgate && dup && dgate != dup) {
        swiglu_grads(dgate, dup, dout, gate, up, n);
        return;
    }
    if (dgate) /* up is read only for gate's gradient: without it, it may not be kept */
        swiglu_dgate(dgate, dout, gate, up, n);
    if (dup)
        swiglu_dup(dup, dout, gate, n);
}

/* ---- gated units and gelu written out (the hf profile) ---- */

static void silu_into(float *restrict act, const float *restrict gate, size_t n)
{
    EACH(i, n, act[i] = gate[i] / (1.0f + exp_vec(-gate[i])));
}

static void gelu_into(float *restrict act, const float *restrict gate, size_t n)
{
    EACH(i, n, act[i] = gelu_tanh(gate[i]));
}

void ck_kernel_glu_written_forward(float *out, float *act, const float *gate, const float *up,
                                   bool gelu, size_t n)
{
    if (gelu)
        gelu_into(act, gate, n);
    else
        silu_into(act, gate, n);
    ck_kernel_mul_forward(out, act, up, n);
}

void ck_kernel_glu_written_backward(float *dgate, float *dup, const float *dout,
                                    const float *gate, const float *up, const float *act,
                                    bool gelu, size_t n)
{
    if (dup)
        add_product_into(dup, dout, act, n);
    if (dgate && gelu)
        geglu_dgate(dgate, dout, gate, up, n);
    else if (dgate)
        swiglu_dgate(dgate, dout, gate, up, n);
}

static void gelu_written(float *restrict out, float *restrict half, float *restrict tanh_out,
                         float *restrict sum, const float *restrict inp, size_t n)
{
    EACH(i, n, float s = gelu_one_plus_tanh(inp[i], NULL); half[i] = 0.5f * inp[i];
         tanh_out[i] = s - 1.0f; sum[i] = s; out[i] = half[i] * s);
}

void ck_kernel_gelu_written_forward(float *out, float *half, float *tanh_out, float *sum,
                                    const float *inp, size_t n)
{
    gelu_written(out, half, tanh_out, sum, inp, n);
}

/* g = dout half (1 - t^2) into gu: the tanh's input's gradient, the transient that autograd
 * holds beside its other branch's. */
static void gelu_written_gu(float *restrict gu, const float *restrict dout,
                            const float *restrict half, const float *restrict t, size_t n)
{
    EACH(i, n, gu[i] = dout[i] * half[i] * (1.0f - t[i] * t[i]));
}

/* dinp += dout sum / 2 (through x / 2) + gu s (1 + 3 a x^2) (through the tanh). */
static void gelu_written_dx(float *restrict dinp, const float *restrict dout,
                            const float *restrict sum, const float *restrict gu,
                            const float *restrict x, size_t n)
{
    EACH(i, n, dinp[i] += dout[i] * sum[i] * 0.5f +
                          gu[i] * GELU_S * (1.0f + 3.0f * GELU_A * x[i] * x[i]));
}

void ck_kernel_gelu_written_backward(float *dinp, float *gu, const float *dout, const float *inp,
                                     const float *half, const float *tanh_out, const float *sum,
                                     size_t n)
{
    gelu_written_gu(gu, dout, half, tanh_out, n);
    gelu_written_dx(dinp, dout, sum, gu, inp, n);
}

/* ---- cast ---- */

/* bf16 is the top half of an f32: round the bottom half away, to even on a tie. */
uint16_t ck_kernel_f32_to_bf16(float x)
{
    uint32_t b = bits_of(x);
    if ((b & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((b >> 16) | 0x40u);
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

float ck_kernel_bf16_to_f32(uint16_t h)
{
    return float_of((uint32_t)h << 16);
}

/* Below 2^-14, f16 holds multiples of 2^-24: round the 24-bit significand, shifted down to
 * that grid. */
static uint16_t f16_subnormal(uint32_t sign, uint32_t abs)
{
    if (abs <= 0x33000000u) /* at most 2^-25, half the smallest subnormal: to (signed) zero */
        return (uint16_t)sign;
    uint32_t shift = 126 - (abs >> 23), m = (abs & 0x7fffffu) | 0x800000u;
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u)))
        r++; /* 0x400 is the smallest normal, rightly encoded */
    return (uint16_t)(sign | r);
}

uint16_t ck_kernel_f32_to_f16(float x)
{
    uint32_t b = bits_of(x), sign = (b >> 16) & 0x8000u, abs = b & 0x7fffffffu;
    if (abs > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (abs >= 0x47800000u) /* 2^16 and up, infinity included */
        return (uint16_t)(sign | 0x7c00u);
    if (abs < 0x38800000u)
        return f16_subnormal(sign, abs);
    /* Rebias the exponent (127 to 15), keep 10 of 23 significand bits, round the other 13;
     * a carry moves into the exponent, up to infinity past 65504. */
    uint32_t r = (abs >> 13) - ((127u - 15u) << 10), rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
        r++;
    return (uint16_t)(sign | r);
}

float ck_kernel_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return float_of(sign | 0x7f800000u | (m << 13));
    if (e)
        return float_of(sign | ((e + 112) << 23) | (m << 13));
    if (!m)
        return float_of(sign);
    for (e = 113; !(m & 0x400u); e--) /* a subnormal, normalised */
        m <<= 1;
    return float_of(sign | (e << 23) | ((m & 0x3ffu) << 13));
}

float ck_kernel_load(ck_dtype d, const void *p, size_t i)
{
    switch (d) {
    case CK_BF16:
        return ck_kernel_bf16_to_f32(((const uint16_t *)p)[i]);
    case CK_F16:
        return ck_kernel_f16_to_f32(((const uint16_t *)p)[i]);
    case CK_F32:
    case CK_I32:
    case CK_U8:
    case CK_I64: /* casts are between floats: the loader refuses the rest */
        break;
    }
    return ((const float *)p)[i];
}

void ck_kernel_store(ck_dtype d, void *p, size_t i, float x)
{
    switch (d) {
    case CK_BF16:
        ((uint16_t *)p)[i] = ck_kernel_f32_to_bf16(x);
        return;
    case CK_F16:
        ((uint16_t *)p)[i] = ck_kernel_f32_to_f16(x);
        return;
    case CK_F32:
    case CK_I32:
    case CK_U8:
    case CK_I64:
        break;
    }
    ((float *)p)[i] = x;
}

/* The conversions sim/widen makes on every pass, f32 to and from one 16-bit dtype, have
 * loops of their own: through ck_kernel_load and ck_kernel_store, a switch per element,
 * they took a third of a bf16 gpt2-tiny step. */
/* A loop per dtype, so that the conversion inlines (through a function pointer it did not,
 * and cost a third of the step again). */
static void to_f32(float *out, const uint16_t *in, size_t n, ck_dtype from)
{
    if (from == CK_BF16)
        for (size_t i = 0; i < n; i++)
            out[i] = ck_kernel_bf16_to_f32(in[i]);
    else
        for (size_t i = 0; i < n; i++)
            out[i] = ck_kernel_f16_to_f32(in[i]);
}

static void from_f32(uint16_t *out, const float *in, size_t n, ck_dtype to)
{
    if (to == CK_BF16)
        for (size_t i = 0; i < n; i++)
            out[i] = ck_kernel_f32_to_bf16(in[i]);
    else
        for (size_t i = 0; i < n; i++)
            out[i] = ck_kernel_f32_to_f16(in[i]);
}

static bool cast_fast(void *out, ck_dtype to, const void *inp, ck_dtype from, size_t n)
{
    if (to == from)
        memcpy(out, inp, n * ck_dtype_bytes(to));
    else if (to == CK_F32)
        to_f32(out, inp, n, from);
    else if (from == CK_F32)
        from_f32(out, inp, n, to);
    else
        return false;
    return true;
}

void ck_kernel_cast_forward(void *out, ck_dtype to, const void *inp, ck_dtype from, size_t n)
{
    if (cast_fast(out, to, inp, from, n))
        return;
    for (size_t i = 0; i < n; i++) /* between the two 16-bit dtypes */
        ck_kernel_store(to, out, i, ck_kernel_load(from, inp, i));
}

void ck_kernel_cast_backward(void *dinp, ck_dtype from, const void *dout, ck_dtype to, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_kernel_store(from, dinp, i, ck_kernel_load(from, dinp, i) + ck_kernel_load(to, dout, i));
}

/* ---- rope ---- */

/* dst = R(sign * a) src on the q and k heads, src on the v heads; `add` accumulates into dst
 * instead. The angles are computed in double, once per position and pair. */
static void rope_rotate(float *dst, const float *src, size_t B, size_t T, size_t H, size_t KV,
                        size_t D, double theta, double sign, bool add)
{
    size_t W = (H + 2 * KV) * D, rotated = (H + KV) * D;
    for (size_t t = 0; t < T; t++) /* positions outside: each angle once for the batch */
        for (size_t j = 0; j < D / 2; j++) {
            double a = (double)t * pow(theta, -2.0 * (double)j / (double)D);
            float c = (float)cos(a), sn = (float)(sign * sin(a));
            for (size_t b = 0; b < B; b++)
                for (size_t h = 0; h < H + KV; h++) {
                    size_t i = (b * T + t) * W + h * D + 2 * j;
                    float x0 = src[i], x1 = src[i + 1];
                    float y0 = x0 * c - x1 * sn, y1 = x0 * sn + x1 * c;
                    dst[i] = add ? dst[i] + y0 : y0;
                    dst[i + 1] = add ? dst[i + 1] + y1 : y1;
                }
        }
    for (size_t r = 0; r < B * T; r++)
        for (size_t i = r * W + rotated; i < (r + 1) * W; i++)
            dst[i] = add ? dst[i] + src[i] : src[i];
}

void ck_kernel_rope_forward(float *out, const float *inp, size_t B, size_t T, size_t H, size_t KV,
                            size_t D, double theta)
{
    rope_rotate(out, inp, B, T, H, KV, D, theta, 1.0, false);
}

void ck_kernel_rope_backward(float *dinp, const float *dout, size_t B, size_t T, size_t H,
                             size_t KV, size_t D, double theta)
{
    rope_rotate(dinp, dout, B, T, H, KV, D, theta, -1.0, true);
}

/* ---- lora ---- */

void ck_kernel_lora_forward(float *out, float *mid, const float *x, const float *y,
                            const float *A, const float *B, size_t N, size_t C, size_t OC,
                            size_t R, size_t n_parts, const size_t *width, float s)
{
    size_t MW = n_parts * R;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bdim(N), bdim(MW), bdim(C), 1.0f, x,
                bdim(C), A, bdim(C), 0.0f, mid, bdim(MW));
    memcpy(out, y, N * OC * sizeof *out);
    for (size_t p = 0, off = 0; p < n_parts; off += width[p++])
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bdim(N), bdim(width[p]), bdim(R), s,
                    mid + p * R, bdim(MW), B + off * R, bdim(R), 1.0f, out + off, bdim(OC));
}

void ck_kernel_lora_backward(float *dx, float *dy, float *dA, float *dB, float *dmid,
                             const float *dout, const float *x, const float *mid, const float *A,
                             const float *B, size_t N, size_t C, size_t OC, size_t R,
                             size_t n_parts, const size_t *width, float s)
{
    size_t MW = n_parts * R;
    for (size_t i = 0; dy && i < N * OC; i++)
        dy[i] += dout[i];
    for (size_t p = 0, off = 0; p < n_parts; off += width[p++]) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bdim(N), bdim(R), bdim(width[p]),
                    s, dout + off, bdim(OC), B + off * R, bdim(R), 0.0f, dmid + p * R, bdim(MW));
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bdim(width[p]), bdim(R), bdim(N), s,
                    dout + off, bdim(OC), mid + p * R, bdim(MW), 1.0f, dB + off * R, bdim(R));
    }
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bdim(N), bdim(C), bdim(MW), 1.0f,
                    dmid, bdim(MW), A, bdim(C), 1.0f, dx, bdim(C));
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bdim(MW), bdim(C), bdim(N), 1.0f, dmid,
                bdim(MW), x, bdim(C), 1.0f, dA, bdim(C));
}

/* ---- moe ---- */

/* p = softmax(logits) per row; the K largest p (ties to the lower expert, most probable
 * first), their sum and the routing weights p / sum. */
static void moe_route(const ck_kernel_moe_saved *s, float *weights, const float *logits,
                      size_t N, size_t E, size_t K)
{
    for (size_t n = 0; n < N; n++) {
        const float *l = logits + n * E;
        float *p = s->probs + n * E, mx = l[0], sum = 0.0f;
        for (size_t e = 1; e < E; e++)
            mx = l[e] > mx ? l[e] : mx;
        for (size_t e = 0; e < E; e++)
            sum += p[e] = expf(l[e] - mx);
        for (size_t e = 0; e < E; e++)
            p[e] /= sum;
        int64_t *idx = s->topk_index + n * K;
        float *v = s->topk_probs + n * K, total = 0.0f;
        for (size_t j = 0; j < K; j++) {
            size_t best = E;
            for (size_t e = 0; e < E; e++) {
                bool taken = false;
                for (size_t i = 0; i < j; i++)
                    taken = taken || idx[i] == (int64_t)e;
                if (!taken && (best == E || p[e] > p[best]))
                    best = e;
            }
            idx[j] = (int64_t)best;
            v[j] = p[best];
            total += v[j];
        }
        s->topk_sum[n] = total;
        for (size_t j = 0; j < K; j++)
            weights[n * K + j] = v[j] / total;
    }
}

/* The end of expert e's routed rows, which begin at r0 (rows are grouped by expert). */
static size_t moe_group_end(const ck_kernel_moe_saved *s, size_t r0, size_t R, size_t K, size_t e)
{
    size_t r = r0;
    while (r < R && s->topk_index[s->route_index[2 * r] * (int64_t)K + s->route_index[2 * r + 1]] ==
                        (int64_t)e)
        r++;
    return r;
}

/* Expert e on its m routed rows starting at r: gate, up, act, hidden, expert_out. */
static void moe_expert_forward(const ck_kernel_moe_saved *s, const ck_kernel_moe_weights *w,
                               size_t e, size_t r, size_t m, size_t C, size_t F)
{
    const float *x = s->expert_in + r * C;
    float *gate = s->gate + r * F, *up = s->up + r * F, *act = s->act + r * F;
    ck_kernel_linear_forward(gate, x, w->w1 + e * F * C, NULL, m, C, F);
    ck_kernel_linear_forward(up, x, w->w3 + e * F * C, NULL, m, C, F);
    ck_kernel_silu_forward(act, gate, m * F);
    ck_kernel_mul_forward(s->hidden + r * F, act, up, m * F);
    ck_kernel_linear_forward(s->expert_out + r * C, s->hidden + r * F, w->w2 + e * C * F, NULL, m,
                             F, C);
}

/* logits = x router^T; route; then expert by expert, as HF's loop: gather the rows the
 * one-hot mask [E, K, N] names, run the expert, weight its outputs and add them into out. */
void ck_kernel_moe_forward(float *out, const ck_kernel_moe_saved *s, const float *inp,
                           const ck_kernel_moe_weights *w, void *ws, size_t N, size_t C,
                           size_t E, size_t K, size_t F)
{
    int64_t *mask = ws;
    float *logits = (float *)(mask + E * K * N), *weights = logits + N * E;
    ck_kernel_linear_forward(logits, inp, w->router, NULL, N, C, E);
    moe_route(s, weights, logits, N, E, K);
    for (size_t e = 0; e < E; e++)
        for (size_t k = 0; k < K; k++)
            for (size_t n = 0; n < N; n++)
                mask[(e * K + k) * N + n] = s->topk_index[n * K + k] == (int64_t)e;
    memset(out, 0, N * C * sizeof *out);
    size_t r = 0;
    for (size_t e = 0; e < E; e++) {
        size_t r0 = r;
        for (size_t k = 0; k < K; k++)
            for (size_t n = 0; n < N; n++)
                if (mask[(e * K + k) * N + n]) {
                    s->route_index[2 * r] = (int64_t)n;
                    s->route_index[2 * r + 1] = (int64_t)k;
                    s->route_weight[r] = weights[n * K + k];
                    memcpy(s->expert_in + r * C, inp + n * C, C * sizeof *inp);
                    r++;
                }
        if (r > r0)
            moe_expert_forward(s, w, e, r0, r - r0, C, F);
        for (size_t i = r0; i < r; i++) {
            float *o = out + (size_t)s->route_index[2 * i] * C;
            for (size_t c = 0; c < C; c++) {
                float y = s->expert_out[i * C + c] * s->route_weight[i];
                if (s->weighted)
                    s->weighted[i * C + c] = y;
                o[c] += y;
            }
        }
    }
}

/* From dhidden (overwritten with dup = dhidden * act) to dgate = dhidden * up * silu'(gate),
 * silu'(g) = s (1 + g (1 - s)), s = sigmoid(g). */
static void moe_glu_backward(float *dgate, float *dhidden, const float *gate, const float *act,
                             const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = gate[i], sig = sigmoid_vec(g), dh = dhidden[i]; /* as silu's forward */
        dgate[i] = dh * up[i] * sig * (1.0f + g * (1.0f - sig));
        dhidden[i] = dh * act[i];
    }
}

/* p + off, or NULL for a gradient that is not required (a frozen moe). */
static float *moe_offset(float *p, size_t off)
{
    return p ? p + off : NULL;
}

/* Expert e's backward on its m routed rows from r; dweight[row's top-k slot] receives
 * dout[row] . expert_out, the gradient of the routing weight. */
static void moe_expert_backward(float *dinp, const ck_kernel_moe_weights *dw, float *dweight,
                                const float *dout, const ck_kernel_moe_saved *s,
                                const ck_kernel_moe_weights *w, float *ws, size_t e, size_t r,
                                size_t m, size_t N, size_t C, size_t K, size_t F)
{
    float *dy = ws, *dh = dy + N * C, *dg = dh + N * F;
    for (size_t i = 0; i < m; i++) {
        const int64_t *ri = s->route_index + 2 * (r + i);
        const float *g = dout + (size_t)ri[0] * C, *y = s->expert_out + (r + i) * C;
        float dot = 0.0f;
        for (size_t c = 0; c < C; c++) {
            dy[i * C + c] = s->route_weight[r + i] * g[c];
            dot += g[c] * y[c];
        }
        dweight[(size_t)ri[0] * K + (size_t)ri[1]] = dot;
    }
    memset(dh, 0, m * F * sizeof *dh);
    ck_kernel_linear_backward(dh, moe_offset(dw->w2, e * C * F), NULL, dy, s->hidden + r * F,
                              w->w2 + e * C * F, m, F, C);
    moe_glu_backward(dg, dh, s->gate + r * F, s->act + r * F, s->up + r * F, m * F);
    float *dx = dinp ? dy : NULL; /* dy is spent: it becomes the gathered rows' gradient */
    if (dx)
        memset(dx, 0, m * C * sizeof *dx);
    const float *x = s->expert_in + r * C;
    ck_kernel_linear_backward(dx, moe_offset(dw->w1, e * F * C), NULL, dg, x, w->w1 + e * F * C, m, C, F);
    ck_kernel_linear_backward(dx, moe_offset(dw->w3, e * F * C), NULL, dh, x, w->w3 + e * F * C, m, C, F);
    for (size_t i = 0; dx && i < m; i++) {
        float *d = dinp + (size_t)s->route_index[2 * (r + i)] * C;
        for (size_t c = 0; c < C; c++)
            d[c] += dx[i * C + c];
    }
}

/* The routing's backward, from the routing weights' gradient dweight [N, K] to the
 * logits' [N, E]: with w_k = v_k / S, dv_j = (dw_j - sum_k dw_k w_k) / S; dp is dv at the
 * chosen experts, 0 elsewhere; the softmax's dlogits = p (dp - sum p dp) is p dp, since
 * sum p dp = sum_j v_j dv_j = 0 (the weights do not change when every v_j scales). */
static void moe_routing_backward(float *dlogits, const float *dweight, const ck_kernel_moe_saved *s,
                                 size_t N, size_t E, size_t K)
{
    for (size_t n = 0; n < N; n++) {
        const float *p = s->probs + n * E, *v = s->topk_probs + n * K, *dwt = dweight + n * K;
        const int64_t *idx = s->topk_index + n * K;
        float S = s->topk_sum[n], dot = 0.0f, *dl = dlogits + n * E;
        for (size_t j = 0; j < K; j++)
            dot += dwt[j] * v[j] / S;
        for (size_t e = 0; e < E; e++)
            dl[e] = 0.0f;
        for (size_t j = 0; j < K; j++)
            dl[idx[j]] = p[idx[j]] * (dwt[j] - dot) / S;
    }
}

/* Expert by expert, then the routing and the router's product. */
void ck_kernel_moe_backward(float *dinp, const ck_kernel_moe_weights *dw, const float *dout,
                            const ck_kernel_moe_saved *s, const float *inp,
                            const ck_kernel_moe_weights *w, void *ws, size_t N, size_t C,
                            size_t E, size_t K, size_t F)
{
    float *expert_ws = ws, *dweight = expert_ws + N * C + 2 * N * F, *dlogits = dweight + N * K;
    size_t R = N * K;
    for (size_t e = 0, r0 = 0; e < E; e++) {
        size_t r1 = moe_group_end(s, r0, R, K, e);
        if (r1 > r0)
            moe_expert_backward(dinp, dw, dweight, dout, s, w, expert_ws, e, r0, r1 - r0, N, C,
                                K, F);
        r0 = r1;
    }
    moe_routing_backward(dlogits, dweight, s, N, E, K);
    ck_kernel_linear_backward(dinp, dw->router, NULL, dlogits, inp, w->router, N, C, E);
}

/* One grouped product's backward, expert by expert over its routed rows: dx [R, C] from
 * dy (rows ld apart) and the experts' weights w [E, OC, C]; their gradients into dw. */
static void moe_grouped_backward(float *dx, float *dw, const float *dy, size_t ld, const float *x,
                                 const float *w, const ck_kernel_moe_saved *s, size_t R,
                                 size_t K, size_t E, size_t C, size_t OC)
{
    for (size_t e = 0, r0 = 0; e < E; e++) {
        size_t r1 = moe_group_end(s, r0, R, K, e);
        if (r1 > r0)
            linear_backward_rows(dx + r0 * C, moe_offset(dw, e * OC * C), dy + r0 * ld, ld,
                                 x ? x + r0 * C : NULL, w + e * OC * C, r1 - r0, C, OC);
        r0 = r1;
    }
}

/* Phase `phase` of the grouped backward: the sums of ck_kernel_moe_backward in autograd's
 * order, through the gradients between the phases (d, by ck_moe_temp; zeroed when made). */
void ck_kernel_moe_backward_phase(size_t phase, float *dinp, const ck_kernel_moe_weights *dw,
                                  const float *dout, const ck_kernel_moe_saved *s,
                                  const float *inp, const ck_kernel_moe_weights *w,
                                  float *const *d, size_t N, size_t C, size_t E, size_t K, size_t F)
{
    size_t R = N * K;
    const int64_t *ri = s->route_index;
    switch ((ck_moe_phase)phase) {
    case CK_MOE_UNSORT: /* each routed row takes its row's gradient */
        for (size_t r = 0; r < R; r++)
            memcpy(d[CK_MOE_D_SORTED] + r * C, dout + (size_t)ri[2 * r] * C, C * sizeof *dout);
        break;
    case CK_MOE_WEIGHTING: /* y = out w: dout = dy w, dw = dy . out */
        for (size_t r = 0; r < R; r++) {
            const float *dy = d[CK_MOE_D_SORTED] + r * C, *out = s->expert_out + r * C;
            float dot = 0.0f;
            for (size_t c = 0; c < C; c++) {
                d[CK_MOE_D_OUT][r * C + c] = dy[c] * s->route_weight[r];
                dot += dy[c] * out[c];
            }
            d[CK_MOE_D_WEIGHT][r] = dot;
        }
        break;
    case CK_MOE_DOWN:
        moe_grouped_backward(d[CK_MOE_D_HIDDEN], dw->w2, d[CK_MOE_D_OUT], C, s->hidden, w->w2, s,
                             R, K, E, F, C);
        break;
    case CK_MOE_GLU: /* hidden = act up */
        ck_kernel_mul_backward(d[CK_MOE_D_ACT], d[CK_MOE_D_UP], d[CK_MOE_D_HIDDEN], s->act, s->up, R * F);
        break;
    case CK_MOE_SILU: /* act = silu(gate): silu'(g) = s (1 + g (1 - s)), s = sigmoid(g) */
        for (size_t i = 0; i < R * F; i++) {
            float g = s->gate[i], sig = sigmoid_vec(g);
            d[CK_MOE_D_GATE][i] = d[CK_MOE_D_ACT][i] * sig * (1.0f + g * (1.0f - sig));
        }
        break;
    case CK_MOE_CAT: /* gate and up, halves of one product's rows */
        for (size_t r = 0; r < R; r++) {
            memcpy(d[CK_MOE_D_GATE_UP] + 2 * r * F, d[CK_MOE_D_GATE] + r * F, F * sizeof(float));
            memcpy(d[CK_MOE_D_GATE_UP] + (2 * r + 1) * F, d[CK_MOE_D_UP] + r * F, F * sizeof(float));
        }
        break;
    case CK_MOE_UP:
        moe_grouped_backward(d[CK_MOE_D_IN], dw->w1, d[CK_MOE_D_GATE_UP], 2 * F, s->expert_in,
                             w->w1, s, R, K, E, C, F);
        moe_grouped_backward(d[CK_MOE_D_IN], dw->w3, d[CK_MOE_D_GATE_UP] + F, 2 * F, s->expert_in,
                             w->w3, s, R, K, E, C, F);
        break;
    case CK_MOE_SCATTER: /* back to each row's top-k slot */
        for (size_t r = 0; r < R; r++)
            d[CK_MOE_D_TOPK][(size_t)ri[2 * r] * K + (size_t)ri[2 * r + 1]] = d[CK_MOE_D_WEIGHT][r];
        break;
    case CK_MOE_GATHER:
        for (size_t r = 0; r < R; r++)
            EACH(c, C, dinp[(size_t)ri[2 * r] * C + c] += d[CK_MOE_D_IN][r * C + c]);
        break;
    case CK_MOE_ROUTING:
        moe_routing_backward(d[CK_MOE_D_LOGITS], d[CK_MOE_D_TOPK], s, N, E, K);
        break;
    case CK_MOE_ROUTER:
        ck_kernel_linear_backward(dinp, dw->router, NULL, d[CK_MOE_D_LOGITS], inp, w->router, N, C, E);
        break;
    case CK_MOE_N_PHASES:
        break;
    }
}

/* ---- dispatch ---- */

static const ck_ttype *type_of(const ck_kernel_io *io, size_t t)
{
    return &io->m->tensors[t].type;
}

static size_t numel_of(const ck_kernel_io *io, size_t t)
{
    uint64_t n = 0;
    ck_ttype_numel(type_of(io, t), &n); /* checked when the model was loaded */
    return (size_t)n;
}

static size_t last_dim_of(const ck_kernel_io *io, size_t t)
{
    const ck_ttype *ty = type_of(io, t);
    return (size_t)ty->dim[ty->rank - 1];
}

typedef struct {
    size_t B, T, H, KV, D;
} attn_dims;

/* Of a node reading packed q, k, v (attention, rope). */
static attn_dims attention_dims(const ck_kernel_io *io)
{
    const ck_node *n = io->node;
    const ck_ttype *q = type_of(io, n->inputs[0]);
    size_t H = (size_t)n->attrs.heads, KV = (size_t)n->attrs.kv_heads;
    return (attn_dims){(size_t)q->dim[0], (size_t)q->dim[1], H, KV,
                       last_dim_of(io, n->inputs[0]) / (H + 2 * KV)};
}

/* Sizes most kernels take: the output's elements, the first input's last dimension and
 * the rows of that input. */
typedef struct {
    size_t len, c, rows;
} flat_dims;

static flat_dims flat(const ck_kernel_io *io)
{
    const ck_node *n = io->node;
    flat_dims d = {numel_of(io, n->output), last_dim_of(io, n->inputs[0]), 0};
    d.rows = numel_of(io, n->inputs[0]) / d.c;
    return d;
}

/* A lora node's sizes: x's rows and width, y's width, and y's parts (q, k, v with heads). */
typedef struct {
    size_t N, C, OC, R, n_parts, width[3];
    float s;
} lora_dims;

static lora_dims lora_dims_of(const ck_kernel_io *io)
{
    const ck_node *n = io->node;
    const ck_attrs *a = &n->attrs;
    lora_dims d = {.C = last_dim_of(io, n->inputs[0]), .OC = last_dim_of(io, n->inputs[1]),
                   .R = (size_t)a->rank, .n_parts = 1, .s = (float)(a->alpha / (double)a->rank)};
    d.N = numel_of(io, n->inputs[0]) / d.C;
    d.width[0] = d.OC;
    if (a->heads) {
        size_t D = d.OC / (size_t)(a->heads + 2 * a->kv_heads);
        d.n_parts = 3;
        d.width[0] = (size_t)a->heads * D;
        d.width[1] = d.width[2] = (size_t)a->kv_heads * D;
    }
    return d;
}

/* repeat_kv's copies, packed as qkv with kv_heads = H: q as it is, head h's k and v those
 * of kv head h / (H / KV). The kernels then run on them as on multi-head attention, which
 * is what eager attention's products read and keep. */
static void expand_kv(float *out, const float *qkv, attn_dims d)
{
    size_t HD = d.H * d.D, w = (d.H + 2 * d.KV) * d.D;
    for (size_t r = 0; r < d.B * d.T; r++) {
        const float *row = qkv + r * w;
        float *o = out + r * 3 * HD;
        memcpy(o, row, HD * sizeof *o);
        for (size_t h = 0; h < d.H; h++) {
            head_cols c = cols_of(h, d.H, d.KV, d.D);
            memcpy(o + HD + h * d.D, row + c.k, d.D * sizeof *o);
            memcpy(o + 2 * HD + h * d.D, row + c.v, d.D * sizeof *o);
        }
    }
}

/* The copies' gradient added into qkv's: each kv head gets the sum of its H / KV heads',
 * as the backward of repeat_kv's expand sums them. */
static void fold_kv(float *dqkv, const float *dexp, attn_dims d)
{
    size_t HD = d.H * d.D, w = (d.H + 2 * d.KV) * d.D;
    for (size_t r = 0; r < d.B * d.T; r++) {
        float *row = dqkv + r * w;
        const float *e = dexp + r * 3 * HD;
        add_into(row, e, HD);
        for (size_t h = 0; h < d.H; h++) {
            head_cols c = cols_of(h, d.H, d.KV, d.D);
            add_into(row + c.k, e + HD + h * d.D, d.D);
            add_into(row + c.v, e + 2 * HD + h * d.D, d.D);
        }
    }
}

static void attention_forward(const ck_kernel_io *io, float prob)
{
    attn_dims d = attention_dims(io);
    float cap = (float)io->node->attrs.cap;
    const float *qkv = io->in[0];
    float *expanded = io->saved[CK_SLOT_QKV_EXPANDED];
    if (expanded) {
        expand_kv(expanded, qkv, d);
        qkv = expanded;
        d.KV = d.H;
    }
    if (io->node->attrs.flash)
        ck_kernel_attention_flash_forward(io->out, io->saved[CK_SLOT_LSE], qkv, io->ws, d.B,
                                          d.T, d.H, d.KV, d.D, prob, cap, io->key);
    else
        ck_kernel_attention_forward(io->out, io->saved[CK_SLOT_PROBS], io->saved[CK_SLOT_MASK],
                                    io->saved[CK_SLOT_DROPPED], io->saved[CK_SLOT_CAPPED],
                                    qkv, io->ws, d.B, d.T, d.H, d.KV, d.D, prob, cap,
                                    io->key);
}

typedef struct {
    size_t N, C, E, K, F;
} moe_dims;

static moe_dims moe_dims_of(const ck_kernel_io *io)
{
    const ck_attrs *a = &io->node->attrs;
    flat_dims d = flat(io);
    return (moe_dims){d.rows, d.c, (size_t)a->experts, (size_t)a->top_k, (size_t)a->hidden};
}

ck_kernel_moe_saved ck_kernel_moe_slots(void *const *v)
{
    return (ck_kernel_moe_saved){
        .probs = v[CK_SLOT_ROUTER_PROBS], .topk_index = v[CK_SLOT_TOPK_INDEX],
        .topk_probs = v[CK_SLOT_TOPK_PROBS], .topk_sum = v[CK_SLOT_TOPK_SUM],
        .route_index = v[CK_SLOT_ROUTE_INDEX], .route_weight = v[CK_SLOT_ROUTE_WEIGHT],
        .expert_in = v[CK_SLOT_EXPERT_IN], .gate = v[CK_SLOT_EXPERT_GATE],
        .act = v[CK_SLOT_EXPERT_ACT], .up = v[CK_SLOT_EXPERT_UP],
        .hidden = v[CK_SLOT_EXPERT_HIDDEN], .expert_out = v[CK_SLOT_EXPERT_OUT],
        .weighted = v[CK_SLOT_EXPERT_WEIGHTED]};
}

/* The op's parameters (or their gradients) in its order: router, w1, w3, w2. */
static ck_kernel_moe_weights moe_weights(float *const *p)
{
    return (ck_kernel_moe_weights){p[0], p[1], p[2], p[3]};
}

static void moe_pass(const ck_kernel_io *io, bool backward)
{
    moe_dims d = moe_dims_of(io);
    ck_kernel_moe_saved s = ck_kernel_moe_slots(io->saved);
    ck_kernel_moe_weights w = moe_weights(io->param);
    if (backward && io->node->info.n_phases) {
        ck_kernel_moe_weights dw = moe_weights(io->dparam);
        ck_kernel_moe_backward_phase(io->phase, io->din[0], &dw, io->dout, &s, io->in[0], &w,
                                     io->temp, d.N, d.C, d.E, d.K, d.F);
    } else if (backward) {
        ck_kernel_moe_weights dw = moe_weights(io->dparam);
        ck_kernel_moe_backward(io->din[0], &dw, io->dout, &s, io->in[0], &w, io->ws, d.N, d.C,
                               d.E, d.K, d.F);
    } else {
        ck_kernel_moe_forward(io->out, &s, io->in[0], &w, io->ws, d.N, d.C, d.E, d.K, d.F);
    }
}

static void glu_forward(const ck_kernel_io *io, size_t n)
{
    bool gelu = io->node->op->kind == CK_OP_GEGLU;
    if (!io->node->attrs.fused)
        ck_kernel_glu_written_forward(io->out, io->saved[CK_SLOT_GLU_ACT], io->in[0], io->in[1],
                                      gelu, n);
    else if (gelu)
        ck_kernel_geglu_forward(io->out, io->in[0], io->in[1], n);
    else
        ck_kernel_swiglu_forward(io->out, io->in[0], io->in[1], n);
}

static void glu_backward(const ck_kernel_io *io, size_t n)
{
    bool gelu = io->node->op->kind == CK_OP_GEGLU;
    if (!io->node->attrs.fused)
        ck_kernel_glu_written_backward(io->din[0], io->din[1], io->dout, io->in[0], io->in[1],
                                       io->saved[CK_SLOT_GLU_ACT], gelu, n);
    else if (gelu)
        ck_kernel_geglu_backward(io->din[0], io->din[1], io->dout, io->in[0], io->in[1], n);
    else
        ck_kernel_swiglu_backward(io->din[0], io->din[1], io->dout, io->in[0], io->in[1], n);
}

void ck_kernel_forward(const ck_kernel_io *io)
{
    const ck_node *n = io->node;
    flat_dims d = flat(io);
    float *out = io->out, *const *p = io->param;
    const float *a = io->in[0], *b = io->in[1];
    float prob = (float)n->attrs.p;
    switch (n->op->kind) {
    case CK_OP_EMBEDDING: /* c: tokens per sequence; rows: sequences */
        ck_kernel_embedding_forward(out, io->in[0], p[0], p[1], d.rows, d.c,
                                    (size_t)n->attrs.dim);
        break;
    case CK_OP_LINEAR:
        ck_kernel_linear_forward(out, a, p[0], p[1], d.rows, d.c, (size_t)n->attrs.out);
        break;
    case CK_OP_LAYERNORM:
        ck_kernel_layernorm_forward(out, io->saved[CK_SLOT_MEAN], io->saved[CK_SLOT_RSTD], a,
                                    p[0], p[1], d.rows, d.c, n->attrs.eps);
        break;
    case CK_OP_RMSNORM:
        if (io->saved[CK_SLOT_X_F32]) /* x as the f32 view holds it: the upcast, exactly */
            memcpy(io->saved[CK_SLOT_X_F32], a, d.rows * d.c * sizeof *a);
        ck_kernel_rmsnorm_forward(out, io->saved[CK_SLOT_RSTD], io->saved[CK_SLOT_NORMED], a, p[0],
                                  d.rows, d.c, n->attrs.eps);
        break;
    case CK_OP_GELU:
        if (n->attrs.fused)
            ck_kernel_gelu_forward(out, a, d.len);
        else
            ck_kernel_gelu_written_forward(out, io->saved[CK_SLOT_GELU_HALF],
                                           io->saved[CK_SLOT_GELU_TANH],
                                           io->saved[CK_SLOT_GELU_SUM], a, d.len);
        break;
    case CK_OP_RELU:
        ck_kernel_relu_forward(out, a, d.len);
        break;
    case CK_OP_SILU:
        ck_kernel_silu_forward(out, a, d.len);
        break;
    case CK_OP_ADD:
        ck_kernel_add_forward(out, a, b, d.len);
        break;
    case CK_OP_MUL:
        ck_kernel_mul_forward(out, a, b, d.len);
        break;
    case CK_OP_DROPOUT:
        ck_kernel_dropout_forward(out, io->saved[CK_SLOT_MASK], a, prob, io->key, d.len);
        break;
    case CK_OP_ATTENTION:
        attention_forward(io, prob);
        break;
    case CK_OP_SWIGLU:
    case CK_OP_GEGLU:
        glu_forward(io, d.len);
        break;
    case CK_OP_SOFTCAP:
        ck_kernel_softcap_forward(out, a, (float)n->attrs.cap, d.len);
        break;
    case CK_OP_SCALE:
        ck_kernel_scale_forward(out, a, (float)n->attrs.factor, d.len);
        break;
    case CK_OP_CAST:
        ck_kernel_cast_forward(io->out, n->attrs.to, io->in[0],
                               type_of(io, n->inputs[0])->dtype, d.len);
        break;
    case CK_OP_MOE:
        moe_pass(io, false);
        break;
    case CK_OP_ROPE: {
        attn_dims q = attention_dims(io);
        ck_kernel_rope_forward(out, a, q.B, q.T, q.H, q.KV, q.D, (double)n->attrs.theta);
        break;
    }
    case CK_OP_QKNORM: {
        attn_dims q = attention_dims(io);
        ck_kernel_qknorm_forward(out, io->saved[CK_SLOT_RSTD], io->saved[CK_SLOT_NORMED],
                                 io->saved[CK_SLOT_X_F32], a, p[0], p[1], q.B * q.T, q.H, q.KV,
                                 q.D, n->attrs.eps);
        break;
    }
    case CK_OP_LORA: {
        lora_dims l = lora_dims_of(io);
        float *copy = io->saved[CK_SLOT_ADAPTER_IN]; /* kept instead of x, for dA */
        if (copy)
            memcpy(copy, a, l.N * l.C * sizeof *copy);
        ck_kernel_lora_forward(out, io->saved[CK_SLOT_LORA_MID], a, b, p[0], p[1], l.N, l.C, l.OC,
                               l.R, l.n_parts, l.width, l.s);
        break;
    }
    case CK_OP_CROSS_ENTROPY:
    case CK_OP_MSE: /* ck_kernel_loss_forward and _backward */
        break;
    }
}

static void attention_backward(const ck_kernel_io *io, float prob)
{
    attn_dims d = attention_dims(io), run = d;
    float cap = (float)io->node->attrs.cap;
    const float *qkv = io->in[0];
    float *dqkv = io->din[0], *ws = io->ws, *expanded = io->saved[CK_SLOT_QKV_EXPANDED];
    if (expanded) { /* the copies' gradient first, in the workspace, then folded */
        size_t n = d.B * d.T * 3 * d.H * d.D;
        qkv = expanded;
        dqkv = ws;
        memset(dqkv, 0, n * sizeof *dqkv);
        ws += n;
        run.KV = d.H;
    }
    if (io->node->attrs.flash)
        ck_kernel_attention_flash_backward(dqkv, io->dout, qkv, io->out, io->saved[CK_SLOT_LSE],
                                           ws, run.B, run.T, run.H, run.KV, run.D, prob, cap,
                                           io->key);
    else
        ck_kernel_attention_backward(dqkv, io->dout, qkv, io->saved[CK_SLOT_PROBS],
                                     io->saved[CK_SLOT_MASK], io->saved[CK_SLOT_DROPPED],
                                     io->saved[CK_SLOT_CAPPED], ws, run.B, run.T, run.H, run.KV,
                                     run.D, prob, cap, io->key);
    if (expanded && io->din[0])
        fold_kv(io->din[0], dqkv, d);
}

void ck_kernel_backward(const ck_kernel_io *io)
{
    const ck_node *n = io->node;
    flat_dims d = flat(io);
    const float *dout = io->dout, *a = io->in[0], *b = io->in[1];
    float *da = io->din[0], *db = io->din[1], *const *p = io->param, *const *dp = io->dparam;
    float prob = (float)n->attrs.p;
    switch (n->op->kind) {
    case CK_OP_EMBEDDING:
        ck_kernel_embedding_backward(dp[0], dp[1], dout, io->in[0], d.rows, d.c,
                                     (size_t)n->attrs.dim);
        break;
    case CK_OP_LINEAR:
        ck_kernel_linear_backward(da, dp[0], dp[1], dout, a, p[0], d.rows, d.c,
                                  (size_t)n->attrs.out);
        break;
    case CK_OP_LAYERNORM:
        ck_kernel_layernorm_backward(da, dp[0], dp[1], dout, a, p[0], io->saved[CK_SLOT_MEAN],
                                     io->saved[CK_SLOT_RSTD], d.rows, d.c);
        break;
    case CK_OP_RMSNORM: /* written out on 16-bit x, it kept x.float() instead of x */
        ck_kernel_rmsnorm_backward(da, dp[0], dout,
                                   io->saved[CK_SLOT_X_F32] ? io->saved[CK_SLOT_X_F32] : a, p[0],
                                   io->saved[CK_SLOT_RSTD], d.rows, d.c);
        break;
    case CK_OP_GELU:
        if (n->attrs.fused)
            ck_kernel_gelu_backward(da, a, dout, d.len);
        else
            ck_kernel_gelu_written_backward(da, io->ws, dout, a, io->saved[CK_SLOT_GELU_HALF],
                                            io->saved[CK_SLOT_GELU_TANH],
                                            io->saved[CK_SLOT_GELU_SUM], d.len);
        break;
    case CK_OP_RELU:
        ck_kernel_relu_backward(da, io->out, dout, d.len);
        break;
    case CK_OP_SILU:
        ck_kernel_silu_backward(da, a, dout, d.len);
        break;
    case CK_OP_ADD:
        ck_kernel_add_backward(da, db, dout, d.len);
        break;
    case CK_OP_MUL:
        ck_kernel_mul_backward(da, db, dout, a, b, d.len);
        break;
    case CK_OP_DROPOUT:
        ck_kernel_dropout_backward(da, dout, io->saved[CK_SLOT_MASK], prob, d.len);
        break;
    case CK_OP_ATTENTION:
        attention_backward(io, prob);
        break;
    case CK_OP_SWIGLU:
    case CK_OP_GEGLU:
        glu_backward(io, d.len);
        break;
    case CK_OP_SOFTCAP:
        ck_kernel_softcap_backward(da, io->out, dout, (float)n->attrs.cap, d.len);
        break;
    case CK_OP_SCALE:
        ck_kernel_scale_backward(da, dout, (float)n->attrs.factor, d.len);
        break;
    case CK_OP_CAST: /* as forward: din += dout in f32, rounded on store */
        ck_kernel_cast_backward(da, CK_F32, dout, CK_F32, d.len);
        break;
    case CK_OP_MOE:
        moe_pass(io, true);
        break;
    case CK_OP_ROPE: {
        attn_dims q = attention_dims(io);
        ck_kernel_rope_backward(da, dout, q.B, q.T, q.H, q.KV, q.D, (double)n->attrs.theta);
        break;
    }
    case CK_OP_QKNORM: {
        attn_dims q = attention_dims(io);
        const float *heads = io->saved[CK_SLOT_X_F32];
        ck_kernel_qknorm_backward(da, dp[0], dp[1], dout, heads ? heads : a, heads != NULL, p[0],
                                  p[1], io->saved[CK_SLOT_RSTD], q.B * q.T, q.H, q.KV, q.D);
        break;
    }
    case CK_OP_LORA: {
        lora_dims l = lora_dims_of(io);
        const float *copy = io->saved[CK_SLOT_ADAPTER_IN];
        ck_kernel_lora_backward(da, db, dp[0], dp[1], io->ws, dout, copy ? copy : a,
                                io->saved[CK_SLOT_LORA_MID], p[0], p[1], l.N, l.C, l.OC, l.R,
                                l.n_parts, l.width, l.s);
        break;
    }
    case CK_OP_CROSS_ENTROPY:
    case CK_OP_MSE: /* ck_kernel_loss_forward and _backward */
        break;
    }
}

/* The losses are mse and cross_entropy (planner/op's is_loss). */
float ck_kernel_loss_forward(const ck_kernel_io *io)
{
    flat_dims d = flat(io);
    if (io->node->op->kind == CK_OP_MSE)
        return ck_kernel_mse_forward(io->in[0], io->in[1], numel_of(io, io->node->inputs[0]));
    if (!io->node->attrs.fused)
        return ck_kernel_cross_entropy_forward(NULL, io->saved[CK_SLOT_LOGP], io->in[0], io->in[1], d.rows, d.c);
    return ck_kernel_cross_entropy_forward(io->saved[CK_SLOT_LSE], NULL, io->in[0], io->in[1], d.rows, d.c);
}

/* Unfused cross-entropy from the log-probabilities alone: nll_loss's gradient, which
 * PyTorch makes in io->ws, is not needed here. */
void ck_kernel_loss_backward(const ck_kernel_io *io)
{
    flat_dims d = flat(io);
    if (io->node->op->kind == CK_OP_MSE)
        ck_kernel_mse_backward(io->din[0], io->in[0], io->in[1], numel_of(io, io->node->inputs[0]));
    else
        ck_kernel_cross_entropy_backward(io->din[0], io->saved[CK_SLOT_LSE], io->saved[CK_SLOT_LOGP],
                                         io->in[0], io->in[1], d.rows, d.c);
}
