#include "planner/graph_plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/json.h"

void ck_graph_plan_figures(const ck_graph_replay *plan, const ck_graph_replay *baseline,
                           ck_plan_figures *out)
{
    memset(out, 0, sizeof *out);
    out->peak_bytes = out->activation_peak_bytes = plan->peak_bytes;
    out->baseline_peak_bytes = out->baseline_activation_peak_bytes = baseline->peak_bytes;
    out->time = plan->time;
    out->baseline_time = baseline->time;
    out->overhead = ck_plan_overhead(plan->time, baseline->time);
}

static bool add_predicted(cJSON *root, const ck_graph_plan_doc *d)
{
    ck_plan_figures f;
    ck_graph_plan_figures(&d->predicted, &d->baseline, &f);
    cJSON *p = cJSON_AddObjectToObject(root, "predicted");
    return p && ck_json_add_number(p, "peak_bytes", (double)f.peak_bytes) &&
           ck_json_add_number(p, "activation_peak_bytes", (double)f.activation_peak_bytes) &&
           ck_json_add_number(p, "static_bytes", 0) && ck_json_add_number(p, "time", f.time) &&
           ck_json_add_number(p, "baseline_time", f.baseline_time) &&
           ck_json_add_number(p, "baseline_peak_bytes", (double)f.baseline_peak_bytes) &&
           ck_json_add_number(p, "baseline_activation_peak_bytes", (double)f.baseline_activation_peak_bytes) &&
           ck_json_add_number(p, "overhead", f.overhead);
}

/* The replay's counts, and what the planner adds (milp: status, bound, gap). */
static bool add_details(cJSON *root, const ck_graph_plan_doc *d)
{
    const ck_graph_plan_result *r = d->result;
    cJSON *det = cJSON_AddObjectToObject(root, "details");
    bool ok = det && ck_json_add_number(det, "computes", (double)d->predicted.computes) &&
              ck_json_add_number(det, "recomputes", (double)(d->predicted.computes - d->graph->n_nodes)) &&
              ck_json_add_number(det, "peak_operation", (double)d->predicted.peak_op);
    if (ok && r->status)
        ok = cJSON_AddStringToObject(det, "status", r->status) != NULL;
    if (ok && isfinite(r->bound))
        ok = ck_json_add_number(det, "bound", r->bound) != NULL;
    if (ok && isfinite(r->gap))
        ok = ck_json_add_number(det, "gap", r->gap) != NULL;
    if (ok && d->time_limit_s > 0)
        ok = ck_json_add_number(det, "time_limit_seconds", d->time_limit_s) != NULL;
    return ok;
}

static bool add_schedule(cJSON *root, const ck_graph_schedule *s)
{
    cJSON *list = cJSON_AddArrayToObject(root, "schedule");
    bool ok = list != NULL;
    for (size_t k = 0; ok && k < s->n; k++) {
        cJSON *op = cJSON_CreateObject();
        ok = op && cJSON_AddItemToArray(list, op) &&
             cJSON_AddStringToObject(op, "op", s->ops[k].kind == CK_GRAPH_COMPUTE ? "compute" : "free") &&
             ck_json_add_number(op, "node", (double)s->ops[k].node);
    }
    return ok;
}

cJSON *ck_graph_plan_to_json(const ck_graph_plan_doc *d)
{
    cJSON *root = cJSON_CreateObject(), *model = NULL;
    bool ok = root && cJSON_AddStringToObject(root, "format", CK_PLAN_FORMAT) &&
              cJSON_AddStringToObject(root, "kind", CK_GRAPH_PLAN_KIND) &&
              cJSON_AddStringToObject(root, "planner", d->planner) &&
              (model = cJSON_AddObjectToObject(root, "model")) &&
              cJSON_AddStringToObject(model, "path", d->model_path) &&
              cJSON_AddStringToObject(model, "sha256", d->model_sha256) &&
              cJSON_AddStringToObject(model, "name", d->graph->name) &&
              ck_json_add_number(root, "budget_bytes", (double)d->budget_bytes) &&
              ck_json_add_number(root, "nodes", (double)d->graph->n_nodes) && add_predicted(root, d) &&
              add_details(root, d) && add_schedule(root, &d->result->schedule);
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

bool ck_graph_plan_is_graph(const cJSON *root)
{
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
    return cJSON_IsString(kind) && strcmp(kind->valuestring, CK_GRAPH_PLAN_KIND) == 0;
}

static int read_schedule(const cJSON *list, const char *file, size_t nodes, ck_graph_schedule *out,
                         ck_err *err)
{
    static const char *const keys[] = {"op", "node", NULL};
    size_t k = 0;
    for (const cJSON *js = list->child; js; js = js->next, k++) {
        char path[CK_JSON_PATH_MAX];
        ck_json_path_index(path, "schedule", k);
        const char *name = NULL;
        uint64_t node = 0;
        int rc = ck_json_expect_object(js, keys, file, path, err);
        if (rc == CK_OK) rc = ck_json_get_string(js, "op", true, &name, file, path, err);
        if (rc == CK_OK && strcmp(name, "compute") != 0 && strcmp(name, "free") != 0)
            rc = ck_err_fail(err, CK_ERR_INPUT, "%s: %s.op: expected \"compute\" or \"free\", got "
                             "\"%.40s\"", file, path, name);
        if (rc == CK_OK) rc = ck_json_get_u64(js, "node", true, &node, file, path, err);
        if (rc == CK_OK && node >= nodes)
            rc = ck_err_fail(err, CK_ERR_INPUT, "%s: %s.node: expected a node below %zu, got %llu",
                             file, path, nodes, (unsigned long long)node);
        if (rc != CK_OK)
            return rc;
        if (!ck_graph_schedule_push(out, strcmp(name, "compute") == 0 ? CK_GRAPH_COMPUTE : CK_GRAPH_FREE,
                                    (size_t)node))
            return ck_err_oom(err);
    }
    return CK_OK;
}

/* The fields, checked, in the order the file has them; the schedule last. */
static int read_fields(const cJSON *root, const char *file, ck_graph_plan_file *out,
                       const cJSON **schedule, ck_err *err)
{
    static const char *const keys[] = {"format", "kind", "planner", "model", "budget_bytes", "nodes",
                                       "predicted", "details", "schedule", NULL};
    static const char *const model_keys[] = {"path", "sha256", "name", NULL};
    static const char *const formats[] = {CK_PLAN_FORMAT, NULL};
    const char *format, *planner = NULL, *path = NULL, *sha = NULL, *name = NULL;
    const cJSON *model = NULL, *details = NULL;
    uint64_t nodes = 0;
    int rc = ck_json_expect_object(root, keys, file, "", err);
    if (rc == CK_OK) rc = ck_json_expect_format(root, formats, file, "", &format, err);
    if (rc == CK_OK) rc = ck_json_get_string(root, "planner", true, &planner, file, "", err);
    if (rc == CK_OK && !(model = cJSON_GetObjectItemCaseSensitive(root, "model")))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: model: missing (expected an object)", file);
    if (rc == CK_OK) rc = ck_json_expect_object(model, model_keys, file, "model", err);
    if (rc == CK_OK) rc = ck_json_get_string(model, "path", true, &path, file, "model", err);
    if (rc == CK_OK) rc = ck_json_get_string(model, "sha256", true, &sha, file, "model", err);
    if (rc == CK_OK) rc = ck_json_get_string(model, "name", false, &name, file, "model", err);
    if (rc == CK_OK) rc = ck_plan_check_sha256(sha, file, err);
    if (rc == CK_OK) rc = ck_json_get_u64(root, "budget_bytes", true, &out->budget_bytes, file, "", err);
    if (rc == CK_OK) rc = ck_json_get_u64(root, "nodes", true, &nodes, file, "", err);
    if (rc == CK_OK && nodes == 0)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: nodes: expected at least 1, got 0", file);
    if (rc == CK_OK) rc = ck_plan_predicted_from_json(root, file, &out->predicted, err);
    if (rc == CK_OK && (details = cJSON_GetObjectItemCaseSensitive(root, "details")) &&
        !cJSON_IsObject(details))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: details: expected an object", file);
    if (rc == CK_OK) rc = ck_json_get_array(root, "schedule", true, schedule, file, "", err);
    if (rc != CK_OK)
        return rc;
    out->nodes = (size_t)nodes;
    out->planner = strdup(planner);
    out->model_path = strdup(path);
    out->model_sha256 = strdup(sha);
    return out->planner && out->model_path && out->model_sha256 ? CK_OK : ck_err_oom(err);
}

int ck_graph_plan_from_json(const cJSON *root, const char *file, ck_graph_plan_file *out,
                            ck_err *err)
{
    memset(out, 0, sizeof *out);
    const cJSON *schedule = NULL;
    int rc = read_fields(root, file, out, &schedule, err);
    if (rc == CK_OK && !ck_graph_plan_is_graph(root))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: kind: expected \"graph\"", file);
    if (rc == CK_OK) rc = read_schedule(schedule, file, out->nodes, &out->schedule, err);
    if (rc != CK_OK)
        ck_graph_plan_file_free(out);
    return rc;
}

void ck_graph_plan_file_free(ck_graph_plan_file *p)
{
    free(p->planner);
    free(p->model_path);
    free(p->model_sha256);
    ck_graph_schedule_free(&p->schedule);
    memset(p, 0, sizeof *p);
}
