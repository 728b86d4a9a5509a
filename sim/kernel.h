/* kernel: the forward and backward of every op of planner/op, one plain function each
 * with explicit dimensions (after llm.c's train_gpt2.c), in f32; the conversions to and
 * from 16-bit floats; and their dispatch, ck_kernel_forward/backward/loss, which reads a node's
 * sizes and attributes and calls them; and the optimizer's update. Matrix products go
 * through cblas_sgemm; element-wise work and row reductions are loops that the compiler
 * vectorises (sim/kernel.c, "vectorisable element-wise math").
 *
 * Conventions:
 * - Activations are row-major; N is the number of rows (B*T for [B, T, C] tensors).
 * - Backward functions ACCUMULATE (+=) into every gradient they write (inputs and
 *   parameters), so a tensor read by several nodes needs one gradient buffer; callers zero
 *   gradient buffers when they allocate them.
 * - A NULL gradient (din, dparam) is one that is not required (requires-grad, planner/model):
 *   the backward neither writes it nor reads what only it needs, which the node may not have
 *   kept (a frozen linear keeps no input). Backwards take NULL for any input's gradient
 *   that is not required, and for their parameters' when the node is frozen.
 * - Saved internal tensors (the ck_slot values: mean, rstd, mask, probs, dropped, lse, moe's)
 *   are written by the forward and read by the backward, exactly as planner/op declares them.
 * - Workspace arguments are caller-allocated buffers of exactly the size planner/op
 *   declares (fwd_ws_bytes, bwd_ws_bytes); kernels allocate nothing.
 * - Buffers never overlap (the executor gives each tensor its own), as the restrict
 *   qualifiers of the element-wise kernels say, which lets the compiler vectorise them;
 *   where two gradients may be one buffer, the kernel says so.
 * - Results are deterministic: the same inputs give the same bits on every call, wherever
 *   the buffers lie. exp (within 1.4 ulp), sigmoid and gelu's tanh are computed in
 *   sim/kernel.c, without branches (libm's are calls, which no loop vectorises); the rest
 *   of libm is libm's. */
#ifndef CK_KERNELS_H
#define CK_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/model.h"
#include "sim/rng.h"

/* ---- dispatch: one node's pass, from the op table's facts ---- */

/* Everything one pass of one node reads and writes, filled by the executor. Every float
 * buffer is f32, whatever its tensor's dtype: the executor hands 16-bit tensors over as
 * f32 views (sim/widen) and rounds what a pass wrote back. Integer ones (token ids,
 * targets, masks) are as stored. */
typedef struct {
    const ck_model *m;
    const ck_node *node;
    const void *in[CK_OP_MAX_ARITY]; /* values of the node's inputs */
    void *out;                       /* its output (forward) or saved output (backward) */
    const void *dout;                /* backward: the output's gradient */
    void *din[CK_OP_MAX_ARITY];      /* backward and loss: the inputs' gradients, NULL where none */
    float *param[CK_OP_MAX_PARAMS];  /* by the op's parameter index; NULL where absent */
    float *dparam[CK_OP_MAX_PARAMS];
    void *saved[CK_N_SLOTS];         /* internal saved tensors by slot; NULL where not saved */
    void *ws;                        /* the pass's workspace, sized as planner/op says */
    ck_rng_key key;                  /* the dropout stream of the node's forward */
    size_t phase;                    /* a phased backward's (ck_phase): the one to run */
    float *temp[CK_OP_MAX_TEMPS];    /* its temps; NULL where not live */
} ck_kernel_io;

/* The node's forward (losses: nothing, see ck_kernel_loss_forward). */
void ck_kernel_forward(const ck_kernel_io *io);
/* The node's backward, accumulating into din[] and dparam[] (losses: nothing). */
void ck_kernel_backward(const ck_kernel_io *io);
/* A loss node's forward: returns the loss, writes its internal saved tensors. */
float ck_kernel_loss_forward(const ck_kernel_io *io);
/* Its backward: din[0] receives the gradient of in[0], from the saved tensors, the targets
 * (in[1]) and, where the op keeps it (planner/op), in[0]. */
void ck_kernel_loss_backward(const ck_kernel_io *io);

/* ---- the math kernels ---- */

/* Token and position embedding: out[b,t,:] = wte[ids[b,t],:] + wpe[t,:] (wpe may be NULL).
 * wte is [V, C], wpe [T, C] or larger. */
void ck_kernel_embedding_forward(float *out, const int32_t *ids, const float *wte, const float *wpe,
                          size_t B, size_t T, size_t C);
void ck_kernel_embedding_backward(float *dwte, float *dwpe, const float *dout, const int32_t *ids,
                           size_t B, size_t T, size_t C);

/* out[N, OC] = inp[N, C] @ weight[OC, C]^T + bias[OC] (bias may be NULL). The weight layout
 * matches an embedding table, so a tied output layer passes wte. */
void ck_kernel_linear_forward(float *out, const float *inp, const float *weight, const float *bias,
                       size_t N, size_t C, size_t OC);
/* dinp += dout @ weight; dweight += dout^T @ inp; dbias += column sums of dout (NULL: none). */
void ck_kernel_linear_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, size_t N, size_t C, size_t OC);

/* out = (inp - mean) * rstd * weight + bias over the last dimension C; rstd = 1/sqrt(var + eps). */
void ck_kernel_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, size_t N, size_t C, double eps);
void ck_kernel_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                           const float *inp, const float *weight, const float *mean,
                           const float *rstd, size_t N, size_t C);

/* out = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps); normed = inp * rstd when
 * not NULL (the form written out keeps it). */
void ck_kernel_rmsnorm_forward(float *out, float *rstd, float *normed, const float *inp,
                               const float *weight, size_t N, size_t C, double eps);
void ck_kernel_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                         const float *weight, const float *rstd, size_t N, size_t C);

/* Qwen3's q_norm and k_norm on packed qkv [N, (H + 2*KV) * D] (attention's layout): each
 * query head is rmsnorm'd with q_gamma [D], each key head with k_gamma [D], with eps; value
 * heads pass through. rstd is [N, H + KV], by row then head; normed (or NULL), [N, (H + KV)
 * * D], receives x rstd of the q and k heads; heads (or NULL), of the same shape, the q
 * and k heads themselves. The backward reads x: inp (heads false), or those heads. */
void ck_kernel_qknorm_forward(float *out, float *rstd, float *normed, float *heads,
                              const float *inp, const float *q_gamma, const float *k_gamma,
                              size_t N, size_t H, size_t KV, size_t D, double eps);
void ck_kernel_qknorm_backward(float *dinp, float *dq_gamma, float *dk_gamma, const float *dout,
                               const float *x, bool heads, const float *q_gamma,
                               const float *k_gamma, const float *rstd, size_t N, size_t H,
                               size_t KV, size_t D);

/* GELU, tanh approximation (as GPT-2). Saves its input. */
void ck_kernel_gelu_forward(float *restrict out, const float *restrict inp, size_t n);
void ck_kernel_gelu_backward(float *restrict dinp, const float *restrict inp,
                             const float *restrict dout, size_t n);
/* ReLU saves its output. */
void ck_kernel_relu_forward(float *restrict out, const float *restrict inp, size_t n);
void ck_kernel_relu_backward(float *restrict dinp, const float *restrict out,
                             const float *restrict dout, size_t n);
/* SiLU, x * sigmoid(x). Saves its input. */
void ck_kernel_silu_forward(float *restrict out, const float *restrict inp, size_t n);
void ck_kernel_silu_backward(float *restrict dinp, const float *restrict inp,
                             const float *restrict dout, size_t n);

/* Gemma 2's soft-capping, cap tanh(x / cap) (cap > 0). Saves its output. */
void ck_kernel_softcap_forward(float *out, const float *inp, float cap, size_t n);
void ck_kernel_softcap_backward(float *dinp, const float *out, const float *dout, float cap,
                                size_t n);

/* out = factor x (Gemma's embedding scale sqrt(C), for one). Saves nothing. */
void ck_kernel_scale_forward(float *restrict out, const float *restrict inp, float factor, size_t n);
void ck_kernel_scale_backward(float *restrict dinp, const float *restrict dout, float factor,
                              size_t n);

void ck_kernel_add_forward(float *restrict out, const float *restrict a, const float *restrict b,
                           size_t n);
void ck_kernel_add_backward(float *da, float *db, const float *dout, size_t n);
void ck_kernel_mul_forward(float *restrict out, const float *restrict a, const float *restrict b,
                           size_t n);
void ck_kernel_mul_backward(float *da, float *db, const float *dout, const float *a, const float *b,
                     size_t n);

/* SwiGLU's gate, fused: out = silu(gate) * up. Saves both inputs; dgate and dup may be one
 * buffer (a node reading one tensor twice). */
void ck_kernel_swiglu_forward(float *restrict out, const float *restrict gate,
                              const float *restrict up, size_t n);
void ck_kernel_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                               const float *up, size_t n);

/* GeGLU's gate (Gemma's MLP), fused: out = gelu(gate) * up with gelu's tanh form, as
 * gelu above. Saves both inputs; dgate and dup may be one buffer. */
void ck_kernel_geglu_forward(float *restrict out, const float *restrict gate,
                             const float *restrict up, size_t n);
void ck_kernel_geglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                              const float *up, size_t n);

/* The same gated units written out as two autograd ops (Hugging Face's MLPs, the hf
 * profile): act = silu(gate), or gelu(gate) with `gelu`, kept; out = act * up. Backward:
 * dup += dout act, dgate += dout up act'(gate). Either gradient may be NULL (not required),
 * and then what only it reads may be NULL too (gate and up for dgate, act for dup); dgate
 * and dup may be one buffer. */
void ck_kernel_glu_written_forward(float *out, float *act, const float *gate, const float *up,
                                   bool gelu, size_t n);
void ck_kernel_glu_written_backward(float *dgate, float *dup, const float *dout,
                                    const float *gate, const float *up, const float *act,
                                    bool gelu, size_t n);

/* GELU written out as GPT-2's NewGELU in PyTorch ops, 0.5 x (1 + tanh(...)): the output and
 * the tensors those ops keep, x / 2, the tanh and 1 + the tanh (the hf profile). The
 * backward reads them, through the tanh input's gradient in the workspace gu (n floats),
 * as autograd's chain of backward ops holds it. */
void ck_kernel_gelu_written_forward(float *out, float *half, float *tanh_out, float *sum,
                                    const float *inp, size_t n);
void ck_kernel_gelu_written_backward(float *dinp, float *gu, const float *dout, const float *inp,
                                     const float *half, const float *tanh_out, const float *sum,
                                     size_t n);

/* 16-bit floats by hand (C11 has no portable half type). From f32: round to nearest, ties
 * to even, overflow to infinity, NaN kept a (quiet) NaN; f16 keeps subnormals. To f32:
 * exact. */
uint16_t ck_kernel_f32_to_bf16(float x);
float ck_kernel_bf16_to_f32(uint16_t h);
uint16_t ck_kernel_f32_to_f16(float x);
float ck_kernel_f16_to_f32(uint16_t h);
/* Element i of a float array of dtype d (f32, bf16, f16), as an f32 (exact); storing x
 * there rounds it as above. The one place values change dtype. */
float ck_kernel_load(ck_dtype d, const void *p, size_t i);
void ck_kernel_store(ck_dtype d, void *p, size_t i, float x);

/* Conversion of n values from dtype `from` to `to` (f32, bf16, f16), rounding as above:
 * the cast op's kernels, and how sim/widen makes and stores back its f32 views. The
 * backward converts the gradient back and accumulates it in din's dtype: din = from(din +
 * f32(dout)), so an f32 din adds exactly. */
void ck_kernel_cast_forward(void *out, ck_dtype to, const void *inp, ck_dtype from, size_t n);
void ck_kernel_cast_backward(void *dinp, ck_dtype from, const void *dout, ck_dtype to, size_t n);

/* Inverted dropout: out = inp * keep / (1 - p), mask[i] = keep (0 or 1), keep drawn from
 * ck_rng_keep(key, i, p). p == 0 keeps everything. */
void ck_kernel_dropout_forward(float *out, uint8_t *mask, const float *inp, float p, ck_rng_key key,
                        size_t n);
void ck_kernel_dropout_backward(float *restrict dinp, const float *restrict dout,
                                const uint8_t *restrict mask, float p, size_t n);

/* Causal multi-head attention with grouped-query heads.
 * qkv is [B, T, (H + 2*KV) * D]: per token, H query heads, then KV key heads, then KV value
 * heads, each of D values; query head h uses key/value head h / (H / KV). out is
 * [B, T, H * D]. Scores are scaled by 1/sqrt(D); with cap > 0 they are then soft-capped to
 * cap tanh(s / cap) (Gemma 2); position t attends to 0..t. Dropout with probability p (key,
 * element = index in [B, H, T, T]) applies to the probabilities.
 *
 * Standard form: saves probs [B, H, T, T] (softmax), with cap > 0 capped (the tanh, same
 * shape; NULL otherwise), and when p > 0 mask (u8) and dropped (probs after dropout) of the
 * same shape; workspace: scores [B, H, T, T] f32, forward and backward. Entries above the
 * diagonal of probs, capped and dropped are 0. */
void ck_kernel_attention_forward(float *out, float *probs, uint8_t *mask, float *dropped,
                                 float *capped, const float *qkv, float *ws, size_t B, size_t T,
                                 size_t H, size_t KV, size_t D, float p, float cap,
                                 ck_rng_key key);
void ck_kernel_attention_backward(float *dqkv, const float *dout, const float *qkv,
                                  const float *probs, const uint8_t *mask, const float *dropped,
                                  const float *capped, float *ws, size_t B, size_t T, size_t H,
                                  size_t KV, size_t D, float p, float cap, ck_rng_key key);

/* Flash form: keeps no [T, T] matrix. Saves lse [B, H, T] (log-sum-exp of each row of
 * scaled, capped scores) and reads its own output in backward; workspace: T floats
 * forward, 2*T floats backward (T used: the running row maxima forward, the rows' dout .
 * out backward). It computes on tiles of 64 queries by 64 keys whose scores live on the
 * stack (16 KiB forward, 32 KiB backward, whatever T: a GPU kernel's on-chip tiles), with
 * an online softmax across key tiles. The backward recomputes each tile of probabilities
 * (and the cap) from q, k and lse, and the dropout mask from the key, so it matches the
 * standard form's gradients up to rounding. */
void ck_kernel_attention_flash_forward(float *out, float *lse, const float *qkv, float *ws,
                                       size_t B, size_t T, size_t H, size_t KV, size_t D, float p,
                                       float cap, ck_rng_key key);
void ck_kernel_attention_flash_backward(float *dqkv, const float *dout, const float *qkv,
                                        const float *out, const float *lse, float *ws, size_t B,
                                        size_t T, size_t H, size_t KV, size_t D, float p,
                                        float cap, ck_rng_key key);

/* Rotary position embedding on packed qkv [B, T, (H + 2*KV) * D] (attention's layout), in
 * pairs (2j, 2j+1) of each query and key head, the interleaved form (RoFormer, Meta's
 * llama): at position t, with a_j = t * theta^(-2j/D) for j in [0, D/2),
 *   out[2j]   = x[2j] cos a_j - x[2j+1] sin a_j
 *   out[2j+1] = x[2j] sin a_j + x[2j+1] cos a_j;
 * value heads pass through. Saves nothing: the backward rotates the gradient by -a_j. */
void ck_kernel_rope_forward(float *out, const float *inp, size_t B, size_t T, size_t H, size_t KV,
                            size_t D, double theta);
void ck_kernel_rope_backward(float *dinp, const float *dout, size_t B, size_t T, size_t H,
                             size_t KV, size_t D, double theta);

/* A LoRA adapter added to the base projection y [N, OC] of x [N, C], s = alpha / rank:
 *   mid = x A^T  (A [P*R, C], mid [N, P*R], saved),
 *   out_p = y_p + s mid_p B_p^T  for each part p of out's columns (B [OC, R]),
 * where part p spans `width[p]` columns, in order, and reads mid's columns [p R, (p+1) R):
 * one part is a plain adapter; three (q, k, v of a packed qkv) give each its own. The
 * backward: dy += dout, dmid_p = s dout_p B_p (workspace [N, P*R]), dB_p += s dout_p^T mid_p,
 * dx += dmid A, dA += dmid^T x (dx and dy may be NULL: no gradient). */
void ck_kernel_lora_forward(float *out, float *mid, const float *x, const float *y,
                            const float *A, const float *B, size_t N, size_t C, size_t OC,
                            size_t R, size_t n_parts, const size_t *width, float s);
void ck_kernel_lora_backward(float *dx, float *dy, float *dA, float *dB, float *dmid,
                             const float *dout, const float *x, const float *mid, const float *A,
                             const float *B, size_t N, size_t C, size_t OC, size_t R,
                             size_t n_parts, const size_t *width, float s);
/* Mixtral's sparse mixture-of-experts block (Hugging Face's MixtralSparseMoeBlock), on
 * x [N, C] with E experts, K per row, each expert a SwiGLU of width F:
 *   p = softmax(x router^T) (f32), the K largest p per row (ties to the lower expert),
 *   w = those p / their sum, out[n] = sum_k w_k * w2_e (silu(w1_e x[n]) * w3_e x[n]).
 * Routed rows (a row and one of its experts, R = N*K of them) are grouped by expert, then
 * by top-k position, then by row, as HF's torch.where over its one-hot mask orders them.
 * Weights: router [E, C], w1 and w3 [E, F, C], w2 [E, C, F]; their gradients likewise.
 * Workspace, as planner/op sizes it: forward the int64 one-hot mask [E, K, N], then the
 * logits [N, E] and the routing weights [N, K] (grouped, planner/op sizes it as PyTorch's
 * grouped experts hold theirs, at least this much, of which the kernel uses the start);
 * backward one expert's gradients [N, C], [N, F], [N, F] (at most N rows reach an expert),
 * then those of the routing weights [N, K] and of the logits [N, E]. */
typedef struct {
    float *router, *w1, *w3, *w2;
} ck_kernel_moe_weights;

/* What the forward keeps for the backward (planner/op's moe slots). */
typedef struct {
    float *probs;         /* [N, E] softmax of the router logits */
    int64_t *topk_index;  /* [N, K] the experts chosen, most probable first */
    float *topk_probs;    /* [N, K] their probabilities */
    float *topk_sum;      /* [N] the sum of those */
    int64_t *route_index; /* [R, 2] per routed row: its row of x, its top-k position */
    float *route_weight;  /* [R] its renormalised probability */
    float *expert_in;     /* [R, C] its row of x */
    float *gate, *act, *up, *hidden; /* [R, F] w1 x, silu(w1 x), w3 x, act * up */
    float *expert_out;    /* [R, C] w2 hidden */
    float *weighted;      /* [R, C] expert_out times route_weight, added into the output
                           * (NULL grouped: nothing keeps it) */
} ck_kernel_moe_saved;

/* The moe tensors among a node's internal saved tensors, indexed by ck_slot. */
ck_kernel_moe_saved ck_kernel_moe_slots(void *const *saved);

void ck_kernel_moe_forward(float *out, const ck_kernel_moe_saved *s, const float *inp,
                           const ck_kernel_moe_weights *w, void *ws, size_t N, size_t C,
                           size_t E, size_t K, size_t F);
/* dinp (NULL: none) and dw accumulate; the routing is the forward's, read from s. */
void ck_kernel_moe_backward(float *dinp, const ck_kernel_moe_weights *dw, const float *dout,
                            const ck_kernel_moe_saved *s, const float *inp,
                            const ck_kernel_moe_weights *w, void *ws, size_t N, size_t C,
                            size_t E, size_t K, size_t F);

/* The grouped experts' backward phase by phase (planner/op's ck_moe_phase), through the
 * gradients between the phases, d (by ck_moe_temp, each zeroed when its phase makes it);
 * dinp is written by CK_MOE_GATHER and CK_MOE_ROUTER only, dw each by the phase making it. */
void ck_kernel_moe_backward_phase(size_t phase, float *dinp, const ck_kernel_moe_weights *dw,
                                  const float *dout, const ck_kernel_moe_saved *s,
                                  const float *inp, const ck_kernel_moe_weights *w,
                                  float *const *d, size_t N, size_t C, size_t E, size_t K, size_t F);

/* Adam's update (torch.optim.Adam's defaults but the learning rate; AdamW's decoupled
 * weight decay as decay = lr * weight_decay, 0 for Adam), step t >= 1, in f32:
 *   p -= decay p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *   p -= lr (m / c1) / (sqrt(v / c2) + eps),  c1 = 1 - b1^t, c2 = 1 - b2^t. */
#define CK_KERNEL_ADAM_B1 0.9f
#define CK_KERNEL_ADAM_B2 0.999f
#define CK_KERNEL_ADAM_EPS 1e-8f

typedef struct {
    float lr, decay, c1, c2;
} ck_kernel_adam_step;

ck_kernel_adam_step ck_kernel_adam_at(uint64_t t, float lr, float decay);
/* n parameters p with gradients g and moments m and v, updated in place. */
void ck_kernel_adam(float *restrict p, const float *restrict g, float *restrict m,
                    float *restrict v, size_t n, const ck_kernel_adam_step *st);

/* Cross-entropy of logits [N, V] against targets [N]: returns the mean loss and writes the
 * row log-sum-exp lse [N] (fused, one kernel) or, as PyTorch's unfused F.cross_entropy,
 * the log-probabilities logp [N, V] = logits - lse (log_softmax's output): one of them is
 * NULL. */
float ck_kernel_cross_entropy_forward(float *lse, float *logp, const float *logits,
                                      const int32_t *targets, size_t N, size_t V);
/* dlogits += (softmax(logits) - onehot(target)) / N, from logits and lse, or from logp
 * alone (logits then unread, NULL allowed). */
void ck_kernel_cross_entropy_backward(float *dlogits, const float *lse, const float *logp,
                                      const float *logits, const int32_t *targets, size_t N, size_t V);
/* Mean squared error over n values: mean((pred - target)^2); its backward accumulates
 * dpred += 2 (pred - target) / n. */
float ck_kernel_mse_forward(const float *pred, const float *target, size_t n);
void ck_kernel_mse_backward(float *dpred, const float *pred, const float *target, size_t n);

#endif
