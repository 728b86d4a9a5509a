#include "planner/plan.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "planner/json.h"
#include "planner/size.h"

double ck_plan_overhead(double time, double baseline_time)
{
    return baseline_time > 0 ? time / baseline_time - 1 : 0;
}

static bool add_u64(cJSON *obj, const char *key, uint64_t v)
{
    return ck_json_add_number(obj, key, (double)v) != NULL;
}

static bool add_details(cJSON *root, const ck_plan_doc *d)
{
    const ck_plan_result *r = d->result;
    cJSON *details = cJSON_AddObjectToObject(root, "details");
    cJSON *ops = details ? cJSON_AddObjectToObject(details, "operations") : NULL;
    bool ok = ops && cJSON_AddBoolToObject(details, "baseline_fits", d->baseline_fits);
    for (int k = 0; ok && k < CK_N_ACTIONS; k++)
        ok = add_u64(ops, ck_action_name((ck_action_kind)k), d->predicted.count[k]);
    ok = ok && add_u64(details, "peak_operation", d->predicted.peak_op);
    if (ok && d->granularity)
        ok = cJSON_AddStringToObject(details, "granularity", d->granularity) != NULL;
    if (ok && d->time_unit)
        ok = cJSON_AddStringToObject(details, "time_unit", d->time_unit) != NULL;
    if (ok && r->snapshots >= 0)
        ok = ck_json_add_number(details, "snapshots", (double)r->snapshots) != NULL;
    if (ok && r->segments >= 0)
        ok = ck_json_add_number(details, "segments", (double)r->segments) != NULL;
    if (ok && d->costs_path)
        ok = cJSON_AddStringToObject(details, "costs", d->costs_path) != NULL;
    cJSON *cost = NULL;
    if (ok && d->cost_model)
        ok = (cost = cJSON_AddObjectToObject(details, "cost_model")) &&
             ck_json_add_number(cost, "gemm_flops", d->cost_model->gemm_flops) &&
             ck_json_add_number(cost, "mem_bandwidth", d->cost_model->mem_bandwidth);
    if (ok && r->memory_unit > 0)
        ok = add_u64(details, "memory_unit_bytes", r->memory_unit) &&
             (d->slots ? add_u64(details, "slots", d->slots)
                       : cJSON_AddStringToObject(details, "slots", "exact") != NULL);
    if (ok && d->device)
        ok = cJSON_AddStringToObject(details, "device", d->device) != NULL;
    return ok;
}

/* predicted.every_layer: the figures of checkpointing every layer, which users compare
 * the plan with, as predicted gives the plan's. */
static bool add_every_layer(cJSON *pred, const ck_plan_doc *d)
{
    const ck_plan_every *e = d->every_layer;
    if (!e)
        return true;
    cJSON *o = cJSON_AddObjectToObject(pred, "every_layer");
    return o && add_u64(o, "layers", e->layers) &&
           add_u64(o, "peak_bytes", d->static_bytes + e->replay.peak_bytes) &&
           add_u64(o, "activation_peak_bytes", e->replay.peak_bytes) &&
           ck_json_add_number(o, "time", e->replay.time) &&
           ck_json_add_number(o, "overhead", ck_plan_overhead(e->replay.time, d->baseline.time));
}

/* predicted.assumed, for a model: what the figures assume of the user's stack (the
 * implementation profile, absent when the op table's defaults run; when gradients exist, the optimizer's step, the micro-steps;
 * under PEFT's f32 adapters, the dtype of the copies of x they keep, or "none"; with a
 * frozen embedding table, whether its output requires grad) and the bytes of the gradients
 * the step makes rather than holds. */
static bool add_assumed(cJSON *pred, const ck_plan_doc *d)
{
    const ck_model *m = d->stage_map.model;
    if (!m)
        return true;
    const ck_training *t = &m->training;
    ck_dtype copy = CK_F32;
    ck_adapters adapters = ck_model_adapters(m, &copy);
    bool leaf = false, frozen = ck_model_frozen_embedding(m, &leaf);
    cJSON *o = cJSON_AddObjectToObject(pred, "assumed");
    return o &&
           (!frozen || cJSON_AddBoolToObject(o, "input_require_grads", leaf)) &&
           (adapters == CK_ADAPTERS_PLAIN ||
            cJSON_AddStringToObject(o, "lora_input_copies",
                                    adapters == CK_ADAPTERS_COPY ? ck_dtype_name(copy) : "none")) &&
           (!m->impl || cJSON_AddStringToObject(o, "impl", m->impl->name)) &&
           cJSON_AddStringToObject(o, "grads", ck_training_grads_name(t->grads)) &&
           cJSON_AddStringToObject(o, "optimizer_step", ck_training_optstep_name(t->optimizer_step)) &&
           add_u64(o, "grad_accum", t->grad_accum) &&
           add_u64(o, "gradients_made_bytes", d->statics ? d->statics->made_grads : 0);
}

/* One object per stage: its name and, for a model, the names of the nodes it covers. */
static bool add_stage_info(cJSON *root, const ck_plan_stage_map *m)
{
    if (!m->chain)
        return true;
    cJSON *list = cJSON_AddArrayToObject(root, "stage_info");
    bool ok = list != NULL;
    for (size_t i = 0; ok && i < m->chain->n_stages; i++) {
        cJSON *stage = cJSON_CreateObject(), *nodes = NULL;
        ok = stage && cJSON_AddItemToArray(list, stage) &&
             cJSON_AddStringToObject(stage, "name", m->chain->stages[i].name) &&
             (!m->model || (nodes = cJSON_AddArrayToObject(stage, "nodes")));
        const size_t *first = m->stage_first;
        for (size_t k = nodes ? first[i] : 0; ok && nodes && k < first[i + 1]; k++) {
            cJSON *node = cJSON_CreateString(m->model->nodes[k].name);
            ok = node && cJSON_AddItemToArray(nodes, node);
        }
    }
    return ok;
}

/* model.options.pp, .microbatches and .virtual_stages of a pipeline layout, defaults
 * resolved. */
static bool add_pipeline_opts(cJSON *opts, const ck_layout *l)
{
    return !ck_layout_pipelined(l) ||
           (add_u64(opts, "pp", ck_layout_pp(l)) &&
            add_u64(opts, "microbatches", ck_layout_microbatches(l)) &&
            add_u64(opts, "virtual_stages", ck_layout_virtual(l)));
}

/* model.options.tp, .sp, .cp and .partition_activations, those given: Megatron's model
 * parallelism, and DeepSpeed's partitioned checkpoints over it. */
static bool add_model_parallel(cJSON *opts, const ck_layout *l)
{
    return (!l->tp || add_u64(opts, "tp", l->tp)) && (!l->sp || cJSON_AddBoolToObject(opts, "sp", true)) &&
           (!l->cp || add_u64(opts, "cp", l->cp)) &&
           (!l->partition || cJSON_AddBoolToObject(opts, "partition_activations", true));
}

bool ck_plan_add_model_opts(cJSON *model, const ck_model_opts *o)
{
    if (!o || !ck_model_opts_any(o))
        return true;
    cJSON *opts = cJSON_AddObjectToObject(model, "options"), *set = NULL;
    bool ok = opts && (!o->n_sets || (set = cJSON_AddObjectToObject(opts, "set")));
    for (size_t i = 0; ok && i < o->n_sets; i++) {
        char name[CK_JSON_PATH_MAX];
        snprintf(name, sizeof name, "%.*s", (int)o->sets[i].len, o->sets[i].name);
        ok = o->sets[i].len < sizeof name && add_u64(set, name, o->sets[i].value);
    }
    return ok && (!o->recipe || cJSON_AddStringToObject(opts, "recipe", o->recipe)) &&
           (!o->optimizer || cJSON_AddStringToObject(opts, "optimizer", o->optimizer)) &&
           (!o->impl || cJSON_AddStringToObject(opts, "impl", o->impl)) &&
           (!o->grads || cJSON_AddStringToObject(opts, "grads", o->grads)) &&
           (!o->optimizer_step || cJSON_AddStringToObject(opts, "optimizer_step", o->optimizer_step)) &&
           (!o->grad_accum || add_u64(opts, "grad_accum", o->grad_accum)) &&
           (!o->lora_rank || add_u64(opts, "lora", o->lora_rank)) &&
           (!o->attention || cJSON_AddStringToObject(opts, "attention", o->attention)) &&
           (!o->layout.dp || (add_u64(opts, "dp", o->layout.dp) && add_u64(opts, "zero", o->layout.zero))) &&
           add_pipeline_opts(opts, &o->layout) &&
           add_model_parallel(opts, &o->layout);
}

/* predicted.static's keys in ck_plan_static's order, and their paths, for messages. */
static const char *const static_keys[] = {"parameters",     "gradients", "optimizer_state",
                                          "master_weights", "inputs",    "gather_buffers",
                                          "reduce_scatter_buffers", NULL};
static const char *const static_paths[] = {
    "predicted.static.parameters", "predicted.static.gradients",
    "predicted.static.optimizer_state", "predicted.static.master_weights",
    "predicted.static.inputs", "predicted.static.gather_buffers",
    "predicted.static.reduce_scatter_buffers"};
/* The parts plans written before layouts lack: 0 when absent. */
#define CK_PLAN_STATIC_REQUIRED 5

void ck_plan_static_of(const ck_static_mem *s, ck_plan_static *out)
{
    *out = (ck_plan_static){{s->params, s->grads, s->optimizer, s->master, s->held_inputs,
                             s->gather, s->reduce_scatter}};
}

const char *ck_plan_static_path(size_t i)
{
    return static_paths[i];
}

static bool add_statics(cJSON *model, cJSON *pred, const ck_static_mem *s)
{
    if (!s)
        return true;
    ck_plan_static parts;
    ck_plan_static_of(s, &parts);
    cJSON *obj = cJSON_AddObjectToObject(pred, "static");
    bool ok = obj && add_u64(model, "parameters", s->n_params);
    for (size_t i = 0; ok && static_keys[i]; i++)
        ok = add_u64(obj, static_keys[i], parts.bytes[i]);
    return ok;
}

/* "variant": the name of an F_all's variant, written only when it is not "all". */
static bool add_variant(cJSON *op, const ck_chain *c, const ck_action *a)
{
    return c && cJSON_AddStringToObject(op, "variant", ck_chain_variant(c, a->stage, a->variant).name);
}

cJSON *ck_plan_to_json(const ck_plan_doc *d)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *model = NULL, *pred = NULL, *sched = NULL;
    uint64_t peak = d->static_bytes + d->predicted.peak_bytes;
    uint64_t base_peak = d->static_bytes + d->baseline.peak_bytes;
    bool ok = root && cJSON_AddStringToObject(root, "format", CK_PLAN_FORMAT) &&
              cJSON_AddStringToObject(root, "planner", d->planner) &&
              (model = cJSON_AddObjectToObject(root, "model")) &&
              cJSON_AddStringToObject(model, "path", d->model_path) &&
              cJSON_AddStringToObject(model, "sha256", d->model_sha256) &&
              ck_plan_add_model_opts(model, d->model_opts) &&
              add_u64(root, "budget_bytes", d->budget_bytes) &&
              add_u64(root, "stages", d->stages) &&
              (pred = cJSON_AddObjectToObject(root, "predicted")) &&
              add_u64(pred, "peak_bytes", peak) &&
              add_u64(pred, "activation_peak_bytes", d->predicted.peak_bytes) &&
              add_u64(pred, "static_bytes", d->static_bytes) &&
              ck_json_add_number(pred, "time", d->predicted.time) &&
              ck_json_add_number(pred, "baseline_time", d->baseline.time) &&
              add_u64(pred, "baseline_peak_bytes", base_peak) &&
              add_u64(pred, "baseline_activation_peak_bytes", d->baseline.peak_bytes) &&
              ck_json_add_number(pred, "overhead",
                                      ck_plan_overhead(d->predicted.time, d->baseline.time)) &&
              add_statics(model, pred, d->statics) && add_every_layer(pred, d) && add_assumed(pred, d) &&
              add_details(root, d) && add_stage_info(root, &d->stage_map) &&
              ck_warning_add_json(root, d->warnings) &&
              ck_plan_pipeline_add_json(root, d->pipeline) &&
              (sched = cJSON_AddArrayToObject(root, "schedule"));
    const ck_schedule *s = &d->result->schedule;
    for (size_t k = 0; ok && k < s->n; k++) {
        cJSON *op = cJSON_CreateObject();
        ok = op && cJSON_AddItemToArray(sched, op) &&
             cJSON_AddStringToObject(op, "op", ck_action_name(s->actions[k].kind)) &&
             (s->actions[k].kind == CK_LOSS || add_u64(op, "stage", s->actions[k].stage)) &&
             (s->actions[k].variant == 0 || add_variant(op, d->stage_map.chain, &s->actions[k]));
    }
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* An F_all's "variant", kept by name in out->variants unless it is "all". */
static int read_variant(const cJSON *js, const char *file, const char *path, size_t k,
                        ck_action_kind kind, ck_plan_file *out, ck_err *err)
{
    const char *name = NULL;
    int rc = ck_json_get_string(js, "variant", false, &name, file, path, err);
    if (rc != CK_OK || !name || strcmp(name, CK_VARIANT_ALL) == 0)
        return rc;
    if (kind != CK_F_ALL)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: %s.variant: only an F_all runs a variant, "
                           "this is %s", file, path, ck_action_name(kind));
    void *items = out->variants;
    if (!ck_size_reserve(&items, &out->variants_cap, out->n_variants, sizeof *out->variants))
        return ck_err_oom(err);
    out->variants = items;
    char *copy = strdup(name);
    if (!copy)
        return ck_err_oom(err);
    out->variants[out->n_variants++] = (ck_plan_variant){k, copy};
    return CK_OK;
}

int ck_plan_bind_variants(const ck_plan_file *p, const ck_chain *c, const char *label,
                          ck_schedule *out, ck_err *err)
{
    for (size_t k = 0; k < p->schedule.n; k++)
        if (!ck_schedule_append(out, p->schedule.actions[k]))
            return ck_err_oom(err);
    for (size_t r = 0; r < p->n_variants; r++) {
        ck_action *a = &out->actions[p->variants[r].op];
        if (a->stage < c->n_stages &&
            ck_chain_variant_find(c, a->stage, p->variants[r].name, &a->variant))
            continue;
        char have[256] = "";
        for (size_t v = 0; a->stage < c->n_stages && v <= c->stages[a->stage].n_variants; v++)
            snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", v ? ", " : "",
                     ck_chain_variant(c, a->stage, v).name);
        return ck_err_fail(err, CK_ERR_INPUT, "%s: schedule[%zu].variant: stage %zu has no variant "
                           "\"%.40s\" (it has %s)", label, p->variants[r].op, a->stage,
                           p->variants[r].name, have);
    }
    return CK_OK;
}

static int read_schedule(const cJSON *list, const char *file, size_t stages, ck_plan_file *plan,
                         ck_err *err)
{
    static const char *const keys[] = {"op", "stage", "variant", NULL};
    ck_schedule *out = &plan->schedule;
    size_t k = 0;
    for (const cJSON *js = list->child; js; js = js->next, k++) {
        char path[CK_JSON_PATH_MAX];
        ck_json_path_index(path, "schedule", k);
        const char *name = NULL;
        uint64_t stage = 0;
        ck_action_kind kind;
        int rc = ck_json_expect_object(js, keys, file, path, err);
        if (rc == CK_OK) rc = ck_json_get_string(js, "op", true, &name, file, path, err);
        if (rc != CK_OK)
            return rc;
        if (!ck_action_parse(name, &kind))
            return ck_err_fail(err, CK_ERR_INPUT, "%s: %s.op: expected F_all, F_ck, F_none, loss or B, "
                                              "got \"%.40s\"", file, path, name);
        rc = ck_json_get_u64(js, "stage", kind != CK_LOSS, &stage, file, path, err);
        if (rc != CK_OK)
            return rc;
        if (kind != CK_LOSS && stage >= stages)
            return ck_err_fail(err, CK_ERR_INPUT, "%s: %s.stage: expected a stage below %zu, got %llu",
                           file, path, stages, (unsigned long long)stage);
        if (!ck_schedule_push(out, kind, kind == CK_LOSS ? 0 : (size_t)stage))
            return ck_err_oom(err);
        rc = read_variant(js, file, path, k, kind, plan, err);
        if (rc != CK_OK)
            return rc;
    }
    return CK_OK;
}

static int dup_string(const char *s, char **out, ck_err *err)
{
    *out = strdup(s);
    return *out ? CK_OK : ck_err_oom(err);
}

/* stage_info[i].nodes: an array of strings, copied. */
static int read_stage_nodes(const cJSON *list, const char *file, const char *path,
                            ck_plan_stage *out, ck_err *err)
{
    size_t n = (size_t)cJSON_GetArraySize(list);
    if (!(out->nodes = calloc(n ? n : 1, sizeof *out->nodes)))
        return ck_err_oom(err);
    out->has_nodes = true;
    out->n_nodes = n;
    size_t k = 0;
    for (const cJSON *js = list->child; js; js = js->next, k++) {
        if (!cJSON_IsString(js)) {
            char where[CK_JSON_PATH_MAX], got[96];
            ck_json_path_index(where, path, k);
            ck_json_describe(js, got, sizeof got);
            return ck_err_fail(err, CK_ERR_INPUT, "%s: %s: expected a string (a node's name), got %s",
                               file, where, got);
        }
        if (dup_string(js->valuestring, &out->nodes[k], err) != CK_OK)
            return CK_ERR_RUNTIME;
    }
    return CK_OK;
}

/* stage_info (optional: plans written before it have none): `stages` objects of a name
 * and, for a model's stages, the nodes they cover. */
static int read_stage_info(const cJSON *root, const char *file, ck_plan_file *out, ck_err *err)
{
    static const char *const keys[] = {"name", "nodes", NULL};
    const cJSON *list = NULL;
    int rc = ck_json_get_array(root, "stage_info", false, &list, file, "", err);
    if (rc != CK_OK || !list)
        return rc;
    size_t n = (size_t)cJSON_GetArraySize(list);
    if (n != out->stages)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: stage_info: expected %zu entries, one per stage, "
                                              "got %zu", file, out->stages, n);
    if (!(out->stage_info = calloc(n, sizeof *out->stage_info)))
        return ck_err_oom(err);
    size_t i = 0;
    for (const cJSON *js = list->child; js && rc == CK_OK; js = js->next, i++) {
        char path[CK_JSON_PATH_MAX], nodes_path[CK_JSON_PATH_MAX];
        const char *name = NULL;
        const cJSON *nodes = NULL;
        ck_json_path_index(path, "stage_info", i);
        rc = ck_json_expect_object(js, keys, file, path, err);
        if (rc == CK_OK) rc = ck_json_get_string(js, "name", true, &name, file, path, err);
        if (rc == CK_OK) rc = ck_json_get_array(js, "nodes", false, &nodes, file, path, err);
        if (rc == CK_OK) rc = dup_string(name, &out->stage_info[i].name, err);
        ck_json_path_key(nodes_path, path, "nodes");
        if (rc == CK_OK && nodes)
            rc = read_stage_nodes(nodes, file, nodes_path, &out->stage_info[i], err);
    }
    return rc;
}

/* A finite number of either sign: the overhead (an edited plan's may be anything). */
static int get_finite(const cJSON *obj, const char *key, double *out, const char *file,
                      const char *path, ck_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsNumber(v) && isfinite(v->valuedouble)) {
        *out = v->valuedouble;
        return CK_OK;
    }
    if (!v)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: %s.%s: missing (expected a finite number)", file,
                       path, key);
    char got[96];
    ck_json_describe(v, got, sizeof got);
    return ck_err_fail(err, CK_ERR_INPUT, "%s: %s.%s: expected a finite number, got %s", file, path,
                   key, got);
}

/* predicted.every_layer, when given, into f (has_every). */
static int read_every_layer(const cJSON *pred, const char *file, ck_plan_figures *f, ck_err *err)
{
    static const char *const keys[] = {"layers", "peak_bytes", "activation_peak_bytes", "time",
                                       "overhead", NULL};
    const char *p = "predicted.every_layer";
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(pred, "every_layer");
    if (!e)
        return CK_OK;
    int rc = ck_json_expect_object(e, keys, file, p, err);
    if (rc == CK_OK) rc = ck_json_get_u64(e, "layers", true, &f->every_layers, file, p, err);
    if (rc == CK_OK) rc = ck_json_get_u64(e, "peak_bytes", true, &f->every_peak_bytes, file, p, err);
    if (rc == CK_OK) rc = ck_json_get_u64(e, "activation_peak_bytes", true, &f->every_activation_peak_bytes, file, p, err);
    if (rc == CK_OK) rc = ck_json_get_time(e, "time", true, &f->every_time, file, p, err);
    if (rc == CK_OK) rc = get_finite(e, "overhead", &f->every_overhead, file, p, err);
    f->has_every = rc == CK_OK;
    return rc;
}

int ck_plan_predicted_from_json(const cJSON *root, const char *file, ck_plan_figures *f, ck_err *err)
{
    const char *p = "predicted";
    const cJSON *pred = cJSON_GetObjectItemCaseSensitive(root, p);
    if (!cJSON_IsObject(pred))
        return ck_err_fail(err, CK_ERR_INPUT, "%s: predicted: missing or not an object", file);
    int rc = ck_json_get_u64(pred, "peak_bytes", true, &f->peak_bytes, file, p, err);
    if (rc == CK_OK) rc = ck_json_get_u64(pred, "activation_peak_bytes", true, &f->activation_peak_bytes, file, p, err);
    if (rc == CK_OK) rc = ck_json_get_u64(pred, "static_bytes", true, &f->static_bytes, file, p, err);
    if (rc == CK_OK) rc = ck_json_get_u64(pred, "baseline_peak_bytes", true, &f->baseline_peak_bytes, file, p, err);
    if (rc == CK_OK) rc = ck_json_get_u64(pred, "baseline_activation_peak_bytes", true, &f->baseline_activation_peak_bytes, file, p, err);
    if (rc == CK_OK) rc = ck_json_get_time(pred, "time", true, &f->time, file, p, err);
    if (rc == CK_OK) rc = ck_json_get_time(pred, "baseline_time", true, &f->baseline_time, file, p, err);
    if (rc == CK_OK) rc = get_finite(pred, "overhead", &f->overhead, file, p, err);
    if (rc == CK_OK) rc = read_every_layer(pred, file, f, err);
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(pred, "static");
    if (rc != CK_OK || !parts)
        return rc;
    rc = ck_json_expect_object(parts, static_keys, file, "predicted.static", err);
    for (size_t i = 0; rc == CK_OK && static_keys[i]; i++)
        rc = ck_json_get_u64(parts, static_keys[i], i < CK_PLAN_STATIC_REQUIRED,
                             &f->statics.bytes[i], file, "predicted.static", err);
    f->has_static = rc == CK_OK;
    return rc;
}


static int get_rate(const cJSON *obj, const char *key, double *out, const char *file, ck_err *err)
{
    int rc = ck_json_get_time(obj, key, true, out, file, "details.cost_model", err);
    if (rc == CK_OK && !(*out > 0))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: details.cost_model.%s: expected a positive number, "
                                        "got 0", file, key);
    return rc;
}

/* The parts of `details` that say how the chain's times were made: ckplan run derives the
 * chain again the same way to replay the plan's predicted times. */
static int read_details(const cJSON *root, const char *file, ck_plan_file *out, ck_err *err)
{
    static const char *const cost_keys[] = {"gemm_flops", "mem_bandwidth", NULL};
    const cJSON *details = cJSON_GetObjectItemCaseSensitive(root, "details");
    if (!cJSON_IsObject(details))
        return CK_OK;
    const char *granularity = NULL, *costs = NULL, *device = NULL;
    const cJSON *cost = cJSON_GetObjectItemCaseSensitive(details, "cost_model");
    int rc = ck_json_get_string(details, "granularity", false, &granularity, file, "details", err);
    if (rc == CK_OK) rc = ck_json_get_string(details, "costs", false, &costs, file, "details", err);
    if (rc == CK_OK) rc = ck_json_get_string(details, "device", false, &device, file, "details", err);
    if (rc == CK_OK && cost) {
        rc = ck_json_expect_object(cost, cost_keys, file, "details.cost_model", err);
        if (rc == CK_OK) rc = get_rate(cost, "gemm_flops", &out->cost_model.gemm_flops, file, err);
        if (rc == CK_OK) rc = get_rate(cost, "mem_bandwidth", &out->cost_model.mem_bandwidth, file, err);
        out->has_cost_model = rc == CK_OK;
    }
    if (rc == CK_OK && granularity) rc = dup_string(granularity, &out->granularity, err);
    if (rc == CK_OK && costs) rc = dup_string(costs, &out->costs_path, err);
    if (rc == CK_OK && device) rc = dup_string(device, &out->device, err);
    return rc;
}

int ck_plan_check_sha256(const char *sha, const char *file, ck_err *err)
{
    size_t n = 0;
    while (isxdigit((unsigned char)sha[n]))
        n++;
    if (n == 64 && sha[n] == '\0')
        return CK_OK;
    return ck_err_fail(err, CK_ERR_INPUT, "%s: model.sha256: expected 64 hexadecimal digits, got "
                                      "\"%.70s\"", file, sha);
}

static int read_model_sets(const cJSON *set, const char *file, ck_model_opts *o, ck_err *err)
{
    int rc = cJSON_IsObject(set) ? CK_OK
             : ck_err_fail(err, CK_ERR_INPUT, "%s: model.options.set: expected an object of dim "
                           "names and sizes", file);
    for (const cJSON *d = set->child; rc == CK_OK && d; d = d->next) {
        char path[CK_JSON_PATH_MAX];
        ck_json_path_key(path, "model.options.set", d->string);
        uint64_t v = 0;
        rc = ck_json_as_u64(d, &v, file, path, err);
        if (rc == CK_OK && (v == 0 || !ck_model_opts_set(o, d->string, strlen(d->string), v)))
            rc = ck_err_fail(err, CK_ERR_INPUT, "%s: %s: expected a positive size (at most %d dims)",
                             file, path, CK_MODEL_MAX_DIMS);
    }
    return rc;
}

/* model.options.dp and .zero, both or neither, in --dp's and --zero's ranges. */
static int read_layout(const cJSON *opts, const char *file, ck_layout *l, ck_err *err)
{
    uint64_t dp = 0, zero = 0;
    bool given = cJSON_GetObjectItemCaseSensitive(opts, "dp") || cJSON_GetObjectItemCaseSensitive(opts, "zero");
    int rc = ck_json_get_u64(opts, "dp", given, &dp, file, "model.options", err);
    if (rc == CK_OK) rc = ck_json_get_u64(opts, "zero", given, &zero, file, "model.options", err);
    if (rc == CK_OK && given && (dp < 1 || dp > CK_LAYOUT_MAX_DP))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: model.options.dp: expected a whole number from 1 "
                         "to %d (data-parallel ranks), got %llu", file, CK_LAYOUT_MAX_DP,
                         (unsigned long long)dp);
    if (rc == CK_OK && zero > CK_LAYOUT_MAX_ZERO)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: model.options.zero: expected a ZeRO stage from 0 "
                         "to %d, got %llu", file, CK_LAYOUT_MAX_ZERO, (unsigned long long)zero);
    l->dp = dp;
    l->zero = (unsigned)zero;
    return rc;
}

/* model.options.pp, .microbatches and .virtual_stages: all three or none, in the options'
 * ranges. */
static int read_pipeline_opts(const cJSON *opts, const char *file, ck_layout *l, ck_err *err)
{
    static const char *const keys[] = {"pp", "microbatches", "virtual_stages"};
    static const uint64_t max[] = {CK_LAYOUT_MAX_PP, CK_LAYOUT_MAX_MICROBATCHES, CK_LAYOUT_MAX_VIRTUAL};
    uint64_t v[3] = {0, 0, 0};
    bool given = false;
    for (size_t i = 0; i < 3; i++)
        given = given || cJSON_GetObjectItemCaseSensitive(opts, keys[i]);
    int rc = CK_OK;
    for (size_t i = 0; i < 3 && rc == CK_OK && given; i++) {
        rc = ck_json_get_u64(opts, keys[i], true, &v[i], file, "model.options", err);
        if (rc == CK_OK && (v[i] < 1 || v[i] > max[i]))
            rc = ck_err_fail(err, CK_ERR_INPUT, "%s: model.options.%s: expected a whole number "
                             "from 1 to %llu, got %llu", file, keys[i],
                             (unsigned long long)max[i], (unsigned long long)v[i]);
    }
    l->pp = v[0];
    l->microbatches = v[1];
    l->virtual_stages = v[2];
    return rc;
}

/* model.options.tp and .cp in --tp's and --cp's ranges, .sp (true) only with tp above 1, and
 * .partition_activations (true) only with tp above 1 and no sp. */
static int read_model_parallel(const cJSON *opts, const char *file, ck_layout *l, ck_err *err)
{
    const char *path = "model.options";
    int rc = ck_json_get_u64(opts, "tp", false, &l->tp, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_bool(opts, "sp", false, &l->sp, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_u64(opts, "cp", false, &l->cp, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_bool(opts, "partition_activations", false, &l->partition, file, path, err);
    if (rc == CK_OK && cJSON_GetObjectItemCaseSensitive(opts, "tp") && (l->tp < 1 || l->tp > CK_LAYOUT_MAX_TP))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: model.options.tp: expected a whole number from 1 to %d "
                         "(tensor-parallel ranks), got %llu", file, CK_LAYOUT_MAX_TP,
                         (unsigned long long)l->tp);
    if (rc == CK_OK && cJSON_GetObjectItemCaseSensitive(opts, "cp") && (l->cp < 1 || l->cp > CK_LAYOUT_MAX_CP))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: model.options.cp: expected a whole number from 1 to %d "
                         "(context-parallel ranks), got %llu", file, CK_LAYOUT_MAX_CP,
                         (unsigned long long)l->cp);
    if (rc == CK_OK && cJSON_GetObjectItemCaseSensitive(opts, "sp") && !(l->sp && ck_layout_tp(l) > 1))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: model.options.sp: expected true, and only with "
                         "model.options.tp above 1 (sequence parallelism splits over the "
                         "tensor-parallel ranks)", file);
    if (rc == CK_OK && cJSON_GetObjectItemCaseSensitive(opts, "partition_activations") &&
        !(l->partition && ck_layout_tp(l) > 1 && !l->sp))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: model.options.partition_activations: expected true, "
                         "and only with model.options.tp above 1 and no sp (checkpoints split over "
                         "the tensor-parallel ranks)", file);
    return rc;
}

int ck_plan_read_model_opts(const cJSON *model, const char *file, ck_model_opts *o, cJSON **json,
                            ck_err *err)
{
    static const char *const keys[] = {"set",  "recipe", "optimizer", "impl", "grads", "optimizer_step",
                                       "grad_accum", "lora", "attention",
                                       "dp",   "zero",   "tp",        "sp",   "cp",
                                       "pp",   "microbatches",       "virtual_stages",
                                       "partition_activations", NULL};
    const cJSON *given = cJSON_GetObjectItemCaseSensitive(model, "options");
    if (!given)
        return CK_OK;
    if (!(*json = cJSON_Duplicate(given, true)))
        return ck_err_oom(err);
    const cJSON *opts = *json, *set = cJSON_GetObjectItemCaseSensitive(opts, "set");
    const char *path = "model.options";
    int rc = ck_json_expect_object(opts, keys, file, path, err);
    if (rc == CK_OK && set) rc = read_model_sets(set, file, o, err);
    if (rc == CK_OK) rc = ck_json_get_string(opts, "recipe", false, &o->recipe, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_string(opts, "optimizer", false, &o->optimizer, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_string(opts, "impl", false, &o->impl, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_string(opts, "grads", false, &o->grads, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_string(opts, "optimizer_step", false, &o->optimizer_step, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_u64(opts, "grad_accum", false, &o->grad_accum, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_u64(opts, "lora", false, &o->lora_rank, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_string(opts, "attention", false, &o->attention, file, path, err);
    if (rc == CK_OK) rc = read_layout(opts, file, &o->layout, err);
    if (rc == CK_OK) rc = read_pipeline_opts(opts, file, &o->layout, err);
    if (rc == CK_OK) rc = read_model_parallel(opts, file, &o->layout, err);
    return rc;
}

int ck_plan_from_json(const cJSON *root, const char *file, ck_plan_file *out, ck_err *err)
{
    static const char *const formats[] = {CK_PLAN_FORMAT, NULL};
    static const char *const model_keys[] = {"path", "sha256", "options", "parameters", NULL};
    memset(out, 0, sizeof *out);
    const char *format, *planner = NULL, *path = NULL, *sha = NULL;
    const cJSON *model = NULL, *schedule = NULL;
    uint64_t stages = 0;
    int rc = ck_json_expect_format(root, formats, file, "", &format, err);
    if (rc == CK_OK && cJSON_GetObjectItemCaseSensitive(root, "kind"))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: kind: a graph plan (\"kind\": \"graph\"), made from a "
                         "Checkmate graph: only 'ckplan run' reads those (it replays them); this "
                         "command takes plans of models and chain files", file);
    if (rc == CK_OK) rc = ck_json_get_string(root, "planner", true, &planner, file, "", err);
    if (rc == CK_OK && !(model = cJSON_GetObjectItemCaseSensitive(root, "model")))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: model: missing (expected an object)", file);
    if (rc == CK_OK) rc = ck_json_expect_object(model, model_keys, file, "model", err);
    if (rc == CK_OK) rc = ck_json_get_string(model, "path", true, &path, file, "model", err);
    if (rc == CK_OK) rc = ck_json_get_string(model, "sha256", true, &sha, file, "model", err);
    if (rc == CK_OK) rc = ck_plan_check_sha256(sha, file, err);
    if (rc == CK_OK) rc = ck_plan_read_model_opts(model, file, &out->model_opts, &out->model_opts_json, err);
    if (rc == CK_OK) rc = ck_json_get_u64(model, "parameters", false, &out->parameters, file, "model", err);
    out->has_parameters = rc == CK_OK && cJSON_GetObjectItemCaseSensitive(model, "parameters");
    if (rc == CK_OK) rc = ck_json_get_u64(root, "budget_bytes", true, &out->budget_bytes, file, "", err);
    if (rc == CK_OK) rc = ck_json_get_u64(root, "stages", true, &stages, file, "", err);
    if (rc == CK_OK && stages == 0)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: stages: expected at least 1, got 0", file);
    if (rc == CK_OK) /* the limit in force, so that what plan wrote under it, run reads */
        rc = ck_chain_check_length((size_t)stages, file, "stages", err);
    if (rc == CK_OK) rc = ck_plan_predicted_from_json(root, file, &out->predicted, err);
    if (rc == CK_OK) rc = ck_json_get_array(root, "schedule", true, &schedule, file, "", err);
    if (rc == CK_OK) rc = read_details(root, file, out, err);
    if (rc == CK_OK) rc = dup_string(planner, &out->planner, err);
    if (rc == CK_OK) rc = dup_string(path, &out->model_path, err);
    if (rc == CK_OK) rc = dup_string(sha, &out->model_sha256, err);
    if (rc == CK_OK) {
        out->stages = (size_t)stages;
        rc = read_schedule(schedule, file, out->stages, out, err);
    }
    if (rc == CK_OK) rc = read_stage_info(root, file, out, err);
    if (rc == CK_OK) rc = ck_warning_check_json(root, file, err);
    if (rc == CK_OK)
        rc = ck_plan_pipeline_read(root, file, &out->model_opts.layout, &out->predicted,
                                   &out->pipeline, err);
    if (rc != CK_OK)
        ck_plan_file_free(out);
    return rc;
}

void ck_plan_file_free(ck_plan_file *p)
{
    free(p->planner);
    free(p->model_path);
    free(p->model_sha256);
    cJSON_Delete(p->model_opts_json);
    free(p->granularity);
    free(p->costs_path);
    free(p->device);
    for (size_t i = 0; p->stage_info && i < p->stages; i++) {
        for (size_t k = 0; k < p->stage_info[i].n_nodes; k++)
            free(p->stage_info[i].nodes[k]);
        free(p->stage_info[i].nodes);
        free(p->stage_info[i].name);
    }
    free(p->stage_info);
    ck_schedule_free(&p->schedule);
    for (size_t r = 0; r < p->n_variants; r++)
        free(p->variants[r].name);
    free(p->variants);
    ck_plan_pipeline_free(&p->pipeline);
    memset(p, 0, sizeof *p);
}
