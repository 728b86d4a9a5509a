#include "planner/hf_config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "planner/json.h"

/* The structure of each family in transformers' modeling_<type>.py (docs/model-format.md
 * section 8 gives the source of each switch), and the defaults of its config class
 * (configuration_<type>.py: the __init__ fields, __post_init__ and default_theta) for the
 * keys a config may leave out; tests/cli/hf_defaults.py checks them against transformers. */
static const ck_hf_family families[] = {
    {"gpt2", "layer_norm_epsilon", 1e-5, .layernorm = true, .learned_pos = true, .mlp = CK_HF_MLP_GELU, .fused_qkv = true, .flat_mlp = true},
    {"opt", NULL, 1e-5, .layernorm = true, .learned_pos = true, .pos_offset = 2, .mlp = CK_HF_MLP_RELU,
     .flat_mlp = true},
    {"llama", "rms_norm_eps", 1e-6, .mlp = CK_HF_MLP_SWIGLU, .softmax_f32 = true},
    {"mistral", "rms_norm_eps", 1e-6, .mlp = CK_HF_MLP_SWIGLU, .softmax_f32 = true, .windowed = true,
     .window = 4096, .kv_heads = 8},
    {"mixtral", "rms_norm_eps", 1e-5, .mlp = CK_HF_MLP_MOE, .softmax_f32 = true, .windowed = true,
     .kv_heads = 8, .theta = 1000000},
    {"qwen2", "rms_norm_eps", 1e-6, .mlp = CK_HF_MLP_SWIGLU, .softmax_f32 = true, .kv_heads = 32},
    {"qwen3", "rms_norm_eps", 1e-6, .mlp = CK_HF_MLP_SWIGLU, .softmax_f32 = true, .qknorm = true,
     .kv_heads = 32},
    {"phi3", "rms_norm_eps", 1e-5, .mlp = CK_HF_MLP_SWIGLU, .softmax_f32 = true, .fused_qkv = true,
     .windowed = true},
    {"gemma", "rms_norm_eps", 1e-6, .mlp = CK_HF_MLP_GEGLU, .softmax_f32 = true, .embed_scale = true,
     .kv_heads = 16},
    {"gemma2", "rms_norm_eps", 1e-6, .mlp = CK_HF_MLP_GEGLU, .softmax_f32 = true, .embed_scale = true,
     .sandwich_norms = true, .kv_heads = 4},
};
#define N_FAMILIES (sizeof families / sizeof families[0])

const char *ck_hf_config_families(void)
{
    return "gpt2, opt, llama, mistral, mixtral, qwen2, qwen3, phi3, gemma, gemma2";
}

typedef struct {
    const cJSON *cfg;
    const char *file;
    ck_err *err;
} reader;

/* A key that is absent or null: the config leaves it to the default. */
static const cJSON *present(const reader *r, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->cfg, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static int missing(const reader *r, const char *key, const char *what)
{
    return ck_err_fail(r->err, CK_ERR_INPUT, "%s: %s: missing (expected %s)", r->file, key, what);
}

static int wrong(const reader *r, const char *key, const cJSON *v, const char *what)
{
    char got[96];
    ck_json_describe(v, got, sizeof got);
    return ck_err_fail(r->err, CK_ERR_INPUT, "%s: %s: expected %s, got %s", r->file, key, what, got);
}

/* A positive integer below 2^53; *out keeps its value when the key is absent and optional. */
static int size(const reader *r, const char *key, bool required, uint64_t *out)
{
    const cJSON *v = present(r, key);
    if (!v)
        return required ? missing(r, key, "a positive integer") : CK_OK;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 1) || v->valuedouble >= CK_JSON_MAX_EXACT_INT ||
        v->valuedouble != floor(v->valuedouble))
        return wrong(r, key, v, "a positive integer below 2^53");
    *out = (uint64_t)v->valuedouble;
    return CK_OK;
}

/* A probability in [0, 1), or a positive number when `positive`. */
static int number(const reader *r, const char *key, bool positive, double *out)
{
    const cJSON *v = present(r, key);
    if (!v)
        return CK_OK;
    bool ok = cJSON_IsNumber(v) && isfinite(v->valuedouble) &&
              (positive ? v->valuedouble > 0 : v->valuedouble >= 0 && v->valuedouble < 1);
    if (!ok)
        return wrong(r, key, v, positive ? "a positive number" : "a probability in [0, 1)");
    *out = v->valuedouble;
    return CK_OK;
}

/* Gemma2Config's soft-capping: absent, its default; null, none (0); else a positive number. */
static int softcap(const reader *r, const char *key, double dflt, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->cfg, key);
    *out = !v ? dflt : 0;
    return number(r, key, true, out);
}

static int flag(const reader *r, const char *key, bool *out)
{
    const cJSON *v = present(r, key);
    if (v && !cJSON_IsBool(v))
        return wrong(r, key, v, "true or false");
    if (v)
        *out = cJSON_IsTrue(v);
    return CK_OK;
}

/* A string key that, when present, must be one of the values the family's code has. */
static int expect_string(const reader *r, const char *key, const char *a, const char *b)
{
    const cJSON *v = present(r, key);
    if (!v || (cJSON_IsString(v) && (strcmp(v->valuestring, a) == 0 ||
                                     (b && strcmp(v->valuestring, b) == 0))))
        return CK_OK;
    char what[96];
    snprintf(what, sizeof what, b ? "\"%s\" or \"%s\"" : "\"%s\"", a, b);
    return wrong(r, key, v, what);
}

/* A rotary base as the rope op takes it: a positive integer. */
static int theta(const reader *r, uint64_t *out)
{
    const cJSON *v = present(r, "rope_theta");
    if (v && (!cJSON_IsNumber(v) || !(v->valuedouble >= 1) || v->valuedouble >= CK_JSON_MAX_EXACT_INT ||
              v->valuedouble != floor(v->valuedouble)))
        return wrong(r, "rope_theta", v, "a positive integer (a rotary base)");
    if (v)
        *out = (uint64_t)v->valuedouble;
    return CK_OK;
}

/* sliding_window of the families whose every layer has it (MistralConfig's default 4096,
 * MixtralConfig's and Phi3Config's none): an absent key is the family's default, null is
 * none. */
static int window(const reader *r, uint64_t absent, uint64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->cfg, "sliding_window");
    *out = v ? 0 : absent;
    return v && !cJSON_IsNull(v) ? size(r, "sliding_window", false, out) : CK_OK;
}

/* Keys read in turn: sizes (a positive integer each) and probabilities. */
typedef struct {
    const char *key;
    bool required;
    uint64_t *out;
} size_key;

typedef struct {
    const char *key;
    double *out;
} prob_key;

static int read_sizes(const reader *r, const size_key *k, size_t n)
{
    int rc = CK_OK;
    for (size_t i = 0; i < n && rc == CK_OK; i++)
        rc = size(r, k[i].key, k[i].required, k[i].out);
    return rc;
}

static int read_probs(const reader *r, const prob_key *k, size_t n)
{
    int rc = CK_OK;
    for (size_t i = 0; i < n && rc == CK_OK; i++)
        rc = number(r, k[i].key, false, k[i].out);
    return rc;
}

#define N_OF(a) (sizeof(a) / sizeof(a)[0])

/* GPT2Config: n_embd, n_head, n_layer, n_positions, n_inner (null: 4 n_embd), three
 * dropouts of 0.1 by default; GPT2LMHeadModel ties the head to wte. */
static int read_gpt2(const reader *r, ck_hf_config *c)
{
    c->attn_p = c->resid_p = c->embd_p = 0.1;
    c->tie = c->qkv_bias = c->o_bias = c->mlp_bias = true;
    const size_key sizes[] = {{"n_embd", true, &c->C}, {"n_head", true, &c->H},
                              {"n_layer", true, &c->L}, {"n_positions", true, &c->P},
                              {"n_inner", false, &c->F}};
    const prob_key probs[] = {{"attn_pdrop", &c->attn_p}, {"resid_pdrop", &c->resid_p},
                              {"embd_pdrop", &c->embd_p}};
    int rc = read_sizes(r, sizes, N_OF(sizes));
    if (rc == CK_OK) rc = read_probs(r, probs, N_OF(probs));
    if (rc == CK_OK) rc = expect_string(r, "activation_function", "gelu_new", "gelu_pytorch_tanh");
    return rc;
}

/* OPTConfig: pre-LN layers (do_layer_norm_before) with word_embed_proj_dim = hidden_size
 * (no project_in/out), dropout 0.1 after out_proj and fc2, biases (enable_bias). Its MLP
 * has no dropout after the activation: transformers 5's OPTDecoderLayer reads no
 * activation_dropout (OPTConfig has none), so neither does ckplan. */
static int read_opt(const reader *r, ck_hf_config *c)
{
    c->resid_p = 0.1;
    c->tie = c->qkv_bias = c->o_bias = c->mlp_bias = true;
    bool pre_ln = true;
    uint64_t proj = 0;
    const size_key sizes[] = {{"hidden_size", true, &c->C}, {"num_attention_heads", true, &c->H},
                              {"num_hidden_layers", true, &c->L}, {"ffn_dim", true, &c->F},
                              {"max_position_embeddings", true, &c->P},
                              {"word_embed_proj_dim", false, &proj}};
    const prob_key probs[] = {{"dropout", &c->resid_p}, {"attention_dropout", &c->attn_p}};
    int rc = read_sizes(r, sizes, N_OF(sizes));
    if (rc == CK_OK) rc = read_probs(r, probs, N_OF(probs));
    if (rc == CK_OK) rc = flag(r, "enable_bias", &c->qkv_bias);
    if (rc == CK_OK) rc = flag(r, "do_layer_norm_before", &pre_ln);
    if (rc == CK_OK) rc = expect_string(r, "activation_function", "relu", NULL);
    c->o_bias = c->mlp_bias = c->qkv_bias;
    if (rc == CK_OK && (!pre_ln || (proj && proj != c->C)))
        rc = ck_err_fail(r->err, CK_ERR_INPUT, "%s: %s: only pre-LN OPT models with "
                         "word_embed_proj_dim = hidden_size are supported (as opt-125m, opt-1.3b "
                         "and larger; not opt-350m)", r->file,
                         pre_ln ? "word_embed_proj_dim" : "do_layer_norm_before");
    return rc;
}

/* num_key_value_heads: absent, the family's default (ck_hf_family.kv_heads); null, the
 * heads (each config class's __post_init__); else a positive integer. */
static int kv_heads(const reader *r, ck_hf_config *c)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->cfg, "num_key_value_heads");
    c->KV = v ? 0 : c->family->kv_heads;
    return size(r, "num_key_value_heads", false, &c->KV);
}

/* The LLaMA-like decoders: hidden_size, num_attention_heads, num_key_value_heads (kv_heads),
 * head_dim (default hidden_size / heads, but 128 in Qwen3Config and 256 in GemmaConfig /
 * Gemma2Config), intermediate_size, attention_dropout (0), rope_theta (the family's). */
static int read_decoder(const reader *r, ck_hf_config *c)
{
    const char *t = c->family->model_type;
    c->theta = c->family->theta;
    if (strcmp(t, "qwen3") == 0)
        c->D = 128;
    else if (strncmp(t, "gemma", 5) == 0)
        c->D = 256;
    c->tie = strncmp(t, "gemma", 5) == 0;
    c->qkv_bias = strcmp(t, "qwen2") == 0; /* Qwen2Attention: q/k/v with bias, o without */
    const size_key sizes[] = {{"hidden_size", true, &c->C}, {"num_attention_heads", true, &c->H},
                              {"head_dim", false, &c->D},
                              {"num_hidden_layers", true, &c->L},
                              {"intermediate_size", true, &c->F},
                              {"max_position_embeddings", false, &c->P}};
    int rc = read_sizes(r, sizes, N_OF(sizes));
    if (rc == CK_OK) rc = kv_heads(r, c);
    if (rc == CK_OK) rc = number(r, "attention_dropout", false, &c->attn_p);
    if (rc == CK_OK) rc = theta(r, &c->theta);
    if (rc == CK_OK && c->family->windowed) rc = window(r, c->family->window, &c->window);
    return rc;
}

/* The activation key each family's MLP reads, and what it may say: GemmaMLP reads
 * hidden_act (GemmaConfig turns "gelu" into "gelu_pytorch_tanh"), Gemma2MLP
 * hidden_activation, the others hidden_act. */
static int activation(const reader *r, const char *t)
{
    if (strcmp(t, "gemma") == 0)
        return expect_string(r, "hidden_act", "gelu_pytorch_tanh", "gelu");
    if (strcmp(t, "gemma2") == 0)
        return expect_string(r, "hidden_activation", "gelu_pytorch_tanh", NULL);
    return expect_string(r, "hidden_act", "silu", NULL);
}

/* Family extras: biases that the config may turn on (LlamaConfig, Qwen3Config, GemmaConfig,
 * Gemma2Config: attention_bias for q, k, v and o; LlamaConfig: mlp_bias), Mixtral's experts
 * (MixtralConfig's 8, 2 of them a token), Phi-3's dropouts, Gemma 2's caps, and the
 * activation each family's MLP has. */
static int read_extras(const reader *r, ck_hf_config *c)
{
    const char *t = c->family->model_type;
    int rc = CK_OK;
    if (strcmp(t, "llama") == 0 || strcmp(t, "qwen3") == 0 || strncmp(t, "gemma", 5) == 0) {
        rc = flag(r, "attention_bias", &c->qkv_bias);
        c->o_bias = c->qkv_bias;
        if (rc == CK_OK && strcmp(t, "llama") == 0) rc = flag(r, "mlp_bias", &c->mlp_bias);
    } else if (strcmp(t, "mixtral") == 0) {
        c->E = 8;
        c->K = 2;
        const size_key experts[] = {{"num_local_experts", false, &c->E},
                                    {"num_experts_per_tok", false, &c->K}};
        rc = read_sizes(r, experts, N_OF(experts));
    } else if (strcmp(t, "phi3") == 0) {
        /* Phi3Model has no embedding dropout: its embd_pdrop is read by nothing */
        const prob_key probs[] = {{"resid_pdrop", &c->resid_p}};
        rc = read_probs(r, probs, N_OF(probs));
    }
    if (rc == CK_OK && strcmp(t, "gemma2") == 0) {
        rc = softcap(r, "attn_logit_softcapping", 50.0, &c->attn_cap);
        if (rc == CK_OK) rc = softcap(r, "final_logit_softcapping", 30.0, &c->final_cap);
    }
    return rc == CK_OK ? activation(r, t) : rc;
}

static int find_family(const reader *r, const ck_hf_family **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->cfg, "model_type");
    if (!cJSON_IsString(v))
        return wrong(r, "model_type", v, "a string");
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (strcmp(families[i].model_type, v->valuestring) == 0) {
            *out = &families[i];
            return CK_OK;
        }
    return ck_err_fail(r->err, CK_ERR_INPUT, "%s: model_type: expected one of %s, got \"%s\"",
                       r->file, ck_hf_config_families(), v->valuestring);
}

int ck_hf_config_read(const cJSON *config, const char *file, ck_hf_config *out, ck_err *err)
{
    reader r = {config, file, err};
    memset(out, 0, sizeof *out);
    out->use_cache = true; /* every family's config class defaults it to true */
    int rc = find_family(&r, &out->family);
    if (rc != CK_OK)
        return rc;
    const char *t = out->family->model_type;
    rc = strcmp(t, "gpt2") == 0 ? read_gpt2(&r, out)
         : strcmp(t, "opt") == 0 ? read_opt(&r, out)
                                 : read_decoder(&r, out);
    if (rc == CK_OK && out->family->mlp != CK_HF_MLP_GELU && out->family->mlp != CK_HF_MLP_RELU)
        rc = read_extras(&r, out);
    if (rc == CK_OK) rc = size(&r, "vocab_size", true, &out->V);
    if (rc == CK_OK) rc = flag(&r, "tie_word_embeddings", &out->tie);
    if (rc == CK_OK) rc = flag(&r, "use_cache", &out->use_cache);
    out->norm_eps = out->family->eps;
    if (rc == CK_OK && out->family->eps_key)
        rc = number(&r, out->family->eps_key, true, &out->norm_eps);
    return rc;
}
