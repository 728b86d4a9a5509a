#include "planner/hf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "planner/hf_config.h"
#include "planner/hf_rank.h"
#include "planner/json.h"

bool ck_hf_is_config(const cJSON *root)
{
    return cJSON_IsObject(root) && !cJSON_GetObjectItemCaseSensitive(root, "format") &&
           cJSON_GetObjectItemCaseSensitive(root, "model_type");
}

const char *ck_hf_families(void)
{
    return ck_hf_config_families();
}

ck_model_opts ck_hf_model_opts(const ck_model_opts *opts)
{
    ck_model_opts rest = *opts;
    rest.lora_rank = 0;
    rest.attention = NULL;
    rest.layout.tp = rest.layout.cp = 0; /* built into the rank's graph */
    rest.layout.sp = rest.layout.partition = false;
    return rest;
}

char *ck_hf_config_path(const char *path)
{
    struct stat st;
    bool dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    size_t len = strlen(path) + (dir ? sizeof "/config.json" : 1);
    char *out = malloc(len);
    if (out)
        snprintf(out, len, dir ? "%s/config.json" : "%s", path);
    return out;
}

/* The graph under construction. Node and tensor names are literals; `cur` is the tensor
 * the next node reads. Any failed allocation sets `oom`, checked once at the end. */
typedef struct {
    const ck_hf_config *c;
    const ck_hf_family *f;
    const ck_hf_rank *r; /* the rank of a tensor-, sequence- or context-parallel layout */
    bool eager, lora;
    bool flat; /* projections made now take flattened rows (ck_hf_family.flat_mlp) */
    cJSON *nodes;
    const char *cur;
    bool oom;
} builder;

static void check(builder *b, const void *made)
{
    if (!made)
        b->oom = true;
}

static void put_string(builder *b, cJSON *obj, const char *key, const char *v)
{
    check(b, cJSON_AddStringToObject(obj, key, v));
}

static void put_number(builder *b, cJSON *obj, const char *key, double v)
{
    check(b, cJSON_AddNumberToObject(obj, key, v));
}

static void put_bool(builder *b, cJSON *obj, const char *key, bool v)
{
    check(b, cJSON_AddBoolToObject(obj, key, v));
}

/* item added to obj as key, or to the array obj when key is NULL; on failure item is
 * deleted (cJSON keeps what it was given only when the addition succeeds). */
static cJSON *attach(builder *b, cJSON *obj, const char *key, cJSON *item)
{
    bool added = item && (key ? cJSON_AddItemToObject(obj, key, item) : cJSON_AddItemToArray(obj, item));
    if (added)
        return item;
    cJSON_Delete(item);
    b->oom = true;
    return NULL;
}

/* A node `name` = op(in0[, in1]), appended; it becomes `cur`. NULL when out of memory (the
 * put_ helpers then do nothing but fail). */
static cJSON *node2(builder *b, const char *name, const char *op, const char *in0, const char *in1)
{
    cJSON *n = attach(b, b->nodes, NULL, cJSON_CreateObject());
    b->cur = name;
    if (!n)
        return NULL;
    put_string(b, n, "name", name);
    put_string(b, n, "op", op);
    cJSON *in = attach(b, n, "inputs", cJSON_CreateArray());
    attach(b, in, NULL, cJSON_CreateString(in0));
    if (in1)
        attach(b, in, NULL, cJSON_CreateString(in1));
    return n;
}

static cJSON *node(builder *b, const char *name, const char *op)
{
    return node2(b, name, op, b->cur, NULL);
}

/* A node with parameters: with LoRA, the whole base model is frozen. */
static cJSON *param_node(builder *b, const char *name, const char *op)
{
    cJSON *n = node(b, name, op);
    if (n && b->lora)
        put_bool(b, n, "frozen", true);
    return n;
}

static void norm(builder *b, const char *name)
{
    put_number(b, param_node(b, name, b->f->layernorm ? "layernorm" : "rmsnorm"), "eps",
               b->c->norm_eps);
}

static void dropout(builder *b, const char *name, double p)
{
    if (p > 0)
        put_number(b, node(b, name, "dropout"), "p", p);
}

/* One rank's part of dim `whole` under tensor parallelism: "H/TP" (Megatron's column-
 * and vocabulary-parallel layers split heads, widths and the vocabulary). */
static const char *tp_part(const builder *b, const char *whole, const char *part)
{
    return b->r->tp > 1 ? part : whole;
}

static void heads(builder *b, cJSON *n)
{
    put_string(b, n, "heads", tp_part(b, "H", "H/TP"));
    put_string(b, n, "kv_heads", tp_part(b, "KV", "KV/TP"));
}

/* Under sequence parallelism, a column-parallel node all-gathers its input's sequence
 * ("gather") and a row-parallel one reduce-scatters its output's ("scatter"). */
static void sequence_parallel(builder *b, cJSON *n, const char *how)
{
    if (b->r->sp)
        put_string(b, n, how, "TP");
}

/* A projection of cur to `out` features and, with LoRA, its adapter `adapter`
 * (lora(input, base)); `packed`: q, k and v modules of their own, one adapter each. */
static cJSON *projection(builder *b, const char *name, const char *adapter, const char *out,
                         bool bias, bool packed)
{
    const char *in = b->cur;
    cJSON *n = param_node(b, name, "linear");
    put_string(b, n, "out", out);
    put_bool(b, n, "bias", bias);
    if (b->flat)
        put_bool(b, n, "flat", true);
    if (!b->lora)
        return n;
    cJSON *a = node2(b, adapter, "lora", in, name);
    put_string(b, a, "rank", "R");
    if (b->flat)
        put_bool(b, a, "flat", true);
    if (packed)
        heads(b, a);
    return n;
}

static void attention(builder *b)
{
    const ck_hf_config *c = b->c;
    const char *x = b->cur;
    norm(b, "norm1");
    sequence_parallel(b, projection(b, "qkv", "qkv_lora", tp_part(b, "(H+2*KV)*D", "(H/TP+2*(KV/TP))*D"),
                                    c->qkv_bias, !b->f->fused_qkv), "gather");
    if (b->f->qknorm) {
        cJSON *n = param_node(b, "qknorm", "qknorm");
        heads(b, n);
        put_string(b, n, "head_dim", "D");
        put_number(b, n, "eps", b->c->norm_eps);
    }
    if (!b->f->learned_pos) {
        cJSON *n = node(b, "rope", "rope");
        heads(b, n);
        put_string(b, n, "head_dim", "D");
        if (c->theta)
            put_number(b, n, "theta", (double)c->theta);
    }
    cJSON *n = node(b, "attn", "attention");
    heads(b, n);
    put_string(b, n, "head_dim", "D");
    if (c->attn_p > 0)
        put_number(b, n, "dropout", c->attn_p);
    if (!b->eager)
        put_bool(b, n, "flash", true);
    if (!b->eager && b->f->fused_qkv && !b->f->learned_pos) /* Phi-3: sliced, then rotated */
        put_bool(b, n, "v_view", true);
    if (b->eager && b->f->softmax_f32)
        put_string(b, n, "softmax_dtype", "f32");
    if (b->eager && c->attn_cap > 0)
        put_number(b, n, "softcap", c->attn_cap);
    if (b->r->cp > 1)
        put_string(b, n, "context", "CP");
    if (c->window)
        put_number(b, n, "window", (double)c->window);
    sequence_parallel(b, projection(b, "o", "o_lora", "C", c->o_bias, false), "scatter");
    if (b->f->sandwich_norms)
        norm(b, "post_attn_norm");
    dropout(b, "drop1", c->resid_p);
    node2(b, "res1", "add", x, b->cur);
}

/* Two-input MLPs: gate and up read the same normed input. */
static void gated_mlp(builder *b)
{
    const char *in = b->cur;
    const char *F = tp_part(b, "F", "F/TP");
    sequence_parallel(b, projection(b, "gate", "gate_lora", F, b->c->mlp_bias, false), "gather");
    const char *gate = b->cur;
    b->cur = in;
    sequence_parallel(b, projection(b, "up", "up_lora", F, b->c->mlp_bias, false), "gather");
    node2(b, "act", b->f->mlp == CK_HF_MLP_GEGLU ? "geglu" : "swiglu", gate, b->cur);
    sequence_parallel(b, projection(b, "down", "down_lora", "C", b->c->mlp_bias, false), "scatter");
}

static void mlp(builder *b)
{
    const char *x = b->cur;
    norm(b, b->f->sandwich_norms ? "pre_mlp_norm" : "norm2");
    if (b->f->mlp == CK_HF_MLP_MOE) {
        cJSON *n = param_node(b, "moe", "moe");
        put_string(b, n, "experts", "E");
        put_string(b, n, "top_k", "K");
        put_string(b, n, "hidden", tp_part(b, "F", "F/TP"));
    } else if (b->f->mlp == CK_HF_MLP_SWIGLU || b->f->mlp == CK_HF_MLP_GEGLU) {
        gated_mlp(b);
    } else {
        b->flat = b->f->flat_mlp;
        sequence_parallel(b, projection(b, "fc1", "fc1_lora", tp_part(b, "F", "F/TP"), b->c->mlp_bias, false),
                          "gather");
        node(b, "act", b->f->mlp == CK_HF_MLP_RELU ? "relu" : "gelu");
        sequence_parallel(b, projection(b, "fc2", "fc2_lora", "C", b->c->mlp_bias, false), "scatter");
        b->flat = false;
    }
    if (b->f->sandwich_norms)
        norm(b, "post_mlp_norm");
    dropout(b, "drop2", b->c->resid_p);
    node2(b, "res2", "add", x, b->cur);
}

static void top(builder *b)
{
    const ck_hf_config *c = b->c;
    b->cur = "tokens";
    cJSON *e = param_node(b, "embed", "embedding");
    const char *vocab = tp_part(b, "V", b->r->vocab == b->c->V ? "V/TP" : "VP/TP");
    put_string(b, e, "vocab", vocab);
    sequence_parallel(b, e, "scatter");
    put_string(b, e, "dim", "C");
    if (b->f->learned_pos)
        put_string(b, e, "positions", b->f->pos_offset ? "P+2" : "P");
    if (b->f->embed_scale) /* GemmaModel: the normalizer sqrt(hidden_size) */
        put_number(b, node(b, "embed_scale", "scale"), "factor", sqrt((double)c->C));
    dropout(b, "drop_embed", c->embd_p);
    cJSON *h = node(b, "h", "block"); /* then the block's name, not an op */
    cJSON_DeleteItemFromObjectCaseSensitive(h, "op");
    put_string(b, h, "block", "layer");
    put_string(b, h, "repeat", "L");
    norm(b, "norm_f");
    cJSON *head = param_node(b, "lm_head", "linear");
    put_string(b, head, "out", vocab);
    put_bool(b, head, "bias", false);
    sequence_parallel(b, head, "gather");
    if (c->tie)
        put_bool(b, head, "tied", true);
    if (c->final_cap > 0)
        put_number(b, node(b, "logit_softcap", "softcap"), "cap", c->final_cap);
    node2(b, "loss", "cross_entropy", b->cur, "targets");
}

/* A dim that the config gives, or the rule its family applies when it does not. */
static void dim(builder *b, cJSON *dims, const char *name, uint64_t given, const char *rule)
{
    if (given)
        put_number(b, dims, name, (double)given);
    else
        put_string(b, dims, name, rule);
}

/* The rank's dims: TP and CP, the ranks, and VP, the vocabulary padded to a multiple of TP
 * when V is not one (Megatron pads it so; the padding rows are trained as any other). */
static void rank_dims(builder *b, cJSON *d)
{
    if (b->r->tp > 1)
        put_number(b, d, "TP", (double)b->r->tp);
    if (b->r->tp > 1 && b->r->vocab != b->c->V)
        put_number(b, d, "VP", (double)b->r->vocab);
    if (b->r->cp > 1)
        put_number(b, d, "CP", (double)b->r->cp);
}

static void dims(builder *b, cJSON *doc, uint64_t lora_rank)
{
    const ck_hf_config *c = b->c;
    cJSON *d = cJSON_AddObjectToObject(doc, "dims");
    check(b, d);
    uint64_t T = c->P && c->P < CK_HF_DEFAULT_SEQ ? c->P : CK_HF_DEFAULT_SEQ;
    put_number(b, d, "B", 1);
    put_number(b, d, "T", (double)T);
    put_number(b, d, "C", (double)c->C);
    put_number(b, d, "H", (double)c->H);
    dim(b, d, "KV", c->KV, "H");
    dim(b, d, "D", c->D, "C/H");
    dim(b, d, "F", c->F, "4*C");
    put_number(b, d, "V", (double)c->V);
    put_number(b, d, "L", (double)c->L);
    if (b->f->learned_pos)
        put_number(b, d, "P", (double)c->P);
    if (b->f->mlp == CK_HF_MLP_MOE) {
        put_number(b, d, "E", (double)c->E);
        put_number(b, d, "K", (double)c->K);
    }
    if (lora_rank)
        put_number(b, d, "R", (double)lora_rank);
    rank_dims(b, d);
}

/* The bf16-master recipe with AdamW: bf16 weights and activations, f32 master weights and
 * state, how these models are commonly trained (--recipe and --optimizer change it); the
 * implementation profile, hf unless told (--impl): what transformers' own code keeps; and
 * gradients as PyTorch 2's autograd and zero_grad() make and free them (--grads). */
static void header(builder *b, cJSON *doc, const cJSON *config, const ck_model_opts *opts)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(config, "_name_or_path");
    put_string(b, doc, "format", CK_MODEL_FORMAT);
    put_string(b, doc, "name", cJSON_IsString(name) ? name->valuestring : b->f->model_type);
    cJSON *t = cJSON_AddObjectToObject(doc, "training");
    check(b, t);
    put_string(b, t, "recipe", "bf16-master");
    put_string(b, t, "optimizer", "adamw");
    put_string(b, t, "impl", opts->impl ? opts->impl : CK_IMPL_HF_DEFAULT);
    /* PyTorch 2's zero_grad(); a parallel layout holds its buffers instead (planner/model) */
    put_string(b, t, "grads", ck_model_opts_parallel(opts) ? "held"
                              : opts->grads               ? opts->grads
                                                          : "autograd");
    if (opts->grad_accum > 1)
        put_number(b, t, "grad_accum", (double)opts->grad_accum);
    put_bool(b, doc, "use_cache", b->c->use_cache);
}

static void inputs(builder *b, cJSON *doc)
{
    cJSON *in = attach(b, doc, "inputs", cJSON_CreateArray());
    const char *names[] = {"tokens", "targets"};
    for (size_t i = 0; in && i < 2; i++) {
        cJSON *t = attach(b, in, NULL, cJSON_CreateObject());
        put_string(b, t, "name", names[i]);
        cJSON *shape = t ? attach(b, t, "shape", cJSON_CreateArray()) : NULL;
        attach(b, shape, NULL, cJSON_CreateString("B"));
        /* a context-parallel rank's part of the sequence */
        attach(b, shape, NULL, cJSON_CreateString(b->r->cp > 1 ? "T/CP" : "T"));
        put_string(b, t, "dtype", "int32");
    }
}

static void graph(builder *b, cJSON *doc)
{
    cJSON *blocks = cJSON_AddObjectToObject(doc, "blocks");
    cJSON *layer = blocks ? cJSON_AddObjectToObject(blocks, "layer") : NULL;
    check(b, layer);
    if (!layer)
        return;
    put_string(b, layer, "input", "x");
    b->nodes = cJSON_AddArrayToObject(layer, "nodes");
    check(b, b->nodes);
    b->cur = "x";
    if (b->nodes) {
        attention(b);
        mlp(b);
    }
    b->nodes = cJSON_AddArrayToObject(doc, "nodes");
    check(b, b->nodes);
    if (b->nodes)
        top(b);
}

int ck_hf_to_model(const cJSON *config, const char *file, const ck_model_opts *opts, cJSON **out,
                   ck_err *err)
{
    ck_hf_config c;
    ck_hf_rank r;
    int rc = ck_model_opts_check_grads(opts, err);
    if (rc == CK_OK)
        rc = ck_hf_config_read(config, file, &c, err);
    if (rc == CK_OK)
        rc = ck_hf_rank_of(&c, opts, file, &r, err);
    if (rc != CK_OK)
        return rc;
    builder b = {.c = &c, .f = c.family, .r = &r, .lora = opts->lora_rank > 0,
                 .eager = opts->attention && strcmp(opts->attention, "eager") == 0};
    cJSON *doc = cJSON_CreateObject();
    check(&b, doc);
    if (doc) {
        header(&b, doc, config, opts);
        dims(&b, doc, opts->lora_rank);
        inputs(&b, doc);
        graph(&b, doc);
    }
    if (b.oom) {
        cJSON_Delete(doc);
        return ck_err_oom(err);
    }
    *out = doc;
    return CK_OK;
}

/* Writes opts's sets, recipe, optimizer and optimizer step into doc, which
 * ck_model_from_json_opts accepted with them: each set names a dim of doc, whose training
 * section header made (impl, grads and grad_accum are written there). */
static int bake(cJSON *doc, const ck_model_opts *opts, ck_err *err)
{
    cJSON *dims = cJSON_GetObjectItemCaseSensitive(doc, "dims");
    for (size_t i = 0; i < opts->n_sets; i++) {
        char name[CK_JSON_PATH_MAX];
        snprintf(name, sizeof name, "%.*s", (int)opts->sets[i].len, opts->sets[i].name);
        cJSON *v = cJSON_CreateNumber((double)opts->sets[i].value);
        if (!v || !ck_json_put(dims, name, v)) {
            cJSON_Delete(v);
            return ck_err_oom(err);
        }
    }
    cJSON *training = cJSON_GetObjectItemCaseSensitive(doc, "training");
    const char *keys[] = {"recipe", "optimizer", "optimizer_step"},
               *values[] = {opts->recipe, opts->optimizer, opts->optimizer_step};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        cJSON *v = values[i] ? cJSON_CreateString(values[i]) : NULL;
        if (values[i] && (!v || !ck_json_put(training, keys[i], v))) {
            cJSON_Delete(v);
            return ck_err_oom(err);
        }
    }
    return CK_OK;
}

static int check_loads(const cJSON *doc, const char *file, const ck_model_opts *opts, ck_err *err)
{
    ck_model *m = NULL;
    int rc = ck_model_from_json_opts(doc, file, opts, &m, err);
    ck_model_free(m);
    return rc;
}

int ck_hf_check_text(const char *text, const char *file, ck_err *err)
{
    cJSON *back = NULL;
    int rc = ck_json_parse(file, text, strlen(text), &back, err);
    if (rc == CK_OK)
        rc = check_loads(back, file, NULL, err);
    cJSON_Delete(back);
    return rc;
}

int ck_hf_import(const cJSON *config, const char *file, const ck_model_opts *opts, cJSON **out,
                 ck_err *err)
{
    cJSON *doc = NULL;
    ck_model_opts rest = ck_hf_model_opts(opts);
    int rc = ck_hf_to_model(config, file, opts, &doc, err);
    if (rc == CK_OK) rc = check_loads(doc, file, &rest, err);
    if (rc == CK_OK) rc = bake(doc, &rest, err);
    if (rc != CK_OK) {
        cJSON_Delete(doc);
        return rc;
    }
    *out = doc;
    return CK_OK;
}
