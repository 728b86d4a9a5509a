#include "planner/warning.h"

#include <stdarg.h>
#include <string.h>

#include "planner/json.h"
#include "planner/planner.h"
#include "planner/size.h"

static ck_warning *add(ck_warnings *w, const char *code, uint64_t bytes)
{
    ck_warning *x = &w->items[w->n++];
    x->code = code;
    x->bytes = bytes;
    x->message[0] = '\0';
    return x;
}

static void say(ck_warning *x, const char *fmt, ...)
{
    size_t used = strlen(x->message);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->message + used, sizeof x->message - used, fmt, ap);
    va_end(ap);
}

static int overflow(const ck_model *m, const char *what, ck_err *err)
{
    return ck_err_fail(err, CK_ERR_INPUT, "%s: %s overflow 64 bits", m->file, what);
}

/* One attention node's K and V: its batch, sequence, key/value heads and head size. */
typedef struct {
    uint64_t b, t, kv_heads, head_dim, dtype_bytes;
} kv_shape;

static kv_shape kv_of(const ck_model *m, const ck_node *n)
{
    const ck_ttype *in = &m->tensors[n->inputs[0]].type;
    const ck_ttype *out = &m->tensors[n->output].type;
    return (kv_shape){in->dim[0], in->dim[1], n->attrs.kv_heads, out->dim[2] / n->attrs.heads,
                      ck_dtype_bytes(in->dtype)};
}

int ck_warning_kv_cache_bytes(const ck_model *m, uint64_t *out, ck_err *err)
{
    *out = 0;
    bool ok = true;
    for (size_t k = 0; ok && k < m->n_nodes; k++) {
        if (m->nodes[k].op->kind != CK_OP_ATTENTION)
            continue;
        kv_shape s = kv_of(m, &m->nodes[k]);
        uint64_t b = 2;
        ok = ck_size_mul(b, s.b, &b) && ck_size_mul(b, s.t, &b) && ck_size_mul(b, s.kv_heads, &b) &&
             ck_size_mul(b, s.head_dim, &b) && ck_size_mul(b, s.dtype_bytes, &b) &&
             ck_size_add(*out, b, out);
    }
    return ok ? CK_OK : overflow(m, "the KV cache's bytes", err);
}

static uint64_t internal_bytes(const ck_op_info *info)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < info->n_saved; i++)
        if (info->saved[i].kind == CK_SAVE_INTERNAL)
            sum += info->saved[i].bytes; /* each below the node's checked total */
    return sum;
}

static uint64_t workspace_of(const ck_op_info *info)
{
    return info->fwd_ws_bytes > info->bwd_ws_bytes ? info->fwd_ws_bytes : info->bwd_ws_bytes;
}

/* The op table's figures for node n with a flash kernel. */
static int flash_figure(const ck_model *m, const ck_node *n, uint64_t *out, ck_err *err)
{
    ck_attrs a = n->attrs;
    a.flash = true;
    ck_ttype in[CK_OP_MAX_ARITY];
    for (size_t i = 0; i < n->op->arity; i++)
        in[i] = m->tensors[n->inputs[i]].type;
    ck_op_info info;
    int rc = ck_op_describe(n->op, &a, in, &m->tensors[n->output].type, &info, m->file, n->name, err);
    *out = internal_bytes(&info) + workspace_of(&info);
    return rc;
}

static size_t stage_of(const ck_workload *w, size_t node)
{
    size_t i = 0;
    while (i + 1 < w->chain.n_stages && w->stage_first[i + 1] <= node)
        i++;
    return i;
}

int ck_warning_attention_scores(const ck_workload *w, ck_attention_scores *out, ck_err *err)
{
    const ck_model *m = w->model;
    memset(out, 0, sizeof *out);
    out->node = CK_NO_NODE;
    int rc = CK_OK;
    for (size_t k = 0; rc == CK_OK && k < m->n_nodes; k++) {
        const ck_node *n = &m->nodes[k];
        if (n->op->kind != CK_OP_ATTENTION || n->attrs.flash)
            continue;
        uint64_t kept = internal_bytes(&n->info), ws = workspace_of(&n->info), saved;
        if (out->node != CK_NO_NODE && kept + ws <= out->kept + out->workspace)
            continue;
        size_t i = stage_of(w, k);
        rc = ck_derive_saved_bytes(m, w->stage_first[i], w->stage_first[i + 1], &saved, err);
        if (rc == CK_OK)
            rc = flash_figure(m, n, &out->flash, err);
        if (rc == CK_OK)
            *out = (ck_attention_scores){k, kept, ws, out->flash, saved - kept};
    }
    return rc;
}

static void add_kv_cache(const ck_model *m, uint64_t bytes, ck_warnings *out)
{
    char size[32];
    ck_size_format(bytes, size, sizeof size);
    ck_warning *x = add(out, "kv_cache", bytes);
    say(x, "the model keeps a KV cache (use_cache: true) and this plans training: at this batch "
           "and sequence the cache would hold %s (%llu bytes",
        size, (unsigned long long)bytes);
    size_t layers = 0;
    kv_shape first = {0};
    bool same = true;
    for (size_t k = 0; k < m->n_nodes; k++) {
        if (m->nodes[k].op->kind != CK_OP_ATTENTION)
            continue;
        kv_shape s = kv_of(m, &m->nodes[k]);
        same = same && (layers == 0 || memcmp(&s, &first, sizeof s) == 0);
        first = layers++ ? first : s;
    }
    if (same)
        say(x, " = 2 x %zu layers x batch %llu x seq %llu x %llu kv heads x head size %llu x %llu "
               "bytes", layers, (unsigned long long)first.b, (unsigned long long)first.t,
            (unsigned long long)first.kv_heads, (unsigned long long)first.head_dim,
            (unsigned long long)first.dtype_bytes);
    say(x, "), not counted in the plan. Training has no use for it: turn it off "
           "(model.config.use_cache = False); checkpointing needs it off, and Hugging Face's "
           "gradient checkpointing turns it off itself");
}

static void add_attention(const ck_model *m, const ck_attention_scores *a, ck_warnings *out)
{
    const ck_node *n = &m->nodes[a->node];
    kv_shape s = kv_of(m, n);
    char total[32], kept[32], ws[32], rest[32], flash[32];
    ck_size_format(a->kept + a->workspace, total, sizeof total);
    ck_size_format(a->kept, kept, sizeof kept);
    ck_size_format(a->workspace, ws, sizeof ws);
    ck_size_format(a->stage_rest, rest, sizeof rest);
    ck_size_format(a->flash, flash, sizeof flash);
    ck_warning *x = add(out, "attention_scores", a->kept + a->workspace);
    say(x, "attention '%s' has no flash kernel: at batch %llu, %llu heads, seq %llu its B*H*T*T "
           "score matrices take %s (%llu bytes: %s kept for backward, %s of workspace), more "
           "than the %s the rest of its stage saves. No plan can go below it: it lies inside "
           "one stage, whose backward needs it whole. With a flash kernel (\"flash\": true) the "
           "layer keeps only the log-sum-exp rows: %s (%llu bytes)",
        n->name, (unsigned long long)s.b, (unsigned long long)n->attrs.heads,
        (unsigned long long)s.t, total, (unsigned long long)(a->kept + a->workspace), kept, ws,
        rest, flash, (unsigned long long)a->flash);
}

int ck_warning_training(const ck_workload *w, ck_warnings *out, ck_err *err)
{
    out->n = 0;
    const ck_model *m = w->model;
    if (!m)
        return CK_OK;
    uint64_t kv;
    int rc = CK_OK;
    if (m->use_cache && (rc = ck_warning_kv_cache_bytes(m, &kv, err)) == CK_OK)
        add_kv_cache(m, kv, out);
    ck_attention_scores a;
    if (rc == CK_OK)
        rc = ck_warning_attention_scores(w, &a, err);
    if (rc == CK_OK && a.node != CK_NO_NODE && a.kept + a.workspace > a.stage_rest)
        add_attention(m, &a, out);
    return rc;
}

/* The static memory per GPU of `how` over n GPUs. */
static int per_gpu(const ck_model *m, const ck_static_mem *s, ck_sharding how, uint64_t n,
                   uint64_t *out, ck_err *err)
{
    ck_static_mem sharded;
    if (how == CK_OFFLOAD) {
        *out = s->total - s->optimizer - s->master; /* parts of its total */
        return CK_OK;
    }
    int rc = ck_derive_static_memory(m, &(ck_layout){.dp = n, .zero = (unsigned)how + 1}, &sharded, err);
    *out = sharded.total;
    return rc;
}

/* The fewest GPUs (up to CK_WARNING_MAX_GPUS) with which `how` fits the budget, or 0: a
 * binary search, as a rank's share never grows with the ranks. */
static int fewest_gpus(const ck_model *m, const ck_static_mem *s, ck_sharding how,
                       uint64_t budget, uint64_t min_activation, uint64_t *out, ck_err *err)
{
    uint64_t lo = 1, hi = how == CK_OFFLOAD ? 1 : CK_WARNING_MAX_GPUS, bytes;
    int rc = per_gpu(m, s, how, hi, &bytes, err);
    *out = 0;
    if (rc != CK_OK || ck_planner_step_budget(bytes, min_activation) > budget)
        return rc;
    while (rc == CK_OK && lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        rc = per_gpu(m, s, how, mid, &bytes, err);
        if (ck_planner_step_budget(bytes, min_activation) <= budget)
            hi = mid;
        else
            lo = mid + 1;
    }
    *out = lo;
    return rc;
}

int ck_warning_sharding_figures(const ck_model *m, const ck_static_mem *s, uint64_t budget,
                                uint64_t min_activation, ck_sharding_figures *out, ck_err *err)
{
    int rc = CK_OK;
    for (int k = 0; rc == CK_OK && k < CK_N_SHARDINGS; k++) {
        rc = per_gpu(m, s, (ck_sharding)k, k == CK_OFFLOAD ? 1 : CK_WARNING_SHOWN_GPUS,
                     &out->per_gpu[k], err);
        if (rc == CK_OK)
            rc = fewest_gpus(m, s, (ck_sharding)k, budget, min_activation, &out->fewest[k], err);
    }
    return rc;
}

/* The figures of s, for static_over_budget's message. */
static void say_static(ck_warning *x, const ck_static_mem *s, uint64_t budget, uint64_t min_activation)
{
    char have[32], total[32], p[32], g[32], o[32], m[32], h[32], act[32], layout[96] = "";
    ck_size_format(budget, have, sizeof have);
    ck_size_format(s->total, total, sizeof total);
    ck_size_format(s->params, p, sizeof p);
    ck_size_format(s->made_grads ? s->made_grads : s->grads, g, sizeof g);
    ck_size_format(s->optimizer, o, sizeof o);
    ck_size_format(s->master, m, sizeof m);
    ck_size_format(s->held_inputs, h, sizeof h);
    ck_size_format(min_activation, act, sizeof act);
    if (s->layout.dp)
        snprintf(layout, sizeof layout, " per rank of --dp %llu --zero %u",
                 (unsigned long long)s->layout.dp, s->layout.zero);
    say(x, "budget %s is below the static memory%s of %s (%llu bytes: parameters %s, gradients %s%s%s, "
           "optimizer state %s, master weights %s, held inputs %s", have, layout, total,
        (unsigned long long)s->total, p, s->made_grads ? "0 B (made in the backward: " : "", g,
        s->made_grads ? ", counted with the activations)" : "", o, m, h);
    if (s->gather || s->reduce_scatter) {
        char ga[32], rs[32];
        ck_size_format(s->gather, ga, sizeof ga);
        ck_size_format(s->reduce_scatter, rs, sizeof rs);
        say(x, ", gather buffers %s, reduce-scatter buffers %s", ga, rs);
    }
    say(x, "). Checkpointing only reduces activations (the smallest plan needs %s of them%s); to "
           "fit, shard these (ZeRO, FSDP), offload them or quantize them. Static memory per GPU",
        act, s->made_grads ? ", with the gradients made by then" : "");
}

int ck_warning_static_over_budget(const ck_model *m, const ck_static_mem *s, uint64_t budget,
                                  uint64_t min_activation, ck_warning *x, ck_err *err)
{
    static const char *const names[] = {"ZeRO-1 (optimizer state and master weights sharded)",
                                        "ZeRO-2 (and gradients)", "ZeRO-3 (and parameters)",
                                        "optimizer offload to CPU (state and master weights)"};
    ck_sharding_figures f;
    int rc = ck_warning_sharding_figures(m, s, budget, min_activation, &f, err);
    if (rc != CK_OK)
        return rc;
    *x = (ck_warning){.code = "static_over_budget", .bytes = s->total};
    say_static(x, s, budget, min_activation);
    for (int k = 0; k < CK_N_SHARDINGS; k++) {
        char per[32];
        ck_size_format(f.per_gpu[k], per, sizeof per);
        say(x, "%s %s", k ? ";" : ":", names[k]);
        if (k != CK_OFFLOAD)
            say(x, " over %d GPUs", CK_WARNING_SHOWN_GPUS);
        say(x, " %s", per);
        if (k == CK_OFFLOAD)
            say(x, f.fewest[k] ? ", fits with the smallest plan" : ", does not fit with the smallest plan");
        else if (f.fewest[k])
            say(x, ", fits with the smallest plan from %llu GPUs", (unsigned long long)f.fewest[k]);
        else
            say(x, ", does not fit with the smallest plan at any GPU count up to %d",
                CK_WARNING_MAX_GPUS);
    }
    say(x, ".");
    return CK_OK;
}

void ck_warning_print(FILE *f, const ck_warnings *w)
{
    for (size_t i = 0; i < w->n; i++)
        fprintf(f, "ckplan: warning: %s: %s\n", w->items[i].code, w->items[i].message);
}

bool ck_warning_add_json(cJSON *obj, const ck_warnings *w)
{
    if (!w || w->n == 0)
        return true;
    cJSON *list = cJSON_AddArrayToObject(obj, "warnings");
    bool ok = list != NULL;
    for (size_t i = 0; ok && i < w->n; i++) {
        cJSON *x = cJSON_CreateObject();
        ok = x && cJSON_AddItemToArray(list, x) &&
             cJSON_AddStringToObject(x, "code", w->items[i].code) &&
             cJSON_AddStringToObject(x, "message", w->items[i].message) &&
             ck_json_add_number(x, "bytes", (double)w->items[i].bytes);
    }
    return ok;
}

int ck_warning_check_json(const cJSON *root, const char *file, ck_err *err)
{
    static const char *const keys[] = {"code", "message", "bytes", NULL};
    const cJSON *list = NULL;
    int rc = ck_json_get_array(root, "warnings", false, &list, file, "", err);
    size_t n = list ? (size_t)cJSON_GetArraySize(list) : 0;
    for (size_t i = 0; rc == CK_OK && i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "warnings[%zu]", i);
        const cJSON *x = cJSON_GetArrayItem(list, (int)i);
        const char *s;
        uint64_t bytes;
        rc = ck_json_expect_object(x, keys, file, path, err);
        if (rc == CK_OK) rc = ck_json_get_string(x, "code", true, &s, file, path, err);
        if (rc == CK_OK) rc = ck_json_get_string(x, "message", true, &s, file, path, err);
        if (rc == CK_OK) rc = ck_json_get_u64(x, "bytes", true, &bytes, file, path, err);
    }
    return rc;
}
