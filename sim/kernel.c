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
                const float *pos = wpe + t * C;
                for (size_t c = 0; c < C; c++)
                    o[c] = e[c] + pos[c];
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
            float *e = dwte + (size_t)ids[b * T + t] * C;
            for (size_t c = 0; c < C; c++)
                e[c] += d[c];
            if (dwpe) {
                float *pos = dwpe + t * C;
                for (size_t c = 0; c < C; c++)
                    pos[c] += d[c];
            }
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
void ck_kernel_linear_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, size_t N, size_t C, size_t OC)
{
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bdim(N), bdim(C), bdim(OC), 1.0f,
                    dout, bdim(OC), weight, bdim(C), 1.0f, dinp, bdim(C));
    if (dweight)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bdim(OC), bdim(C), bdim(N), 1.0f, dout,
                    bdim(OC), inp, bdim(C), 1.0f, dweight, bdim(C));
    if (dbias)
        column_sums(dbias, dout, N, OC);
}

/* ---- normalisation ---- */

/* mean = sum x / C, var = sum (x - mean)^2 / C (two passes, in double: no cancellation
 * for rows with a large mean), rstd = 1/sqrt(var + eps), out = (x - mean) rstd w + b. */
void ck_kernel_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, size_t N, size_t C, double eps)
{
    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * C;
        double s = 0.0;
        for (size_t c = 0; c < C; c++)
            s += x[c];
        double m = s / (double)C, v = 0.0;
        for (size_t c = 0; c < C; c++) {
            double d = x[c] - m;
            v += d * d;
        }
        float r = (float)(1.0 / sqrt(v / (double)C + eps)), mf = (float)m;
        float *o = out + n * C;
        for (size_t c = 0; c < C; c++)
            o[c] = (x[c] - mf) * r * weight[c] + bias[c];
        mean[n] = mf;
        rstd[n] = r;
    }
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
        float m = mean[n], r = rstd[n];
        float sum_g = 0.0f, sum_gx = 0.0f;
        for (size_t c = 0; c < C; c++) {
            float xhat = (x[c] - m) * r, g = d[c] * weight[c];
            sum_g += g;
            sum_gx += g * xhat;
        }
        float mean_g = sum_g / (float)C, mean_gx = sum_gx / (float)C;
        for (size_t c = 0; dinp && c < C; c++) {
            float xhat = (x[c] - m) * r, g = d[c] * weight[c];
            dinp[n * C + c] += r * (g - mean_g - xhat * mean_gx);
        }
        for (size_t c = 0; dweight && c < C; c++) {
            float xhat = (x[c] - m) * r;
            dweight[c] += d[c] * xhat;
            dbias[c] += d[c];
        }
    }
}

/* One row of C values: rstd = 1/sqrt(mean(x^2) + eps), out = x rstd w; returns rstd. */
static float rms_row_forward(float *out, const float *x, const float *weight, size_t C, double eps)
{
    double ss = 0.0;
    for (size_t c = 0; c < C; c++)
        ss += (double)x[c] * x[c];
    float r = (float)(1.0 / sqrt(ss / (double)C + eps));
    for (size_t c = 0; c < C; c++)
        out[c] = x[c] * r * weight[c];
    return r;
}

/* With g = dout w, d rstd / dx_k = -rstd^3 x_k / C, so
 *   dx = rstd (g - x rstd^2 mean(g x)),  dw += dout x rstd. dx or dweight may be NULL. */
static void rms_row_backward(float *dx, float *dweight, const float *d, const float *x,
                             const float *weight, float r, size_t C)
{
    float sum_gx = 0.0f;
    for (size_t c = 0; c < C; c++)
        sum_gx += d[c] * weight[c] * x[c];
    float k = r * r * sum_gx / (float)C;
    for (size_t c = 0; dx && c < C; c++)
        dx[c] += r * (d[c] * weight[c] - x[c] * k);
    for (size_t c = 0; dweight && c < C; c++)
        dweight[c] += d[c] * x[c] * r;
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

/* Row n, head h < H + KV: rstd[n, h] and out = rmsnorm(x, q_gamma or k_gamma); v copied. */
void ck_kernel_qknorm_forward(float *out, float *rstd, const float *inp, const float *q_gamma,
                              const float *k_gamma, size_t N, size_t H, size_t KV, size_t D,
                              double eps)
{
    size_t W = (H + 2 * KV) * D;
    for (size_t n = 0; n < N; n++) {
        for (size_t h = 0; h < H + KV; h++)
            rstd[n * (H + KV) + h] = rms_row_forward(out + n * W + h * D, inp + n * W + h * D,
                                                     h < H ? q_gamma : k_gamma, D, eps);
        memcpy(out + n * W + (H + KV) * D, inp + n * W + (H + KV) * D, KV * D * sizeof *out);
    }
}

/* Each q and k head as rmsnorm's backward, with its own gamma's gradient; dv += dout. */
void ck_kernel_qknorm_backward(float *dinp, float *dq_gamma, float *dk_gamma, const float *dout,
                               const float *inp, const float *q_gamma, const float *k_gamma,
                               const float *rstd, size_t N, size_t H, size_t KV, size_t D)
{
    size_t W = (H + 2 * KV) * D;
    for (size_t n = 0; n < N; n++) {
        for (size_t h = 0; h < H + KV; h++) {
            size_t at = n * W + h * D;
            rms_row_backward(dinp ? dinp + at : NULL, h < H ? dq_gamma : dk_gamma, dout + at, inp + at,
                             h < H ? q_gamma : k_gamma, rstd[n * (H + KV) + h], D);
        }
        for (size_t i = n * W + (H + KV) * D; dinp && i < (n + 1) * W; i++)
            dinp[i] += dout[i];
    }
}

/* ---- element-wise ---- */

#define GELU_S 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

/* gelu(x) = x/2 (1 + tanh(s (x + a x^3))). */
static float gelu_tanh(float x)
{
    return 0.5f * x * (1.0f + tanhf(GELU_S * (x + GELU_A * x * x * x)));
}

/* gelu'(x) = (1 + t)/2 + x/2 (1 - t^2) s (1 + 3 a x^2), t = tanh(s (x + a x^3)). */
static float gelu_tanh_grad(float x)
{
    float t = tanhf(GELU_S * (x + GELU_A * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_S * (1.0f + 3.0f * GELU_A * x * x);
}

void ck_kernel_gelu_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = gelu_tanh(inp[i]);
}

void ck_kernel_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dinp[i] += gelu_tanh_grad(inp[i]) * dout[i];
}

/* out = gelu(gate) up. */
void ck_kernel_geglu_forward(float *out, const float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = gelu_tanh(gate[i]) * up[i];
}

/* dgate += dout up gelu'(gate), dup += dout gelu(gate). */
void ck_kernel_geglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                              const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float dg = dout[i] * up[i] * gelu_tanh_grad(gate[i]), du = dout[i] * gelu_tanh(gate[i]);
        dgate[i] += dg;
        dup[i] += du;
    }
}

/* relu(x) = max(x, 0). */
void ck_kernel_relu_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

/* relu'(x) = [out > 0]: the output alone decides, which is why relu saves it. */
void ck_kernel_relu_backward(float *dinp, const float *out, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (out[i] > 0.0f)
            dinp[i] += dout[i];
}

/* silu(x) = x sigmoid(x). */
void ck_kernel_silu_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = inp[i] / (1.0f + expf(-inp[i]));
}

/* silu'(x) = sig(x) (1 + x (1 - sig(x))). */
void ck_kernel_silu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i], sig = 1.0f / (1.0f + expf(-x));
        dinp[i] += dout[i] * sig * (1.0f + x * (1.0f - sig));
    }
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
void ck_kernel_scale_forward(float *out, const float *inp, float factor, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = factor * inp[i];
}

/* dx += factor dout. */
void ck_kernel_scale_backward(float *dinp, const float *dout, float factor, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dinp[i] += factor * dout[i];
}

/* out = a + b. */
void ck_kernel_add_forward(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

/* da += dout, db += dout (da == db when a node adds a tensor to itself; either may be NULL,
 * not required). */
void ck_kernel_add_backward(float *da, float *db, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (da)
            da[i] += dout[i];
        if (db)
            db[i] += dout[i];
    }
}

/* out = a b. */
void ck_kernel_mul_forward(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] * b[i];
}

/* da += dout b, db += dout a. Either gradient may be NULL (not required); then the other
 * input is not read (the op keeps it only for that gradient). */
void ck_kernel_mul_backward(float *da, float *db, const float *dout, const float *a, const float *b,
                     size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (da)
            da[i] += dout[i] * b[i];
        if (db)
            db[i] += dout[i] * a[i];
    }
}

/* ---- dropout ---- */

/* out = x keep / (1 - p), so the expected output equals x and evaluation needs no
 * rescaling. */
void ck_kernel_dropout_forward(float *out, uint8_t *mask, const float *inp, float p, ck_rng_key key,
                        size_t n)
{
    float scale = 1.0f / (1.0f - p);
    for (size_t i = 0; i < n; i++) {
        int keep = ck_rng_keep(key, i, p);
        mask[i] = (uint8_t)keep;
        out[i] = keep ? inp[i] * scale : 0.0f;
    }
}

/* dx += dout keep / (1 - p). */
void ck_kernel_dropout_backward(float *dinp, const float *dout, const uint8_t *mask, float p, size_t n)
{
    float scale = 1.0f / (1.0f - p);
    for (size_t i = 0; i < n; i++)
        if (mask[i])
            dinp[i] += dout[i] * scale;
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
                float mx = s[0];
                for (size_t j = 1; j <= i; j++)
                    mx = s[j] > mx ? s[j] : mx;
                float sum = 0.0f;
                for (size_t j = 0; j <= i; j++) {
                    pr[j] = expf(s[j] - mx);
                    sum += pr[j];
                }
                float inv = 1.0f / sum;
                for (size_t j = 0; j <= i; j++)
                    pr[j] *= inv;
                for (size_t j = i + 1; j < T; j++)
                    pr[j] = 0.0f;
                if (p > 0.0f) {
                    uint8_t *m = mask + bh + i * T;
                    float *z = dropped + bh + i * T;
                    for (size_t j = 0; j <= i; j++) {
                        m[j] = (uint8_t)ck_rng_keep(key, bh + i * T + j, p);
                        z[j] = m[j] ? pr[j] * keep_scale : 0.0f;
                    }
                    for (size_t j = i + 1; j < T; j++) {
                        m[j] = 0;
                        z[j] = 0.0f;
                    }
                }
            }
            const float *Z = p > 0.0f ? dropped + bh : P;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bdim(T), bdim(D), bdim(T),
                        1.0f, Z, bdim(T), base + hc.v, bdim(hc.w), 0.0f,
                        out + b * T * HD + h * D, bdim(HD));
        }
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
                if (p > 0.0f) {
                    const uint8_t *m = mask + bh + i * T;
                    for (size_t j = 0; j <= i; j++)
                        ds[j] = m[j] ? ds[j] * keep_scale : 0.0f;
                }
                float r = 0.0f;
                for (size_t j = 0; j <= i; j++)
                    r += pr[j] * ds[j];
                for (size_t j = 0; j <= i; j++)
                    ds[j] = pr[j] * (ds[j] - r) * scale;
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

/* Row i of (b, h): s_j = q_i . k_j / sqrt(D) for j <= i in the workspace (with softcap,
 * cap tanh(s_j / cap)), m = max s,
 * lse_i = m + log sum exp(s_j - m), out_i = sum_j exp(s_j - lse_i) keep_j / (1 - p) v_j.
 * Row by row, the products are matrix-vector ones (sgemv over the strided k and v rows).
 * The dropout draws use the same element numbering as the standard form, so both forms
 * drop the same probabilities. */
void ck_kernel_attention_flash_forward(float *out, float *lse, const float *qkv, float *ws,
                                       size_t B, size_t T, size_t H, size_t KV, size_t D, float p,
                                       float cap, ck_rng_key key)
{
    float scale = 1.0f / sqrtf((float)D), keep_scale = 1.0f / (1.0f - p);
    size_t HD = H * D;
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            head_cols hc = cols_of(h, H, KV, D);
            const float *base = qkv + b * T * hc.w;
            size_t bh = (b * H + h) * T;
            for (size_t i = 0; i < T; i++) {
                const float *q = base + i * hc.w + hc.q;
                cblas_sgemv(CblasRowMajor, CblasNoTrans, bdim(i + 1), bdim(D), scale, base + hc.k,
                            bdim(hc.w), q, 1, 0.0f, ws, 1);
                float mx = -INFINITY;
                for (size_t j = 0; j <= i; j++) {
                    if (cap > 0.0f)
                        ws[j] = cap * tanhf(ws[j] / cap);
                    mx = ws[j] > mx ? ws[j] : mx;
                }
                float sum = 0.0f;
                for (size_t j = 0; j <= i; j++) {
                    ws[j] = expf(ws[j] - mx);
                    sum += ws[j];
                }
                lse[bh + i] = mx + logf(sum);
                float inv = 1.0f / sum;
                for (size_t j = 0; j <= i; j++) {
                    ws[j] *= inv;
                    if (p > 0.0f)
                        ws[j] = ck_rng_keep(key, (bh + i) * T + j, p) ? ws[j] * keep_scale : 0.0f;
                }
                float *o = out + (b * T + i) * HD + h * D;
                for (size_t d = 0; d < D; d++) /* written, never read: beta = 0 alone may keep NaN */
                    o[d] = 0.0f;
                cblas_sgemv(CblasRowMajor, CblasTrans, bdim(i + 1), bdim(D), 1.0f, base + hc.v,
                            bdim(hc.w), ws, 1, 1.0f, o, 1);
            }
        }
}

/* Row i of (b, h), P_j = exp(s_j - lse_i) recomputed into ws[0, T), keep_j redrawn:
 *   Delta_i = dout_i . out_i  (= sum_j P_j dP_j, since out_i = sum_j Z_j v_j),
 *   dS_j = P_j (dout_i . v_j keep_j / (1 - p) - Delta_i) / sqrt(D) into ws[T, 2T) (with
 *          softcap times 1 - tanh^2 of the recomputed raw score over cap),
 *   dv_j += Z_j dout_i, dq_i += sum_j dS_j k_j, dk_j += dS_j q_i
 * (sgemv for the products with k and v rows, sger for the rank-one updates). */
void ck_kernel_attention_flash_backward(float *dqkv, const float *dout, const float *qkv,
                                        const float *out, const float *lse, float *ws, size_t B,
                                        size_t T, size_t H, size_t KV, size_t D, float p,
                                        float cap, ck_rng_key key)
{
    float scale = 1.0f / sqrtf((float)D), keep_scale = 1.0f / (1.0f - p);
    size_t HD = H * D;
    float *P = ws, *dS = ws + T;
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            head_cols hc = cols_of(h, H, KV, D);
            const float *base = qkv + b * T * hc.w;
            float *dbase = dqkv + b * T * hc.w;
            size_t bh = (b * H + h) * T;
            for (size_t i = 0; i < T; i++) {
                const float *q = base + i * hc.w + hc.q;
                const float *dO = dout + (b * T + i) * HD + h * D;
                const float *o = out + (b * T + i) * HD + h * D;
                float delta = cblas_sdot(bdim(D), dO, 1, o, 1), l = lse[bh + i];
                int rows = bdim(i + 1), w = bdim(hc.w);
                cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, bdim(D), scale, base + hc.k, w, q,
                            1, 0.0f, P, 1);
                cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, bdim(D), 1.0f, base + hc.v, w, dO,
                            1, 0.0f, dS, 1);
                for (size_t j = 0; j <= i; j++) {
                    float ks = 1.0f;
                    if (p > 0.0f)
                        ks = ck_rng_keep(key, (bh + i) * T + j, p) ? keep_scale : 0.0f;
                    float dcap = 1.0f; /* d cap tanh(s / cap) / ds */
                    if (cap > 0.0f) {
                        float c = tanhf(P[j] / cap);
                        P[j] = cap * c;
                        dcap = 1.0f - c * c;
                    }
                    P[j] = expf(P[j] - l);
                    dS[j] = P[j] * (dS[j] * ks - delta) * scale * dcap;
                    P[j] *= ks; /* from here on Z_j, for dv */
                }
                cblas_sger(CblasRowMajor, rows, bdim(D), 1.0f, P, 1, dO, 1, dbase + hc.v, w);
                cblas_sgemv(CblasRowMajor, CblasTrans, rows, bdim(D), 1.0f, base + hc.k, w, dS, 1,
                            1.0f, dbase + i * hc.w + hc.q, 1);
                cblas_sger(CblasRowMajor, rows, bdim(D), 1.0f, dS, 1, q, 1, dbase + hc.k, w);
            }
        }
}

/* ---- losses ---- */

/* lse = m + log sum_v exp(x[v] - m) of one row of V logits, m the row max. */
static float row_lse(const float *x, size_t V)
{
    float mx = x[0];
    for (size_t v = 1; v < V; v++)
        mx = x[v] > mx ? x[v] : mx;
    float sum = 0.0f;
    for (size_t v = 0; v < V; v++)
        sum += expf(x[v] - mx);
    return mx + logf(sum);
}

/* d[v] += (exp(z[v] - shift) - [v == t]) / N for one row: the softmax's gradient of a
 * mean cross-entropy, from the logits (shift the log-sum-exp) or the log-probabilities
 * (shift 0). */
static void add_row_gradient(float *d, const float *z, float shift, size_t V, size_t t, float invN)
{
    for (size_t v = 0; v < V; v++)
        d[v] += expf(z[v] - shift) * invN;
    d[t] -= invN;
}

/* loss_n = lse_n - logits[n, target_n], lse_n = m + log sum_v exp(logits[n,v] - m) with m
 * the row max; dlogits[n,v] += (exp(logits[n,v] - lse_n) - [v == target_n]) / N. Targets
 * must lie in [0, V) (validated by the caller with the data). Writes lse [N], or (PyTorch's
 * unfused form: log_softmax kept whole, then nll_loss, whose gradient through log_softmax's
 * backward is the same) logp = logits - lse [N, V]: one of the two is NULL. */
static float cross_entropy_rows(float *dlogits, float *lse, float *logp, const float *logits,
                                const int32_t *targets, size_t N, size_t V)
{
    if (N == 0)
        return 0.0f;
    double total = 0.0;
    float invN = 1.0f / (float)N;
    for (size_t n = 0; n < N; n++) {
        const float *x = logits + n * V, *z = x;
        float l = row_lse(x, V), shift = l;
        size_t t = (size_t)targets[n];
        if (logp) {
            float *lp = logp + n * V;
            for (size_t v = 0; v < V; v++)
                lp[v] = x[v] - l;
            z = lp;
            shift = 0.0f;
        } else {
            lse[n] = l;
        }
        total += (double)shift - z[t];
        add_row_gradient(dlogits + n * V, z, shift, V, t, invN);
    }
    return (float)(total / (double)N);
}

float ck_kernel_cross_entropy(float *dlogits, float *lse, const float *logits, const int32_t *targets,
                       size_t N, size_t V)
{
    return cross_entropy_rows(dlogits, lse, NULL, logits, targets, N, V);
}

float ck_kernel_cross_entropy_logp(float *dlogits, float *logp, const float *logits,
                                   const int32_t *targets, size_t N, size_t V)
{
    return cross_entropy_rows(dlogits, NULL, logp, logits, targets, N, V);
}

/* loss = mean (pred - target)^2, dpred += 2 (pred - target) / n. */
float ck_kernel_mse(float *dpred, const float *pred, const float *target, size_t n)
{
    if (n == 0)
        return 0.0f;
    double total = 0.0;
    float k = 2.0f / (float)n;
    for (size_t i = 0; i < n; i++) {
        float e = pred[i] - target[i];
        total += (double)e * e;
        dpred[i] += k * e;
    }
    return (float)(total / (double)n);
}

/* ---- swiglu ---- */

void ck_kernel_swiglu_forward(float *out, const float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

void ck_kernel_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                               const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = gate[i], sig = 1.0f / (1.0f + expf(-g));
        if (dgate) /* up is read only for gate's gradient: without it, it may not be kept */
            dgate[i] += dout[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
        if (dup)
            dup[i] += dout[i] * g * sig;
    }
}

/* ---- cast ---- */

static uint32_t bits_of(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static float float_of(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

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
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) {
            size_t row = (b * T + t) * W;
            for (size_t j = 0; j < D / 2; j++) {
                double a = (double)t * pow(theta, -2.0 * (double)j / (double)D);
                float c = (float)cos(a), sn = (float)(sign * sin(a));
                for (size_t h = 0; h < H + KV; h++) {
                    size_t i = row + h * D + 2 * j;
                    float x0 = src[i], x1 = src[i + 1];
                    float y0 = x0 * c - x1 * sn, y1 = x0 * sn + x1 * c;
                    dst[i] = add ? dst[i] + y0 : y0;
                    dst[i + 1] = add ? dst[i + 1] + y1 : y1;
                }
            }
            for (size_t i = row + rotated; i < row + W; i++)
                dst[i] = add ? dst[i] + src[i] : src[i];
        }
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
            float *o = out + (size_t)s->route_index[2 * i] * C, *y = s->weighted + i * C;
            for (size_t c = 0; c < C; c++) {
                y[c] = s->expert_out[i * C + c] * s->route_weight[i];
                o[c] += y[c];
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
        float g = gate[i], sig = 1.0f / (1.0f + expf(-g)), dh = dhidden[i];
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

/* Expert by expert, then the routing: with w_k = v_k / S,
 * dv_j = (dw_j - sum_k dw_k w_k) / S; dp is dv at the chosen experts, 0 elsewhere; the
 * softmax's dlogits = p (dp - sum p dp) is p dp, since sum p dp = sum_j v_j dv_j = 0 (the
 * weights do not change when every v_j scales); then the router's product. */
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
    ck_kernel_linear_backward(dinp, dw->router, NULL, dlogits, inp, w->router, N, C, E);
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

static void attention_forward(const ck_kernel_io *io, float prob)
{
    attn_dims d = attention_dims(io);
    float cap = (float)io->node->attrs.cap;
    if (io->node->attrs.flash)
        ck_kernel_attention_flash_forward(io->out, io->saved[CK_SLOT_LSE], io->in[0], io->ws, d.B,
                                          d.T, d.H, d.KV, d.D, prob, cap, io->key);
    else
        ck_kernel_attention_forward(io->out, io->saved[CK_SLOT_PROBS], io->saved[CK_SLOT_MASK],
                                    io->saved[CK_SLOT_DROPPED], io->saved[CK_SLOT_CAPPED],
                                    io->in[0], io->ws, d.B, d.T, d.H, d.KV, d.D, prob, cap,
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
    if (backward) {
        ck_kernel_moe_weights dw = moe_weights(io->dparam);
        ck_kernel_moe_backward(io->din[0], &dw, io->dout, &s, io->in[0], &w, io->ws, d.N, d.C,
                               d.E, d.K, d.F);
    } else {
        ck_kernel_moe_forward(io->out, &s, io->in[0], &w, io->ws, d.N, d.C, d.E, d.K, d.F);
    }
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
        ck_kernel_rmsnorm_forward(out, io->saved[CK_SLOT_RSTD], io->saved[CK_SLOT_NORMED], a, p[0],
                                  d.rows, d.c, n->attrs.eps);
        break;
    case CK_OP_GELU:
        ck_kernel_gelu_forward(out, a, d.len);
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
        ck_kernel_swiglu_forward(out, a, b, d.len);
        break;
    case CK_OP_GEGLU:
        ck_kernel_geglu_forward(out, a, b, d.len);
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
        ck_kernel_qknorm_forward(out, io->saved[CK_SLOT_RSTD], a, p[0], p[1], q.B * q.T, q.H,
                                 q.KV, q.D, n->attrs.eps);
        break;
    }
    case CK_OP_LORA: {
        lora_dims l = lora_dims_of(io);
        ck_kernel_lora_forward(out, io->saved[CK_SLOT_LORA_MID], a, b, p[0], p[1], l.N, l.C, l.OC,
                               l.R, l.n_parts, l.width, l.s);
        break;
    }
    case CK_OP_CROSS_ENTROPY:
    case CK_OP_MSE: /* in ck_kernel_loss */
        break;
    }
}

static void attention_backward(const ck_kernel_io *io, float prob)
{
    attn_dims d = attention_dims(io);
    float cap = (float)io->node->attrs.cap;
    if (io->node->attrs.flash)
        ck_kernel_attention_flash_backward(io->din[0], io->dout, io->in[0], io->out,
                                           io->saved[CK_SLOT_LSE], io->ws, d.B, d.T, d.H, d.KV,
                                           d.D, prob, cap, io->key);
    else
        ck_kernel_attention_backward(io->din[0], io->dout, io->in[0], io->saved[CK_SLOT_PROBS],
                                     io->saved[CK_SLOT_MASK], io->saved[CK_SLOT_DROPPED],
                                     io->saved[CK_SLOT_CAPPED], io->ws, d.B, d.T, d.H, d.KV, d.D,
                                     prob, cap, io->key);
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
    case CK_OP_RMSNORM:
        ck_kernel_rmsnorm_backward(da, dp[0], dout, a, p[0], io->saved[CK_SLOT_RSTD], d.rows, d.c);
        break;
    case CK_OP_GELU:
        ck_kernel_gelu_backward(da, a, dout, d.len);
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
        ck_kernel_swiglu_backward(da, db, dout, a, b, d.len);
        break;
    case CK_OP_GEGLU:
        ck_kernel_geglu_backward(da, db, dout, a, b, d.len);
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
        ck_kernel_qknorm_backward(da, dp[0], dp[1], dout, a, p[0], p[1], io->saved[CK_SLOT_RSTD],
                                  q.B * q.T, q.H, q.KV, q.D);
        break;
    }
    case CK_OP_LORA: {
        lora_dims l = lora_dims_of(io);
        ck_kernel_lora_backward(da, db, dp[0], dp[1], io->ws, dout, a,
                                io->saved[CK_SLOT_LORA_MID], p[0], p[1], l.N, l.C, l.OC, l.R,
                                l.n_parts, l.width, l.s);
        break;
    }
    case CK_OP_CROSS_ENTROPY:
    case CK_OP_MSE: /* in ck_kernel_loss */
        break;
    }
}

float ck_kernel_loss(const ck_kernel_io *io)
{
    flat_dims d = flat(io);
    size_t len = numel_of(io, io->node->inputs[0]);
    switch (io->node->op->kind) {
    case CK_OP_CROSS_ENTROPY:
        if (!io->node->attrs.fused) /* nll_loss's gradient, in io->ws, is not needed here */
            return ck_kernel_cross_entropy_logp(io->din[0], io->saved[CK_SLOT_LOGP], io->in[0],
                                                io->in[1], d.rows, d.c);
        return ck_kernel_cross_entropy(io->din[0], io->saved[CK_SLOT_LSE], io->in[0], io->in[1],
                                       d.rows, d.c);
    case CK_OP_MSE:
        return ck_kernel_mse(io->din[0], io->in[0], io->in[1], len);
    case CK_OP_EMBEDDING:
    case CK_OP_LINEAR:
    case CK_OP_LAYERNORM:
    case CK_OP_RMSNORM:
    case CK_OP_GELU:
    case CK_OP_RELU:
    case CK_OP_SILU:
    case CK_OP_ADD:
    case CK_OP_MUL:
    case CK_OP_DROPOUT:
    case CK_OP_ATTENTION:
    case CK_OP_ROPE:
    case CK_OP_SWIGLU:
    case CK_OP_CAST:
    case CK_OP_LORA:
    case CK_OP_QKNORM:
    case CK_OP_GEGLU:
    case CK_OP_SOFTCAP:
    case CK_OP_SCALE:
    case CK_OP_MOE: /* not losses */
        break;
    }
    return 0.0f;
}
