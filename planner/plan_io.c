#include "planner/plan_io.h"

double ck_plan_overhead(double time, double baseline_time)
{
    return baseline_time > 0 ? time / baseline_time - 1 : 0;
}

static bool add_u64(cJSON *obj, const char *key, uint64_t v)
{
    return cJSON_AddNumberToObject(obj, key, (double)v) != NULL;
}

static bool add_details(cJSON *root, const ck_plan_doc *d)
{
    const ck_plan_result *r = d->result;
    cJSON *details = cJSON_AddObjectToObject(root, "details");
    cJSON *ops = details ? cJSON_AddObjectToObject(details, "operations") : NULL;
    bool ok = ops && cJSON_AddBoolToObject(details, "baseline_fits", d->baseline_fits);
    for (int k = 0; ok && k < CK_N_OPKINDS; k++)
        ok = add_u64(ops, ck_opkind_name((ck_opkind)k), d->predicted.count[k]);
    ok = ok && add_u64(details, "peak_operation", d->predicted.peak_op);
    if (ok && d->granularity)
        ok = cJSON_AddStringToObject(details, "granularity", d->granularity) != NULL;
    if (ok && d->time_unit)
        ok = cJSON_AddStringToObject(details, "time_unit", d->time_unit) != NULL;
    if (ok && r->snapshots >= 0)
        ok = cJSON_AddNumberToObject(details, "snapshots", (double)r->snapshots) != NULL;
    if (ok && r->segments >= 0)
        ok = cJSON_AddNumberToObject(details, "segments", (double)r->segments) != NULL;
    if (ok && r->memory_unit > 0)
        ok = add_u64(details, "memory_unit_bytes", r->memory_unit) && add_u64(details, "slots", d->slots);
    return ok;
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
              add_u64(root, "budget_bytes", d->budget_bytes) &&
              add_u64(root, "stages", d->stages) &&
              (pred = cJSON_AddObjectToObject(root, "predicted")) &&
              add_u64(pred, "peak_bytes", peak) &&
              add_u64(pred, "activation_peak_bytes", d->predicted.peak_bytes) &&
              add_u64(pred, "static_bytes", d->static_bytes) &&
              cJSON_AddNumberToObject(pred, "time", d->predicted.time) &&
              cJSON_AddNumberToObject(pred, "baseline_time", d->baseline.time) &&
              add_u64(pred, "baseline_peak_bytes", base_peak) &&
              add_u64(pred, "baseline_activation_peak_bytes", d->baseline.peak_bytes) &&
              cJSON_AddNumberToObject(pred, "overhead",
                                      ck_plan_overhead(d->predicted.time, d->baseline.time)) &&
              add_details(root, d) && (sched = cJSON_AddArrayToObject(root, "schedule"));
    const ck_schedule *s = &d->result->schedule;
    for (size_t k = 0; ok && k < s->n; k++) {
        cJSON *op = cJSON_CreateObject();
        ok = op && cJSON_AddItemToArray(sched, op) &&
             cJSON_AddStringToObject(op, "op", ck_opkind_name(s->ops[k].kind)) &&
             (s->ops[k].kind == CK_LOSS || add_u64(op, "stage", s->ops[k].stage));
    }
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}
