#include "planner/workload.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "planner/costs.h"
#include "planner/graph_model.h"
#include "planner/hf.h"
#include "planner/json.h"
#include "planner/layers.h"
#include "planner/schedule.h"
#include "planner/sha256.h"
#include "planner/size.h"

static const char *const file_formats[] = {CK_CHAIN_FORMAT, CK_MODEL_FORMAT, NULL};

void ck_workload_opts_default(ck_workload_opts *o)
{
    o->granularity = CK_GRAN_BLOCK;
    o->costs_path = NULL;
    o->model = (ck_model_opts){0};
    o->device = NULL;
    o->gemm_flops_given = o->mem_bandwidth_given = false;
    o->graphs = o->pipelines = false;
    ck_derive_cost_model_default(&o->cost);
}

size_t ck_workload_stage_at(const ck_workload *w, size_t node)
{
    for (size_t i = 0; i < w->chain.n_stages; i++)
        if (w->stage_first[i] == node)
            return i;
    return SIZE_MAX;
}

const char *ck_workload_granularity_name(ck_granularity g)
{
    return g == CK_GRAN_OP ? "op" : g == CK_GRAN_NODE ? "node" : "block";
}

bool ck_workload_granularity_parse(const char *name, ck_granularity *out)
{
    if (strcmp(name, "op") == 0)
        *out = CK_GRAN_OP;
    else if (strcmp(name, "block") == 0)
        *out = CK_GRAN_BLOCK;
    else if (strcmp(name, "node") == 0)
        *out = CK_GRAN_NODE;
    else
        return false;
    return true;
}

int ck_workload_apply_costs(ck_workload *w, const ck_workload_opts *opts, ck_err *err)
{
    cJSON *root = NULL;
    ck_costs costs;
    int rc = ck_json_load_file(opts->costs_path, &root, NULL, NULL, err);
    if (rc == CK_OK)
        rc = ck_costs_from_json(root, opts->costs_path, &costs, err);
    cJSON_Delete(root);
    if (rc != CK_OK)
        return rc;
    char *key = ck_model_opts_key(&opts->model);
    rc = key ? ck_costs_apply(&costs, opts->costs_path, w->sha256, key,
                              ck_workload_granularity_name(opts->granularity), &w->chain, err)
             : ck_err_oom(err);
    free(key);
    ck_costs_free(&costs);
    return rc;
}

/* w->graph and what it leaves out (CK_GRAN_NODE). */
static int build_graph(const ck_workload_opts *opts, ck_workload *w, ck_err *err)
{
    if (!opts->graphs)
        return ck_err_fail(err, CK_ERR_INPUT, "--granularity node: only 'ckplan plan' and 'ckplan "
                           "chain' take it (a graph plan is replayed, not run)");
    if (opts->costs_path)
        return ck_err_fail(err, CK_ERR_INPUT, "--costs: measured stage times do not apply to "
                           "--granularity node, whose nodes take the cost model's times");
    uint64_t input = ck_model_is_static(w->model, 0) ? 0 : w->model->tensors[0].bytes;
    if (!ck_size_add(w->statics.total, input, &w->graph_static_bytes))
        return ck_err_fail(err, CK_ERR_INPUT, "%s: the static memory overflows 64 bits", w->path);
    if (!(w->graph = calloc(1, sizeof *w->graph)))
        return ck_err_oom(err);
    return ck_graph_model_build(w->model, &opts->cost, w->graph, err);
}

/* A pipeline layout, only where the caller plans one, and not with a graph. */
static int check_pipeline(const ck_workload_opts *opts, ck_err *err)
{
    if (!ck_layout_pipelined(&opts->model.layout))
        return CK_OK;
    if (!opts->pipelines)
        return ck_err_fail(err, CK_ERR_INPUT, "--pp, --microbatches, --virtual-stages: pipeline "
                           "layouts are planned by 'ckplan plan' and 'ckplan sweep' only: this "
                           "command works on one chain, and a pipeline has one a rank");
    if (opts->granularity == CK_GRAN_NODE)
        return ck_err_fail(err, CK_ERR_INPUT, "--pp: pipeline stages split a chain of layers; "
                           "--granularity node plans a graph (use block or op)");
    return CK_OK;
}

/* Marks w's chain with the model's layers (ck_layers_mark), or as a model whose layers
 * are not found: only per-layer checkpointing needs them, and it says so. */
static int mark_layers(ck_workload *w, ck_err *err)
{
    ck_layers l;
    ck_err why;
    int rc = ck_layers_find(w->model, w->chain.n_stages, w->stage_first, &l, &why);
    if (rc == CK_ERR_INPUT) {
        w->chain.layers = CK_CHAIN_LAYERS_UNKNOWN;
        return CK_OK;
    }
    if (rc != CK_OK)
        return ck_err_fail(err, rc, "%s", why.msg);
    ck_layers_mark(&l, &w->chain);
    ck_layers_free(&l);
    return CK_OK;
}

/* The chain, program and static memory of w->model, and for CK_GRAN_NODE its graph. */
static int derive(const ck_workload_opts *opts, ck_workload *w, ck_err *err)
{
    if (check_pipeline(opts, err) != CK_OK)
        return CK_ERR_INPUT;
    if (opts->model.layout.partition && opts->granularity == CK_GRAN_NODE)
        return ck_err_fail(err, CK_ERR_INPUT, "--partition-activations: checkpoint functions keep "
                           "layers' inputs; --granularity node plans a graph (use block or op)");
    ck_granularity g = opts->granularity == CK_GRAN_NODE ? CK_GRAN_OP : opts->granularity;
    int rc = ck_derive_chain(w->model, g, &opts->cost, &w->chain, &w->stage_first, err);
    if (rc == CK_OK)
        rc = mark_layers(w, err);
    if (rc == CK_OK)
        ck_derive_partition(w->model, w->stage_first, &opts->model.layout, &w->chain);
    if (rc == CK_OK)
        rc = ck_lower_create(w->model, w->stage_first, w->chain.n_stages, &w->lower, err);
    if (rc == CK_OK)
        rc = ck_derive_static_memory(w->model, &opts->model.layout, &w->statics, err);
    if (rc == CK_OK && opts->granularity == CK_GRAN_NODE)
        return build_graph(opts, w, err);
    if (rc == CK_OK && opts->costs_path)
        rc = ck_workload_apply_costs(w, opts, err);
    return rc;
}

static int load_model(const cJSON *root, const char *path, const ck_workload_opts *opts,
                      ck_workload *w, ck_err *err)
{
    int rc = ck_model_from_json_opts(root, path, &opts->model, &w->model, err);
    return rc == CK_OK ? derive(opts, w, err) : rc;
}

/* A Hugging Face config: its model document, given the options that only configs take,
 * then the rest of the options as for a model file. */
static int load_config(const cJSON *root, const char *file, const ck_workload_opts *opts,
                       ck_workload *w, ck_err *err)
{
    cJSON *doc = NULL;
    int rc = ck_hf_to_model(root, file, &opts->model, &doc, err);
    ck_model_opts rest = ck_hf_model_opts(&opts->model);
    if (rc == CK_OK)
        rc = ck_model_from_json_opts(doc, file, &rest, &w->model, err);
    cJSON_Delete(doc);
    return rc == CK_OK ? derive(opts, w, err) : rc;
}

/* Every size that a plan or a run record of w can hold is at most what the store-everything
 * step needs (static memory plus the baseline's peak, in which every tensor and temporary
 * of the chain appears; a plan's peak is at most its budget, and a planner's smallest
 * budget at most the baseline's): keeping that below CK_EXACT_LIMIT keeps them all exact. */
static int check_exact(const ck_workload *w, ck_err *err)
{
    ck_schedule base = {0};
    ck_replay r;
    int rc = ck_schedule_baseline(&w->chain, &base, err);
    if (rc == CK_OK)
        rc = ck_schedule_replay(&w->chain, &base, &r, NULL, NULL, err);
    ck_schedule_free(&base);
    if (rc == CK_ERR_RUNTIME)
        return rc;
    /* The baseline is a valid schedule: its replay fails only past 2^64 bytes. */
    uint64_t total;
    if (rc != CK_OK || !ck_size_add(w->statics.total, r.peak_bytes, &total))
        return ck_err_fail(err, CK_ERR_INPUT, "%s: the store-everything step needs more than 2^64 "
                       "bytes: " CK_EXACT_LIMIT_WHY, w->path);
    if (total < CK_EXACT_LIMIT)
        return CK_OK;
    char need[32];
    ck_size_format(total, need, sizeof need);
    return ck_err_fail(err, CK_ERR_INPUT, "%s: the store-everything step needs %s (%llu bytes: static "
                   "%llu + activations %llu): " CK_EXACT_LIMIT_WHY, w->path, need,
                   (unsigned long long)total, (unsigned long long)w->statics.total,
                   (unsigned long long)r.peak_bytes);
}

/* A ckplan file: a model or a chain, by its "format". */
static int load_document(const cJSON *root, const char *path, const ck_workload_opts *opts,
                         ck_workload *w, ck_err *err)
{
    const char *format = NULL;
    int rc = ck_json_expect_format(root, file_formats, path, "", &format, err);
    if (rc == CK_OK && strcmp(format, CK_MODEL_FORMAT) == 0)
        rc = load_model(root, path, opts, w, err);
    else if (rc == CK_OK && opts->granularity == CK_GRAN_NODE)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: --granularity node applies to model files; a "
                                        "chain file's stages are fixed", path);
    else if (rc == CK_OK && opts->costs_path)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: --costs applies to model files; a chain file "
                                        "carries its own times", path);
    else if (rc == CK_OK && (ck_layout_model_parallel_given(&opts->model.layout)))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: --tp, --sp and --cp apply to Hugging Face configs; "
                         "a chain file's stages are fixed", path);
    else if (rc == CK_OK && ck_model_opts_any(&opts->model))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: --set, --seq, --batch, --optimizer, --recipe, "
                                        "--lora, --attention, --dp, --zero and --fsdp apply to "
                                        "model files; a chain file's stages are fixed and it has "
                                        "no static memory to shard nor layers to split into "
                                        "pipeline stages (--pp, --microbatches, "
                                        "--virtual-stages)", path);
    else if (rc == CK_OK)
        rc = ck_chain_from_json(root, path, "", &w->chain, err);
    return rc;
}

int ck_workload_load(const char *path, const ck_workload_opts *opts, ck_workload *out, ck_err *err)
{
    memset(out, 0, sizeof *out);
    if (ck_layout_check(&opts->model.layout, err) != CK_OK)
        return CK_ERR_INPUT;
    cJSON *root = NULL;
    char *raw = NULL, *file = ck_hf_config_path(path); /* a directory: its config.json */
    size_t raw_len = 0;
    int rc = file ? ck_json_load_file(file, &root, &raw, &raw_len, err) : ck_err_oom(err);
    if (rc != CK_OK) {
        free(file);
        return rc;
    }
    ck_sha256_hex(raw, raw_len, out->sha256);
    free(raw);
    out->path = strdup(path);
    if (!out->path)
        rc = ck_err_oom(err);
    if (rc == CK_OK && ck_hf_is_config(root))
        rc = load_config(root, file, opts, out, err);
    else if (rc == CK_OK)
        rc = load_document(root, path, opts, out, err);
    cJSON_Delete(root);
    free(file);
    if (rc == CK_OK)
        rc = check_exact(out, err);
    if (rc != CK_OK)
        ck_workload_free(out);
    return rc;
}

/* Whether w's exact figures are its compiled program's rather than its chain's. */
static bool by_program(const ck_workload *w)
{
    return w->lower && !ck_chain_partitioned(&w->chain);
}

int ck_workload_replay(const ck_workload *w, const ck_schedule *s, ck_replay *out,
                       uint64_t *live_after, uint64_t *op_peak, ck_err *err)
{
    if (by_program(w))
        return ck_lower_replay(w->lower, &w->chain, s, out, live_after, op_peak, err);
    return ck_schedule_replay(&w->chain, s, out, live_after, op_peak, err);
}

static int replay_program(const void *ctx, const ck_schedule *s, ck_replay *out, ck_err *err)
{
    return ck_workload_replay(ctx, s, out, NULL, NULL, err);
}

ck_schedule_replayer ck_workload_replayer(const ck_workload *w)
{
    return (ck_schedule_replayer){by_program(w) ? replay_program : NULL, w};
}

void ck_workload_free(ck_workload *w)
{
    if (w->graph)
        ck_graph_free(w->graph);
    free(w->graph);
    ck_lower_free(w->lower);
    ck_model_free(w->model);
    ck_chain_free(&w->chain);
    free(w->stage_first);
    free(w->path);
    memset(w, 0, sizeof *w);
}
