/* hf_config: reading a Hugging Face config.json into the sizes and switches of its family
 * (planner/hf builds the graph from them). Each family's keys, defaults and fixed choices
 * are here, with the modeling code they come from (docs/model-format.md section 8). */
#ifndef CK_HF_CONFIG_H
#define CK_HF_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "planner/err.h"

typedef enum { CK_HF_MLP_GELU, CK_HF_MLP_RELU, CK_HF_MLP_SWIGLU, CK_HF_MLP_GEGLU, CK_HF_MLP_MOE } ck_hf_mlp;

/* What a family's modeling code fixes, whatever the config says. */
typedef struct {
    const char *model_type;
    const char *eps_key;  /* the config's key for the norms' epsilon, or NULL: none */
    double eps;           /* its default, the family's config class's (or nn.LayerNorm's) */
    bool layernorm;       /* else RMSNorm */
    uint64_t pos_offset;  /* learned positions: rows before position 0 (OPT's 2) */
    bool learned_pos;     /* else rotary */
    ck_hf_mlp mlp;
    bool qknorm;          /* Qwen3's q_norm / k_norm */
    bool sandwich_norms;  /* Gemma 2: a norm after attention and after the MLP too */
    bool embed_scale;     /* Gemma: embeddings times sqrt(hidden_size) */
    bool softmax_f32;     /* eager attention's softmax is upcast to f32 */
    bool fused_qkv;       /* one q/k/v module (GPT-2's c_attn, Phi-3's qkv_proj): one adapter */
    bool flat_mlp;        /* the MLP runs on the hidden states reshaped to [B*T, C] (OPT's
                           * decoder layer; GPT-2's Conv1D, x.view(-1, nx) then addmm): its
                           * linears' input gradients are not views */
    bool windowed;        /* every layer's attention reads the config's sliding_window */
    uint64_t window;      /* ... and its default when the key is absent (null: none) */
    uint64_t kv_heads;    /* num_key_value_heads when the key is absent (its config class's
                           * default; 0: the heads); null is the heads, as __post_init__ says */
    uint64_t theta;       /* rope_theta when absent (default_theta; 0: the rope op's 10000) */
} ck_hf_family;

/* A config's sizes and switches. Dims the config leaves to a rule (KV = H, D = C/H,
 * F = 4C) are 0, so that the model says the rule. */
typedef struct {
    const ck_hf_family *family;
    uint64_t C, H, KV, D, F, V, L, P, E, K;
    bool tie, use_cache, qkv_bias, o_bias, mlp_bias;
    double attn_p, resid_p, embd_p;        /* dropout probabilities */
    uint64_t theta;                        /* rotary base; 0: the op's default */
    double norm_eps;                       /* added to the variance by every norm */
    double attn_cap, final_cap;            /* Gemma 2's soft-capping; 0: none */
    uint64_t window;                       /* sliding window of keys; 0: none */
} ck_hf_config;

/* The model_types understood, as "gpt2, opt, ...". */
const char *ck_hf_config_families(void);

/* Reads config (of `file`); CK_ERR_INPUT naming the file and the key for a missing or
 * mistyped field, and listing the families for an unknown model_type. */
int ck_hf_config_read(const cJSON *config, const char *file, ck_hf_config *out, ck_err *err);

#endif
