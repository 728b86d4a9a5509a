/* op: the op table. One entry per op says what a node of that op needs, makes, keeps for
 * its backward and costs. Chain derivation reads it to size stages; the executor allocates
 * exactly what it declares, which is what lets predicted and measured memory agree.
 *
 * The rules behind every number are written out in docs/model-format.md. */
#ifndef CK_OP_H
#define CK_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/dtype.h"
#include "planner/err.h"
#include "planner/ttype.h"

typedef enum {
    CK_OP_EMBEDDING, CK_OP_LINEAR, CK_OP_LAYERNORM, CK_OP_RMSNORM, CK_OP_GELU, CK_OP_RELU,
    CK_OP_SILU, CK_OP_ADD, CK_OP_MUL, CK_OP_DROPOUT, CK_OP_ATTENTION, CK_OP_ROPE,
    CK_OP_SWIGLU, CK_OP_CAST, CK_OP_LORA, CK_OP_QKNORM, CK_OP_GEGLU, CK_OP_SOFTCAP, CK_OP_SCALE,
    CK_OP_MOE, CK_OP_CROSS_ENTROPY, CK_OP_MSE /* losses last */
} ck_op_kind;
/* Not a member of the enum, so that switches over kinds need no case for it; the op table's
 * size is checked against it. */
#define CK_N_OP_KINDS ((size_t)CK_OP_MSE + 1)

/* Resolved attributes of a node; each op reads only its own. */
typedef struct {
    uint64_t vocab, dim, positions; /* embedding (positions 0: no position table) */
    uint64_t out;                   /* linear */
    bool bias, tied;                /* linear; tied: shares the embedding's table */
    bool flat;                      /* linear, lora: its input is rows already (OPT's MLP
                                     * reshapes the hidden states to [B*T, C] first), so the
                                     * input's gradient is a tensor of its own, not a 2-D
                                     * product viewed back (ck_op_info.grad_view) */
    uint64_t heads, kv_heads;       /* attention, rope, lora, qknorm */
    uint64_t head_dim;              /* attention, qknorm: stated, checked (0: not given) */
    uint64_t theta;                 /* rope: the base of its frequencies */
    ck_dtype to;                    /* cast: the output's dtype */
    bool flash;                     /* attention */
    bool expand_kv;                 /* attention, not flash: k and v copied out to every
                                     * query head, and the copies kept instead of the packed
                                     * qkv (Hugging Face's repeat_kv before eager attention) */
    ck_dtype softmax_dtype;         /* attention: f32 or the input's (given as an integer
                                     * dtype, "not given", until ck_op_infer fills it) */
    double p;                       /* dropout's p, attention's dropout */
    bool cpu;                       /* dropout, attention: as PyTorch runs them on the CPU,
                                     * where dropout keeps its noise tensor in the input's
                                     * dtype (CUDA's native_dropout keeps a bool mask, the
                                     * default; ckplan's kernels write the mask's bytes in
                                     * it), and sdpa with dropout takes the math path:
                                     * attention is then not flash */
    uint64_t rank;                  /* lora: the adapter's rank */
    double alpha;                   /* lora: out = y + alpha / rank * B A x */
    double cap;                     /* softcap's cap; attention's softcap (0: none) */
    double factor;                  /* scale */
    double eps;                     /* norms: added to the variance */
    bool fused;                     /* rmsnorm, gelu, swiglu, geglu, qknorm (default true),
                                     * cross_entropy (default false): one kernel, or the
                                     * PyTorch ops Hugging Face writes out (planner/impl) */
    bool upcast;                    /* cross_entropy unfused: on logits.float(), as
                                     * Hugging Face's ForCausalLMLoss; lora: its adapters
                                     * kept in f32, as PEFT keeps them (its
                                     * autocast_adapter_dtype), each projection casting x to
                                     * theirs and keeping its own copy (default false) */
    /* Not read from the file: the training's parameter dtype and master weights, which the
     * loader sets on every node (lora under upcast: beside 16-bit weights that nothing casts
     * the copies are f32; under autocast's f32 weights, autocast's 16-bit ones; a framework
     * that keeps f32 masters computes the adapters in 16 bits, and copies nothing). */
    ck_dtype weights;
    bool master_weights;
    uint64_t experts, top_k, hidden; /* moe: E experts, K of them per row, F wide */
    bool grouped;                   /* moe: the routed rows sorted by expert and run as grouped
                                     * products (transformers 5's default experts
                                     * implementation, grouped_mm), not one expert at a time
                                     * (its "eager" loop, and transformers 4's) */
    /* Megatron's sequence and context parallelism (docs/parallel.md); 0: not given (1). */
    uint64_t gather;  /* linear: its input is 1/gather of the sequence (dimension 1), which
                       * it all-gathers, into a transient, before the product */
    uint64_t scatter; /* linear, embedding: its output is reduce-scattered along the
                       * sequence to 1/scatter of it */
    uint64_t context; /* attention: the keys and values span `context` times the queries'
                       * sequence, held by the other context-parallel ranks */
    uint64_t window;  /* attention: each query sees the last `window` keys (Mistral's
                       * sliding window; 0: all). ckplan's kernels attend to every earlier
                       * key: the window only decides whether sdpa is handed a mask */
    bool sdpa_mask;   /* attention, flash: as PyTorch's sdpa, which converts an explicit mask
                       * (there is one when the keys reach the window) to the query's dtype
                       * and keeps it for the backward, one [B, 1, T, keys] a layer */
    bool v_view;      /* attention, flash: v is a view of the packed projection, while q and
                       * k, rotated by a cat, are tensors of their own (transformers' Phi-3):
                       * sdpa keeps all of the projection through v besides q and k, and its
                       * output, laid out by head like q, is copied for the next product */
    bool gqa_math;    /* attention, flash: as PyTorch's CUDA sdpa, which has no fused kernel
                       * for grouped kv heads in f32 (flash takes 16 bits only, the
                       * memory-efficient kernel no grouped heads): handed them with no mask,
                       * as transformers hands them, it runs its math path, which keeps the
                       * scores and k and v repeated to every head, as eager attention does
                       * (with expand_kv); infer turns flash off */
    bool eager_grads; /* attention, not flash: as autograd runs transformers' eager attention,
                       * whose softmax backward makes the scores' gradient beside the
                       * probabilities' (not in place): the backward's workspace holds both */
    bool step_args;   /* attention: as transformers' model forward, which makes the causal
                       * mask (eager attention's in the activations' dtype; sdpa's, a bool
                       * one, only once the keys reach the window) and the position ids once,
                       * before its first layer, and hands them to every layer
                       * (ck_op_info.step_bytes) */
    bool step_tables; /* rope: as transformers' rotary embedding, whose cos and sin tables,
                       * made once for all layers, each layer's products keep */
    bool leaf;        /* embedding: as transformers' enable_input_require_grads(), which
                       * gradient_checkpointing_enable() and PEFT's LoRA preparation run: a
                       * frozen table's output is a leaf that requires grad (so the ops after
                       * it keep what its gradient needs), held by autograd's graph to the
                       * backward's end; with positions, the lookup is a tensor apart from
                       * the output (CK_STEP_LEAF) */
    /* Not read from the file: whether attention runs as sdpa (the file's flash), which
     * infer sets before it turns flash off where sdpa runs its math path: the mask
     * transformers makes is sdpa's, not eager attention's. */
    bool sdpa;
} ck_attrs;

typedef enum {
    CK_ATTR_DIM,  /* a positive integer, dim name or product ("4*C") */
    CK_ATTR_BOOL,
    CK_ATTR_PROB, /* a number in [0, 1) */
    CK_ATTR_POSITIVE, /* a finite number > 0; a default of 0 means "not given" */
    CK_ATTR_DTYPE /* a float dtype's name: "f32", "bf16", "f16" */
} ck_attr_kind;

typedef struct {
    const char *name;
    ck_attr_kind kind;
    bool required;
    double dflt;   /* when absent: a DIM default of 0 means "not given"; a DTYPE's is a
                    * ck_dtype, an integer one meaning "not given" */
    size_t offset; /* of the field in ck_attrs: uint64_t, bool, double or ck_dtype by kind */
} ck_attr_spec;

#define CK_OP_MAX_ARITY 2
#define CK_OP_MAX_ATTRS 16
#define CK_OP_MAX_SAVED 15 /* moe's: its input and up to 14 internal tensors */
#define CK_OP_MAX_PARAMS 4 /* moe's router, w1, w3, w2 */
#define CK_PARAM_MAX_RANK 3 /* moe's experts: E matrices in one tensor */

typedef enum {
    CK_SAVE_INPUT,   /* the node's input number `input` */
    CK_SAVE_OUTPUT,  /* the node's output */
    CK_SAVE_INTERNAL /* a tensor only this node makes and its backward reads */
} ck_save_kind;

/* The internal tensors an op's forward makes for its backward, by what they hold. */
typedef enum {
    CK_SLOT_MEAN,    /* per-row mean (layernorm) */
    CK_SLOT_RSTD,    /* per-row 1/sqrt(variance + eps) (norms) */
    CK_SLOT_MASK,    /* u8 dropout mask */
    CK_SLOT_PROBS,   /* attention probabilities */
    CK_SLOT_DROPPED, /* attention probabilities after dropout */
    CK_SLOT_LSE,     /* per-row log-sum-exp (flash attention, cross_entropy) */
    CK_SLOT_LORA_MID, /* lora: A x, the adapter's rank-wide middle */
    CK_SLOT_ADAPTER_IN, /* lora with upcast on 16-bit x: each adapted projection's own copy
                         * of x, which its lora_A keeps instead of x (ckplan's kernel reads
                         * the last, and holds the others, q's and k's, for their bytes) */
    CK_SLOT_CAPPED,     /* attention with softcap: tanh(scores / softcap) */
    CK_SLOT_PROBS_CAST, /* attention with softmax in f32: probs cast to the input's dtype */
    CK_SLOT_NORMED,     /* rmsnorm written out: x rstd, which the product with gamma keeps */
    CK_SLOT_X_F32,      /* rmsnorm written out on 16-bit x: x.float(), which the square and
                         * the product with rstd keep instead of x; qknorm written out: that
                         * of the q and k heads, on any x (q and k are tensors of their own,
                         * q_proj's and k_proj's outputs, where ckplan packs them with v) */
    CK_SLOT_LOGP,       /* cross_entropy unfused: log_softmax's output, which nll_loss keeps */
    CK_SLOT_QKV_EXPANDED, /* attention with expand_kv: q, then k and v repeated to every
                           * query head, packed as qkv with kv_heads = heads */
    CK_SLOT_GELU_HALF,  /* gelu written out (GPT-2's NewGELU): x / 2, */
    CK_SLOT_GELU_TANH,  /* tanh(sqrt(2/pi) (x + 0.044715 x^3)) */
    CK_SLOT_GELU_SUM,   /* and 1 + that, which the last product keeps beside x / 2 */
    CK_SLOT_GLU_ACT,    /* swiglu, geglu written out: act(gate), kept for up's gradient */
    CK_SLOT_SDPA_MASK,  /* attention with sdpa_mask: the additive mask sdpa keeps (held for
                         * its bytes: ckplan's kernels apply the causal mask themselves) */
    CK_SLOT_QK_APART,   /* attention with v_view: the rotated q and k, [B, T, (H + KV) D], */
    CK_SLOT_OUT_HEADS,  /* and the output as sdpa lays it out, by head (both held for their
                         * bytes, as PyTorch keeps them: ckplan's kernels read the packed
                         * input and the output) */
    /* moe, per row of its input: */
    CK_SLOT_ROUTER_PROBS, /* f32 softmax of the router logits */
    CK_SLOT_TOPK_INDEX,   /* int64: the K experts chosen */
    CK_SLOT_TOPK_PROBS,   /* f32: their probabilities before renormalisation */
    CK_SLOT_TOPK_SUM,     /* f32: the sum of those */
    /* moe, per routed row (a row and one of its experts), grouped by expert: */
    CK_SLOT_ROUTE_INDEX,  /* int64 pairs: the row, its top-k position (grouped: the sort's
                           * permutation and the rows it gathers, which the two gathers
                           * keep) */
    CK_SLOT_ROUTE_ORDER,  /* grouped, int64: the inverse permutation, which the gather back
                           * to token order keeps (held for its bytes) */
    CK_SLOT_EXPERT_OFFSETS, /* grouped, int32 per expert: where its rows end, which the
                             * grouped products keep (held for its bytes) */
    CK_SLOT_ROUTE_WEIGHT, /* the renormalised probability it is weighted by */
    CK_SLOT_EXPERT_IN,    /* the row of the input, gathered */
    CK_SLOT_EXPERT_GATE,  /* w1 x */
    CK_SLOT_EXPERT_ACT,   /* silu(w1 x) */
    CK_SLOT_EXPERT_UP,    /* w3 x */
    CK_SLOT_EXPERT_HIDDEN,/* silu(w1 x) * w3 x */
    CK_SLOT_EXPERT_OUT,   /* w2 of that */
    CK_SLOT_EXPERT_WEIGHTED, /* not grouped: that times the routing weight, index_add_'s
                              * source, which it keeps */
    CK_N_SLOTS
} ck_slot;

/* moe grouped's backward (ck_phase), as transformers' grouped_mm experts run it under
 * autograd: its phases in order, and the gradients between them (R = N K routed rows, in
 * the forward's order, grouped by expert). */
typedef enum {
    CK_MOE_UNSORT,    /* sum, view and the gather back to token order: dout to routed rows */
    CK_MOE_WEIGHTING, /* the product with the routing weights */
    CK_MOE_DOWN,      /* w2's grouped product */
    CK_MOE_GLU,       /* act(gate) * up */
    CK_MOE_SILU,      /* act(gate) */
    CK_MOE_CAT,       /* chunk's backward: gate's and up's gradients side by side */
    CK_MOE_UP,        /* w1 and w3's grouped product */
    CK_MOE_SCATTER,   /* the routing weights' gather, sorted by expert */
    CK_MOE_GATHER,    /* the rows' gather: the input's gradient */
    CK_MOE_ROUTING,   /* renormalisation, top-k and softmax */
    CK_MOE_ROUTER,    /* the router's product, added into the input's gradient */
    CK_MOE_N_PHASES
} ck_moe_phase;

typedef enum {
    CK_MOE_D_SORTED,   /* f32 [R, C]: the output's gradient at each routed row */
    CK_MOE_D_OUT,      /* [R, C]: expert_out's */
    CK_MOE_D_WEIGHT,   /* f32 [R]: the routing weight's */
    CK_MOE_D_HIDDEN,   /* [R, F] */
    CK_MOE_D_ACT,      /* [R, F] */
    CK_MOE_D_UP,       /* [R, F] */
    CK_MOE_D_GATE,     /* [R, F] */
    CK_MOE_D_GATE_UP,  /* [R, 2F]: the first grouped product's output's, gate then up */
    CK_MOE_D_IN,       /* [R, C]: the gathered rows' */
    CK_MOE_D_TOPK,     /* f32 [N, K]: the routing weights', by row */
    CK_MOE_D_LOGITS,   /* f32 [N, E] */
    CK_MOE_N_TEMPS
} ck_moe_temp;

/* Which gradients a saved tensor is needed for, as a set of bits: CK_NEED_INPUT(i) for input
 * i's, CK_NEED_PARAMS for the node's parameters'. A node keeps a saved tensor only when one
 * of the gradients it is needed for is required (planner/model: requires-grad), as PyTorch
 * autograd's generated code saves a tensor only when a gradient that reads it is needed. */
#define CK_NEED_INPUT(i) (1u << (i))
#define CK_NEED_PARAMS (1u << CK_OP_MAX_ARITY)
#define CK_NEED_ANY (CK_NEED_PARAMS | (CK_NEED_PARAMS - 1))

typedef struct {
    ck_save_kind kind;
    size_t input;  /* CK_SAVE_INPUT */
    ck_slot slot;  /* CK_SAVE_INTERNAL */
    ck_ttype type; /* of the saved tensor, whatever its kind */
    uint64_t bytes;
    unsigned needed_for; /* CK_NEED_* bits; CK_NEED_ANY unless the op says otherwise */
    bool dies_early;     /* when no gradient needs it, it is dead before the forward's
                          * workspace peaks, so it lies in that workspace (from
                          * ck_op_info.early_scratch_at) instead of beyond it */
} ck_saved;

/* How a parameter starts: 0.02 times a unit normal, all ones, all zeros. */
typedef enum { CK_INIT_NORMAL, CK_INIT_ONES, CK_INIT_ZEROS } ck_init;

/* One named parameter tensor of a node, after llm.c's layout ("wte" [vocab, dim], "weight"
 * [out, in], "bias" [out], "gamma" [dim], moe's "w1" [experts, hidden, dim], ...). A node's parameters lie one after another,
 * in the op's order, in param_dtype; `offset` is the first element's among the node's
 * n_params. An absent optional one (a linear's bias with "bias": false, an embedding's wpe
 * without positions) has numel 0. A tied one is parameter 0 of node->tied_to (its table)
 * and counts nothing here: numel 0, shape still given. */
typedef struct {
    const char *name;
    ck_init init;
    bool tied;
    size_t rank;
    uint64_t dim[CK_PARAM_MAX_RANK];
    uint64_t numel, offset;
} ck_param;

/* The tensors transformers' model forward makes once, before its first layer, and hands
 * to every layer (planner/lower says how long each lives). */
typedef enum {
    CK_STEP_MASK,      /* the causal mask, one per distinct window: read by the layers, kept
                        * by no product, so held only by the model's forward and by
                        * torch.utils.checkpoint with a checkpointed layer's arguments */
    CK_STEP_POSITIONS, /* the position ids, int64 [1, T]: the same */
    CK_STEP_TABLES,    /* the rotary cos and sin tables: kept by every layer's products too */
    CK_STEP_LEAF,      /* a frozen embedding's token lookup, before the positions are added,
                        * made a leaf that requires grad by enable_input_require_grads():
                        * held from the embedding's forward to the backward's end (not a
                        * tensor the layers read) */
    CK_N_STEPS
} ck_step;

/* PyTorch's CPU generator state (torch.get_rng_state(), an mt19937's and the normal
 * cache's), which torch.utils.checkpoint keeps per checkpointed call by default
 * (preserve_rng_state). A CUDA generator's state is a CPU tensor too: nothing on the GPU. */
#define CK_TORCH_CPU_RNG_STATE_BYTES 5056

/* A backward that PyTorch runs as a sequence of autograd nodes, each releasing what it
 * kept as it ends (moe's grouped experts), as phases: each makes some of the gradients
 * that pass between them (the op's temps), parameter gradients and the inputs'; runs with
 * ws_bytes of workspace; then frees the temps it was the last to read and the saved
 * tensors no later phase reads (planner/program emits these events; sim/kernel runs the
 * phases one by one). */
#define CK_OP_MAX_TEMPS CK_MOE_N_TEMPS /* moe's */
#define CK_OP_MAX_PHASES CK_MOE_N_PHASES

typedef struct {
    ck_ttype type;
    uint64_t bytes;
} ck_temp;

typedef struct {
    uint64_t ws_bytes;
    unsigned makes, frees; /* bits over the op's temps */
    uint64_t releases;     /* bits over ck_slot: internal saved tensors freed after it */
    unsigned params;       /* bits over parameter index: the gradients it makes */
    bool input_grads;      /* it makes the inputs' gradients */
} ck_phase;

/* Everything a concrete node costs. Workspace is memory an op's kernel allocates and frees
 * within one forward (fwd_ws) or backward (bwd_ws) call. A phased backward's bwd_ws is a
 * bound: what its phases hold beside their workspace at most, for planners' sums. */
typedef struct {
    size_t n_saved;
    ck_saved saved[CK_OP_MAX_SAVED];
    size_t n_param_tensors; /* the op's parameters, always all of them, by index */
    ck_param params[CK_OP_MAX_PARAMS];
    uint64_t n_params;      /* elements this node owns: the sum of params[].numel */
    uint64_t id_limit[CK_OP_MAX_ARITY]; /* integer input i takes values below it; 0: none */
    /* Bit i: the gradient the backward makes for input i is, under PyTorch, a view of a
     * 2-D product (a linear's on an input of rank > 2, reshaped back), which autograd's
     * InputBuffer cannot add a later gradient into in place (planner/program). */
    unsigned grad_view;
    uint64_t fwd_ws_bytes, bwd_ws_bytes;
    uint64_t early_scratch_at; /* where the forward's kernel stops using its workspace */
    size_t n_temps, n_phases; /* a phased backward's (0: the backward is one call) */
    ck_temp temps[CK_OP_MAX_TEMPS];
    ck_phase phases[CK_OP_MAX_PHASES];
    uint64_t fwd_flops, bwd_flops;
    uint64_t fwd_bytes_moved, bwd_bytes_moved;
    /* The step tensors it reads, by ck_step (0: none), and the window its mask is for: the
     * model has one mask per distinct window (ck_model.step_bytes). */
    uint64_t step_bytes[CK_N_STEPS];
    uint64_t step_window;
    /* What torch.utils.checkpoint keeps for a checkpointed layer that holds this node,
     * beside the layer's arguments: the CPU generator's state (0: nothing). */
    uint64_t checkpoint_bytes;
} ck_op_info;

typedef struct {
    ck_op_kind kind;
    const char *name;
    size_t arity;
    bool is_loss; /* scalar output; ends the graph */
    bool draws;   /* its forward draws a dropout stream (the executor's rng keys) */
    uint64_t flops_per_element[2]; /* forward, backward: per output (a loss's: per input) element */
    size_t n_attrs;
    ck_attr_spec attrs[CK_OP_MAX_ATTRS];
} ck_op_def;

/* The op called name, or NULL. */
const ck_op_def *ck_op_find(const char *name);
/* Names of all ops, comma separated, for messages. */
const char *ck_op_names(void);

/* Sets every attribute of op to its default. */
void ck_op_default_attrs(const ck_op_def *op, ck_attrs *a);

/* Checks a node's attributes against its input types, fills attributes whose default
 * depends on others (kv_heads), and sets *out to the output's type; activations made from
 * integers (embedding) take dtype `act`. Errors name `file`, the node's JSON `path` with
 * the input or attribute at fault, and what was expected. */
int ck_op_infer(const ck_op_def *op, ck_attrs *a, ck_dtype act, const ck_ttype *in,
                ck_ttype *out, const char *file, const char *path, ck_err *err);

/* Fills *info for a node that ck_op_infer accepted; fails only on 64-bit overflow. */
int ck_op_describe(const ck_op_def *op, const ck_attrs *a, const ck_ttype *in,
                   const ck_ttype *out, ck_op_info *info, const char *file, const char *path,
                   ck_err *err);

#endif
