/* Hugging Face configs (planner/hf): exact parameter counts per family, written out as the
 * family's modeling code in transformers lays its modules out, for a tiny config and for
 * the published one (checked against the count the model card or paper gives); saved bytes
 * of a GPT-2 and a LLaMA layer by hand; the options only configs take; refused configs. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "fixtures.h"
#include "planner/hf.h"
#include "planner/hf_config.h"
#include "planner/json.h"
#include "planner/workload.h"

/* The sizes of a config, as the formulas below read them. */
typedef struct {
    uint64_t V, C, H, KV, D, F, L, P, E;
    bool tie;
} sizes;

/* GPT2LMHeadModel: wte V*C, wpe P*C; per block ln_1 2C, c_attn C*3C + 3C, attn c_proj
 * C*C + C, ln_2 2C, c_fc C*F + F, mlp c_proj F*C + C; ln_f 2C; lm_head is wte. */
static uint64_t gpt2_count(const sizes *s)
{
    uint64_t C = s->C, F = s->F;
    uint64_t block = 2 * C + (C * 3 * C + 3 * C) + (C * C + C) + 2 * C + (C * F + F) + (F * C + C);
    return s->V * C + s->P * C + s->L * block + 2 * C;
}

/* OPTForCausalLM: embed_tokens V*C, embed_positions (P + 2)*C (OPTLearnedPositionalEmbedding's
 * offset); per layer self_attn_layer_norm 2C, q/k/v/out_proj 4 (C*C + C), final_layer_norm
 * 2C, fc1 C*F + F, fc2 F*C + C; decoder final_layer_norm 2C; lm_head is embed_tokens. */
static uint64_t opt_count(const sizes *s)
{
    uint64_t C = s->C, F = s->F;
    uint64_t layer = 2 * C + 4 * (C * C + C) + 2 * C + (C * F + F) + (F * C + C);
    return s->V * C + (s->P + 2) * C + s->L * layer + 2 * C;
}

/* What the LLaMA-like decoders differ in. */
typedef struct {
    bool qkv_bias;      /* Qwen2: q_proj, k_proj, v_proj with bias */
    bool qk_norms;      /* Qwen3: q_norm, k_norm of head_dim each */
    unsigned norms;     /* RMSNorms of C per layer: 2, Gemma 2's 4 */
} decoder_kind;

/* LlamaForCausalLM and its kin: embed_tokens V*C; per layer q_proj C*H*D, k_proj and v_proj
 * C*KV*D each, o_proj H*D*C, MLP gate_proj and up_proj C*F each and down_proj F*C (Phi-3's
 * gate_up_proj C*2F is the same count; Mixtral: a router gate E*C and E experts of three
 * C*F matrices each), the norms; the final norm C; lm_head V*C unless tied. */
static uint64_t decoder_count(const sizes *s, decoder_kind k)
{
    uint64_t C = s->C, q = s->H * s->D, kv = s->KV * s->D;
    uint64_t attn = C * q + 2 * C * kv + q * C;
    if (k.qkv_bias)
        attn += q + 2 * kv;
    if (k.qk_norms)
        attn += 2 * s->D;
    uint64_t mlp = s->E ? s->E * C + s->E * 3 * C * s->F : 3 * C * s->F;
    uint64_t layer = attn + mlp + k.norms * C;
    return s->V * C + s->L * layer + C + (s->tie ? 0 : s->V * C);
}

static const decoder_kind plain = {.norms = 2}, qwen2 = {.qkv_bias = true, .norms = 2},
                          qwen3 = {.qk_norms = true, .norms = 2}, gemma2 = {.norms = 4};

static uint64_t loaded_count(const char *path, const ck_model_opts *mo)
{
    ck_workload w;
    ck_workload_opts o;
    ck_workload_opts_default(&o);
    if (mo)
        o.model = *mo;
    ck_err err = {{0}};
    ck_assert_msg(ck_workload_load(path, &o, &w, &err) == CK_OK, "%s: %s", path, err.msg);
    uint64_t n = w.statics.n_params;
    ck_workload_free(&w);
    return n;
}

/* Each tiny model of models/hf: the count by its family's layout. */
START_TEST(tiny_configs_count_exactly)
{
    const sizes gpt2 = {.V = 256, .C = 64, .H = 4, .F = 4 * 64, .L = 2, .P = 64};
    const sizes opt = {.V = 256, .C = 64, .H = 4, .F = 256, .L = 2, .P = 64};
    const struct {
        const char *path;
        sizes s;
        decoder_kind k;
    } decoders[] = {
        {"models/hf/llama-tiny.json", {256, 64, 4, 2, 16, 176, 2, 0, 0, false}, plain},
        {"models/hf/mistral-tiny.json", {256, 64, 4, 1, 16, 224, 2, 0, 0, false}, plain},
        {"models/hf/mixtral-tiny.json", {256, 64, 4, 2, 16, 96, 2, 0, 4, false}, plain},
        {"models/hf/qwen2-tiny.json", {256, 64, 4, 2, 16, 160, 2, 0, 0, true}, qwen2},
        {"models/hf/qwen3-tiny.json", {256, 64, 4, 2, 32, 192, 2, 0, 0, false}, qwen3},
        {"models/hf/phi3-tiny.json", {256, 64, 4, 4, 16, 128, 2, 0, 0, false}, plain},
        {"models/hf/gemma-tiny.json", {256, 64, 4, 1, 32, 256, 2, 0, 0, true}, plain},
        {"models/hf/gemma2-tiny.json", {256, 64, 4, 2, 32, 192, 2, 0, 0, true}, gemma2},
    };
    ck_assert_uint_eq(loaded_count("models/hf/gpt2-tiny.json", NULL), gpt2_count(&gpt2));
    ck_assert_uint_eq(loaded_count("models/hf/opt-tiny.json", NULL), opt_count(&opt));
    for (size_t i = 0; i < sizeof decoders / sizeof decoders[0]; i++)
        ck_assert_msg(loaded_count(decoders[i].path, NULL) ==
                          decoder_count(&decoders[i].s, decoders[i].k),
                      "%s", decoders[i].path);
}
END_TEST

/* The published configs: the layout's count, and the count the model's publishers give
 * (model cards, papers; docs/model-format.md section 8 lists each source). */
START_TEST(published_configs_count_exactly)
{
    const struct {
        const char *path;
        sizes s;
        decoder_kind k;
        uint64_t published;
    } decoders[] = {
        {"tests/data/hf/llama-2-7b.json", {32000, 4096, 32, 32, 128, 11008, 32, 0, 0, false}, plain,
         6738415616},
        {"tests/data/hf/llama-3-8b", {128256, 4096, 32, 8, 128, 14336, 32, 0, 0, false}, plain,
         8030261248},
        {"tests/data/hf/tinyllama-1.1b.json", {32000, 2048, 32, 4, 64, 5632, 22, 0, 0, false}, plain,
         1100048384},
        {"tests/data/hf/mistral-7b-v0.1.json", {32000, 4096, 32, 8, 128, 14336, 32, 0, 0, false},
         plain, 7241732096},
        {"tests/data/hf/mixtral-8x7b-v0.1.json", {32000, 4096, 32, 8, 128, 14336, 32, 0, 8, false},
         plain, 46702792704},
        {"tests/data/hf/qwen2-7b.json", {152064, 3584, 28, 4, 128, 18944, 28, 0, 0, false}, qwen2,
         7615616512},
        {"tests/data/hf/qwen3-8b.json", {151936, 4096, 32, 8, 128, 12288, 36, 0, 0, false}, qwen3,
         8190735360},
        {"tests/data/hf/phi-3-mini-4k.json", {32064, 3072, 32, 32, 96, 8192, 32, 0, 0, false}, plain,
         3821079552},
        {"tests/data/hf/gemma-7b.json", {256000, 3072, 16, 16, 256, 24576, 28, 0, 0, true}, plain,
         8537680896},
        {"tests/data/hf/gemma-2-9b.json", {256000, 3584, 16, 8, 256, 14336, 42, 0, 0, true}, gemma2,
         9241705984},
    };
    const sizes gpt2_medium = {.V = 50257, .C = 1024, .H = 16, .F = 4096, .L = 24, .P = 1024};
    const sizes opt_13b = {.V = 50272, .C = 2048, .H = 32, .F = 8192, .L = 24, .P = 2048};
    ck_assert_uint_eq(gpt2_count(&gpt2_medium), 354823168);
    ck_assert_uint_eq(loaded_count("tests/data/hf/gpt2-medium.json", NULL), 354823168);
    ck_assert_uint_eq(opt_count(&opt_13b), 1315758080);
    ck_assert_uint_eq(loaded_count("tests/data/hf/opt-1.3b.json", NULL), 1315758080);
    for (size_t i = 0; i < sizeof decoders / sizeof decoders[0]; i++) {
        uint64_t by_layout = decoder_count(&decoders[i].s, decoders[i].k);
        ck_assert_msg(by_layout == decoders[i].published, "%s: layout %llu", decoders[i].path,
                      (unsigned long long)by_layout);
        ck_assert_msg(loaded_count(decoders[i].path, NULL) == by_layout, "%s", decoders[i].path);
    }
}
END_TEST

/* The saved bytes of stage h.0 (one layer at block granularity) of path under opts. */
static uint64_t layer_saved(const char *path, const ck_model_opts *mo)
{
    ck_workload w;
    ck_workload_opts o;
    ck_workload_opts_default(&o);
    o.model = *mo;
    ck_err err = {{0}};
    ck_assert_msg(ck_workload_load(path, &o, &w, &err) == CK_OK, "%s", err.msg);
    uint64_t saved = 0;
    for (size_t i = 0; i < w.chain.n_stages; i++)
        if (strcmp(w.chain.stages[i].name, "h.0") == 0)
            saved = w.chain.stages[i].saved_bytes;
    ck_workload_free(&w);
    ck_assert_uint_ne(saved, 0);
    return saved;
}

static ck_model_opts seq_batch(uint64_t s, uint64_t b, const char *attention, const char *impl)
{
    ck_model_opts o = {.attention = attention, .impl = impl};
    ck_assert(ck_model_opts_set(&o, "T", 1, s));
    ck_assert(ck_model_opts_set(&o, "B", 1, b));
    return o;
}

/* GPT-2 medium in bf16 with eager attention and its 0.1 dropouts is Korthikanti et al.'s
 * layer under the fused profile: sbh(34 + 5as/h), plus the two layernorms' f32 mean and
 * rstd, 16sb (docs/model-format.md section 6). Under hf, transformers' NewGELUActivation
 * keeps three more 4h-wide tensors (x / 2, the tanh, 1 + the tanh): 24sbh in bf16
 * (docs/profiles.md). */
START_TEST(gpt2_layer_is_korthikanti)
{
    const uint64_t h = 1024, a = 16;
    const uint64_t cases[][2] = {{1024, 1}, {512, 4}};
    for (size_t i = 0; i < 2; i++) {
        uint64_t s = cases[i][0], b = cases[i][1];
        uint64_t korthikanti = s * b * h * 34 + 5 * a * s * s * b + 16 * s * b;
        ck_model_opts fused = seq_batch(s, b, "eager", "fused");
        ck_model_opts hf = seq_batch(s, b, "eager", NULL);
        ck_assert_uint_eq(layer_saved("tests/data/hf/gpt2-medium.json", &fused), korthikanti);
        ck_assert_uint_eq(layer_saved("tests/data/hf/gpt2-medium.json", &hf),
                          korthikanti + 24 * s * b * h);
    }
}
END_TEST

/* A Llama-3-8B layer in bf16 (e = 2), s tokens, b sequences, h = C = 4096, H = 32 heads,
 * K = 8 key/value heads of D = 128, F = 14336, counted from what autograd keeps:
 * input_layernorm its input (replaced by the layer's output, the same size) e*sbh and rstd
 * 4sb; q/k/v_proj their input e*sbh; attention the rotated q, k, v e*sb(H+2K)D and its
 * output e*sbh (o_proj's input, the same tensor); post_attention_layernorm its input e*sbh
 * and rstd 4sb; gate/up_proj their input e*sbh; the gated unit gate and up 2e*sbF;
 * down_proj its input e*sbF. Then the attention kernel: sdpa's flash kernel the f32
 * log-sum-exp 4sbH; eager the f32 probabilities 4bHs^2 and their bf16 copy 2bHs^2. */
START_TEST(llama_layer_by_hand)
{
    const uint64_t h = 4096, H = 32, K = 8, D = 128, F = 14336, e = 2;
    const uint64_t s = 1024, b = 2, sb = s * b;
    uint64_t common = 4 * e * sb * h + e * sb * (H + 2 * K) * D + e * sb * h + 8 * sb + 3 * e * sb * F;
    ck_model_opts sdpa = seq_batch(s, b, NULL, "fused"), eager = seq_batch(s, b, "eager", "fused");
    ck_assert_uint_eq(layer_saved("tests/data/hf/llama-3-8b", &sdpa), common + 4 * sb * H);
    ck_assert_uint_eq(layer_saved("tests/data/hf/llama-3-8b", &eager),
                      common + (4 + 2) * b * H * s * s);
}
END_TEST

/* The same layer as transformers' LlamaDecoderLayer keeps it (the hf profile, as
 * tests/torch/hf_saved.py measures it in bf16): each LlamaRMSNorm computes on x.float() and
 * keeps that f32 copy 4sbh, not x, and x rstd e*sbh besides rstd 4sb (so the layer keeps
 * its output, q/k/v_proj's and gate/up_proj's inputs and o_proj's, 4e*sbh, and not the
 * residual between its halves); act(gate) * up keeps act(gate) too: gate, up, act(gate) and
 * down_proj's input, 4e*sbF; eager attention's repeat_kv keeps q and the copies of k and v
 * to all H heads, 3e*sbHD, instead of the packed e*sb(H+2K)D. */
START_TEST(llama_layer_hf_by_hand)
{
    const uint64_t h = 4096, H = 32, K = 8, D = 128, F = 14336, e = 2;
    const uint64_t s = 1024, b = 2, sb = s * b;
    uint64_t common = 4 * e * sb * h + 2 * (4 * sb * h + e * sb * h + 4 * sb) + 4 * e * sb * F;
    ck_model_opts sdpa = seq_batch(s, b, NULL, NULL), eager = seq_batch(s, b, "eager", "hf");
    ck_assert_uint_eq(layer_saved("tests/data/hf/llama-3-8b", &sdpa),
                      common + e * sb * (H + 2 * K) * D + 4 * sb * H);
    ck_assert_uint_eq(layer_saved("tests/data/hf/llama-3-8b", &eager),
                      common + 3 * e * sb * H * D + (4 + 2) * b * H * s * s);
}
END_TEST

/* --lora R: every base parameter frozen, adapters on q/k/v (one each, packed), o, gate, up
 * and down: R*in + out*R each, 3R*C + (H+2K)D*R for the packed one; only they train. */
START_TEST(lora_adapters_are_the_trainable_parameters)
{
    const uint64_t C = 64, H = 4, K = 2, D = 16, F = 176, L = 2, R = 8;
    ck_model_opts o = {.lora_rank = R};
    uint64_t base = loaded_count("models/hf/llama-tiny.json", NULL);
    uint64_t per_layer = (3 * R * C + (H + 2 * K) * D * R) + (R * H * D + C * R) +
                         2 * (R * C + F * R) + (R * F + C * R);
    ck_workload w;
    ck_workload_opts wo;
    ck_workload_opts_default(&wo);
    wo.model = o;
    ck_err err = {{0}};
    ck_assert_msg(ck_workload_load("models/hf/llama-tiny.json", &wo, &w, &err) == CK_OK, "%s",
                  err.msg);
    ck_assert_uint_eq(w.statics.n_params, base + L * per_layer);
    /* bf16 gradients of the adapters alone, made by the backward (PyTorch 2's autograd) */
    ck_assert_uint_eq(w.statics.grads, 0);
    ck_assert_uint_eq(w.statics.made_grads, 2 * L * per_layer);
    ck_workload_free(&w);
}
END_TEST

/* A directory stands for its config.json: the same model, the sha256 of that file. */
START_TEST(directory_is_its_config)
{
    ck_workload a, b;
    ck_workload_opts o;
    ck_workload_opts_default(&o);
    ck_err err = {{0}};
    ck_assert_int_eq(ck_workload_load("tests/data/hf/llama-3-8b", &o, &a, &err), CK_OK);
    ck_assert_int_eq(ck_workload_load("tests/data/hf/llama-3-8b/config.json", &o, &b, &err), CK_OK);
    ck_assert_str_eq(a.sha256, b.sha256);
    ck_assert_uint_eq(a.statics.total, b.statics.total);
    ck_workload_free(&a);
    ck_workload_free(&b);
}
END_TEST

static const char *refused(const char *json)
{
    static ck_err err;
    cJSON *root = cJSON_Parse(json), *doc = NULL;
    ck_assert_ptr_nonnull(root);
    ck_model_opts o = {0};
    ck_assert(ck_hf_is_config(root));
    ck_assert_int_eq(ck_hf_to_model(root, "c.json", &o, &doc, &err), CK_ERR_INPUT);
    cJSON_Delete(root);
    return err.msg;
}

/* An unknown model_type lists the families; a missing or mistyped key is named. */
START_TEST(bad_configs_name_the_key)
{
    fx_assert_has(refused("{\"model_type\": \"bert\"}"), "c.json: model_type: expected one of gpt2, opt, llama, mistral, mixtral, qwen2, qwen3, phi3, gemma, gemma2, got \"bert\"", NULL);
    fx_assert_has(refused("{\"model_type\": \"llama\", \"hidden_size\": 64}"),
                  "c.json: num_attention_heads: missing", NULL);
    fx_assert_has(refused("{\"model_type\": \"gpt2\", \"n_embd\": \"64\"}"),
                  "c.json: n_embd: expected a positive integer", NULL);
    fx_assert_has(refused("{\"model_type\": \"opt\", \"hidden_size\": 64, \"num_attention_heads\": 4,"
                          " \"num_hidden_layers\": 2, \"ffn_dim\": 8, \"max_position_embeddings\": 8,"
                          " \"activation_function\": \"gelu\"}"),
                  "c.json: activation_function: expected \"relu\"", NULL);
}
END_TEST

/* A small decoder of model_type with `extra` keys (no expert count: Mixtral's defaults)
 * read into *c; CK_OK, or the refusal with its message in *msg. */
static int config_of(const char *model_type, const char *extra, ck_hf_config *c, const char **msg)
{
    static ck_err err;
    char json[512];
    snprintf(json, sizeof json, "{\"model_type\": \"%s\", \"hidden_size\": 512, "
             "\"num_attention_heads\": 64, \"num_hidden_layers\": 2, \"intermediate_size\": 8, "
             "\"vocab_size\": 16%s}", model_type, extra);
    cJSON *root = cJSON_Parse(json);
    ck_assert_ptr_nonnull(root);
    int rc = ck_hf_config_read(root, "c.json", c, &err);
    cJSON_Delete(root);
    *msg = err.msg;
    return rc;
}

/* The sliding window config `extra` gives, or (uint64_t)-1 when refused. */
static uint64_t window_of(const char *model_type, const char *extra, const char **msg)
{
    ck_hf_config c;
    return config_of(model_type, extra, &c, msg) == CK_OK ? c.window : (uint64_t)-1;
}

/* num_key_value_heads, rope_theta and the experts left out take each config class's
 * defaults (transformers 5: MistralConfig's 8 kv heads, not the heads; MixtralConfig's
 * rotary base 1e6 and 8 experts, 2 a token); null kv heads are the heads (__post_init__),
 * KV 0 in the config standing for the model's rule "H". */
START_TEST(left_out_keys_take_the_config_class_defaults)
{
    const char *types[] = {"llama", "mistral", "mixtral", "qwen2", "qwen3", "phi3", "gemma", "gemma2"};
    const uint64_t kv[] = {0, 8, 8, 32, 32, 0, 16, 4};
    ck_hf_config c;
    const char *msg;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        ck_assert_int_eq(config_of(types[i], "", &c, &msg), CK_OK);
        ck_assert_msg(c.KV == kv[i], "%s: %llu kv heads", types[i], (unsigned long long)c.KV);
        ck_assert_int_eq(config_of(types[i], ", \"num_key_value_heads\": null", &c, &msg), CK_OK);
        ck_assert_uint_eq(c.KV, 0);
        ck_assert_int_eq(config_of(types[i], ", \"num_key_value_heads\": 2", &c, &msg), CK_OK);
        ck_assert_uint_eq(c.KV, 2);
        ck_assert_uint_eq(c.theta, strcmp(types[i], "mixtral") == 0 ? 1000000 : 0);
    }
    ck_assert_int_eq(config_of("mixtral", "", &c, &msg), CK_OK);
    ck_assert_uint_eq(c.E, 8);
    ck_assert_uint_eq(c.K, 2);
}
END_TEST

/* sliding_window: absent is the family's default (MistralConfig's 4096, none for Mixtral
 * and Phi-3), null is none; families without one (Llama) ignore the key. */
START_TEST(sliding_window_defaults_per_family)
{
    const char *msg;
    ck_assert_uint_eq(window_of("mistral", "", &msg), 4096);
    ck_assert_uint_eq(window_of("mistral", ", \"sliding_window\": null", &msg), 0);
    ck_assert_uint_eq(window_of("mistral", ", \"sliding_window\": 32", &msg), 32);
    ck_assert_uint_eq(window_of("mixtral", "", &msg), 0);
    ck_assert_uint_eq(window_of("mixtral", ", \"sliding_window\": 4096", &msg), 4096);
    ck_assert_uint_eq(window_of("phi3", "", &msg), 0);
    ck_assert_uint_eq(window_of("phi3", ", \"sliding_window\": 2047", &msg), 2047);
    ck_assert_uint_eq(window_of("llama", ", \"sliding_window\": 32", &msg), 0);
    ck_assert_uint_eq(window_of("mistral", ", \"sliding_window\": \"32\"", &msg), (uint64_t)-1);
    fx_assert_has(msg, "c.json: sliding_window: expected a positive integer", NULL);
    ck_assert_uint_eq(window_of("mistral", ", \"sliding_window\": 0", &msg), (uint64_t)-1);
}
END_TEST

static Suite *hf_suite(void)
{
    Suite *s = suite_create("hf");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, tiny_configs_count_exactly);
    tcase_add_test(tc, published_configs_count_exactly);
    tcase_add_test(tc, gpt2_layer_is_korthikanti);
    tcase_add_test(tc, llama_layer_by_hand);
    tcase_add_test(tc, llama_layer_hf_by_hand);
    tcase_add_test(tc, lora_adapters_are_the_trainable_parameters);
    tcase_add_test(tc, directory_is_its_config);
    tcase_add_test(tc, bad_configs_name_the_key);
    tcase_add_test(tc, sliding_window_defaults_per_family);
    tcase_add_test(tc, left_out_keys_take_the_config_class_defaults);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(hf_suite)
