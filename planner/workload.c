#include "planner/workload.h"

#include <stdlib.h>
#include <string.h>

#include "planner/json.h"
#include "planner/sha256.h"

#define CK_MODEL_FORMAT "ckplan-model/1"

void ck_workload_opts_default(ck_workload_opts *o)
{
    o->granularity = CK_GRAN_BLOCK;
    ck_cost_model_default(&o->cost);
}

const char *ck_granularity_name(ck_granularity g)
{
    return g == CK_GRAN_OP ? "op" : "block";
}

bool ck_granularity_parse(const char *name, ck_granularity *out)
{
    if (strcmp(name, "op") == 0)
        *out = CK_GRAN_OP;
    else if (strcmp(name, "block") == 0)
        *out = CK_GRAN_BLOCK;
    else
        return false;
    return true;
}

static int load_model(const cJSON *root, const char *path, const ck_workload_opts *opts,
                      ck_workload *w, ck_err *err)
{
    int rc = ck_model_from_json(root, path, &w->model, err);
    if (rc == CK_OK)
        rc = ck_model_to_chain(w->model, opts->granularity, &opts->cost, &w->chain, NULL, err);
    if (rc == CK_OK)
        rc = ck_model_static_memory(w->model, &w->statics, err);
    return rc;
}

int ck_workload_load(const char *path, const ck_workload_opts *opts, ck_workload *out, ck_err *err)
{
    memset(out, 0, sizeof *out);
    cJSON *root = NULL;
    char *raw = NULL;
    size_t raw_len = 0;
    int rc = ck_json_load_file(path, &root, &raw, &raw_len, err);
    if (rc != CK_OK)
        return rc;
    ck_sha256_hex(raw, raw_len, out->sha256);
    free(raw);
    out->path = strdup(path);
    if (!out->path)
        rc = ck_fail_oom(err);
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (rc != CK_OK) {
        /* out of memory, reported above */
    } else if (!cJSON_IsObject(root) || !cJSON_IsString(format)) {
        char got[96];
        ck_json_describe(cJSON_IsObject(root) ? format : root, got, sizeof got);
        rc = ck_fail(err, CK_ERR_INPUT, "%s: %s: expected %s, got %s", path,
                     cJSON_IsObject(root) ? "format" : "(top level)",
                     cJSON_IsObject(root) ? "\"" CK_CHAIN_FORMAT "\" or \"" CK_MODEL_FORMAT "\""
                                          : "an object",
                     got);
    } else if (strcmp(format->valuestring, CK_MODEL_FORMAT) == 0) {
        rc = load_model(root, path, opts, out, err);
    } else if (strcmp(format->valuestring, CK_CHAIN_FORMAT) == 0) {
        rc = ck_chain_from_json(root, path, &out->chain, err);
    } else {
        rc = ck_fail(err, CK_ERR_INPUT, "%s: format: expected \"%s\" or \"%s\", got \"%.40s\"", path,
                     CK_CHAIN_FORMAT, CK_MODEL_FORMAT, format->valuestring);
    }
    cJSON_Delete(root);
    if (rc != CK_OK)
        ck_workload_free(out);
    return rc;
}

void ck_workload_free(ck_workload *w)
{
    ck_model_free(w->model);
    ck_chain_free(&w->chain);
    free(w->path);
    memset(w, 0, sizeof *w);
}
