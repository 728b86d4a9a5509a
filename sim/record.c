/* record: ckplan-run/1 records made and read back (see record.h). */
#include "sim/record.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "planner/json.h"

/* ---- writing ---- */

static bool add_measure(cJSON *parent, const char *key, const ck_run_measure *m, uint64_t steps)
{
    cJSON *o = cJSON_AddObjectToObject(parent, key);
    cJSON *losses = o ? cJSON_AddArrayToObject(o, "losses") : NULL;
    bool ok = losses && ck_json_add_number(o, "activation_peak_bytes", (double)m->activation_peak) &&
              ck_json_add_number(o, "static_bytes", (double)m->static_bytes) &&
              ck_json_add_number(o, "rss_peak_bytes", (double)m->rss_peak) &&
              ck_json_add_number(o, "step_seconds", m->median_seconds) &&
              cJSON_AddStringToObject(o, "gradients_sha256", m->grad_sha[steps - 1]);
    for (uint64_t k = 0; ok && k < steps; k++) {
        cJSON *n = ck_json_number(m->losses[k]);
        ok = n && cJSON_AddItemToArray(losses, n);
    }
    return ok;
}

/* The parts every ckplan-run/1 record starts with: format, status, time, the plan (its
 * path and digest when there is a plan file) and the model, with the options it was
 * planned with as a plan file writes them. NULL when out of memory. */
static cJSON *record_head(const char *status, const char *plan_path, const char *plan_sha,
                          const char *planner, uint64_t budget, const ck_workload *w,
                          const char *granularity, const ck_model_opts *opts)
{
    char stamp[32];
    time_t t = time(NULL);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    cJSON *root = cJSON_CreateObject();
    cJSON *po = NULL, *mo = NULL;
    bool ok = root && cJSON_AddStringToObject(root, "format", CK_RUN_FORMAT) &&
              cJSON_AddStringToObject(root, "status", status) &&
              cJSON_AddStringToObject(root, "time", stamp) &&
              (po = cJSON_AddObjectToObject(root, "plan")) &&
              (!plan_path || cJSON_AddStringToObject(po, "path", plan_path)) &&
              (!plan_sha || cJSON_AddStringToObject(po, "sha256", plan_sha)) &&
              cJSON_AddStringToObject(po, "planner", planner) &&
              ck_json_add_number(po, "budget_bytes", (double)budget) &&
              (mo = cJSON_AddObjectToObject(root, "model")) &&
              cJSON_AddStringToObject(mo, "path", w->path) &&
              cJSON_AddStringToObject(mo, "sha256", w->sha256) &&
              cJSON_AddStringToObject(mo, "name", w->chain.name) &&
              ck_json_add_number(mo, "stages", (double)w->chain.n_stages) &&
              (!granularity || cJSON_AddStringToObject(mo, "granularity", granularity)) &&
              ck_plan_add_model_opts(mo, opts);
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* The predictions: the replay of the plan's schedule (for a plan made in memory, the
 * replay it was made with). */
static bool add_predicted(cJSON *root, const ck_plan_figures *f)
{
    cJSON *pred = cJSON_AddObjectToObject(root, "predicted");
    return pred && ck_json_add_number(pred, "activation_peak_bytes", (double)f->activation_peak_bytes) &&
           ck_json_add_number(pred, "baseline_activation_peak_bytes", (double)f->baseline_activation_peak_bytes) &&
           ck_json_add_number(pred, "static_bytes", (double)f->static_bytes) &&
           ck_json_add_number(pred, "time", f->time) &&
           ck_json_add_number(pred, "baseline_time", f->baseline_time) &&
           ck_json_add_number(pred, "overhead", f->overhead);
}

/* verification.plan_file_matches and the plan file's figures that the replay contradicts. */
static bool add_differences(cJSON *vo, const ck_plan_check *check)
{
    cJSON *list = cJSON_AddArrayToObject(vo, "plan_file_differences");
    bool ok = list && cJSON_AddBoolToObject(vo, "plan_file_matches", check->n_differences == 0);
    for (size_t k = 0; ok && k < check->n_differences; k++) {
        const ck_plan_difference *d = &check->differences[k];
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(list, o) && cJSON_AddStringToObject(o, "field", d->field) &&
             ck_json_add_number(o, "plan_file", d->is_time ? d->plan_time : (double)d->plan_bytes) &&
             ck_json_add_number(o, "replayed", d->is_time ? d->replayed_time : (double)d->replayed_bytes);
    }
    return ok;
}

static char *finish_record(cJSON *root, bool ok)
{
    char *line = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return line;
}

char *ck_record_ran(const ck_ran_record *r)
{
    const ck_plan_file *p = r->plan;
    const ck_verdict *v = r->verdict;
    cJSON *root = record_head("ran", r->plan_path, r->plan_sha, p->planner, p->budget_bytes, r->w,
                              p->granularity, &p->model_opts);
    cJSON *so = NULL, *vo = NULL;
    bool ok = root && (so = cJSON_AddObjectToObject(root, "settings")) &&
              ck_json_add_number(so, "steps", (double)r->steps) &&
              ck_json_add_number(so, "threads", (double)r->threads) &&
              ck_json_add_number(so, "seed", (double)r->seed) &&
              cJSON_AddStringToObject(so, "rng", r->stateful_rng ? "stateful" : "counter") &&
              add_predicted(root, &p->predicted) &&
              add_measure(root, "baseline", r->baseline, r->steps) &&
              add_measure(root, "plan_run", r->plan_run, r->steps) &&
              ck_json_add_number(root, "measured_overhead", r->measured_overhead) &&
              (vo = cJSON_AddObjectToObject(root, "verification")) &&
              cJSON_AddBoolToObject(vo, "performed", r->verify_performed) &&
              cJSON_AddBoolToObject(vo, "passed", v->passed) &&
              cJSON_AddBoolToObject(vo, "loss_identical", v->loss_identical) &&
              cJSON_AddBoolToObject(vo, "gradients_identical", v->gradients_identical) &&
              ck_json_add_number(vo, "max_abs_gradient_difference", v->max_abs_diff) &&
              cJSON_AddBoolToObject(vo, "peak_within_prediction", v->peak_within) &&
              ck_json_add_number(vo, "peak_ratio", v->peak_ratio) && add_differences(vo, r->check);
    return root ? finish_record(root, ok) : NULL;
}

char *ck_record_planned(const ck_plan_file *p, const char *plan_sha, const ck_workload *w)
{
    cJSON *root = record_head("planned", NULL, plan_sha, p->planner, p->budget_bytes, w,
                              p->granularity, &p->model_opts);
    return root ? finish_record(root, add_predicted(root, &p->predicted)) : NULL;
}

char *ck_record_infeasible(const char *planner, uint64_t budget, uint64_t min_budget,
                           const ck_workload *w, const char *granularity, const ck_model_opts *opts)
{
    cJSON *root = record_head("infeasible", NULL, NULL, planner, budget, w, granularity, opts);
    return root ? finish_record(root, ck_json_add_number(root, "minimum_budget_bytes",
                                                              (double)min_budget) != NULL)
                : NULL;
}

/* ---- reading ---- */

static char *dup_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static int get_object(const cJSON *root, const char *key, const cJSON **out, const char *file,
                      ck_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: %s: missing (expected an object)", file, key);
    if (!cJSON_IsObject(v)) {
        char got[96];
        ck_json_describe(v, got, sizeof got);
        return ck_err_fail(err, CK_ERR_INPUT, "%s: %s: expected an object, got %s", file, key, got);
    }
    *out = v;
    return CK_OK;
}

/* The measured figures of one execution ("baseline" or "plan_run"). */
static int read_measure(const cJSON *root, const char *key, uint64_t *peak, uint64_t *rss,
                        double *seconds, const char *file, ck_err *err)
{
    const cJSON *o;
    int rc = get_object(root, key, &o, file, err);
    if (rc == CK_OK)
        rc = ck_json_get_u64(o, "activation_peak_bytes", true, peak, file, key, err);
    if (rc == CK_OK)
        rc = ck_json_get_u64(o, "rss_peak_bytes", true, rss, file, key, err);
    if (rc == CK_OK)
        rc = ck_json_get_time(o, "step_seconds", true, seconds, file, key, err);
    return rc;
}

static int read_predicted(const cJSON *root, ck_run_row *r, const char *file, ck_err *err)
{
    const cJSON *o;
    int rc = get_object(root, "predicted", &o, file, err);
    const char *p = "predicted";
    if (rc == CK_OK)
        rc = ck_json_get_u64(o, "activation_peak_bytes", true, &r->predicted_peak, file, p, err);
    if (rc == CK_OK)
        rc = ck_json_get_u64(o, "baseline_activation_peak_bytes", true, &r->predicted_baseline_peak, file, p, err);
    if (rc == CK_OK)
        rc = ck_json_get_u64(o, "static_bytes", true, &r->static_bytes, file, p, err);
    if (rc == CK_OK)
        rc = ck_json_get_time(o, "time", true, &r->predicted_time, file, p, err);
    if (rc == CK_OK)
        rc = ck_json_get_time(o, "baseline_time", true, &r->predicted_baseline_time, file, p, err);
    /* An overhead can be negative (a plan faster than its baseline, measured), so it is
     * read as any finite number. */
    const cJSON *ov = rc == CK_OK ? cJSON_GetObjectItemCaseSensitive(o, "overhead") : NULL;
    if (rc == CK_OK && (!cJSON_IsNumber(ov) || !isfinite(ov->valuedouble)))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: predicted.overhead: expected a finite number", file);
    if (rc == CK_OK)
        r->predicted_overhead = ov->valuedouble;
    r->has_predicted = rc == CK_OK;
    return rc;
}

static int read_ran(const cJSON *root, ck_run_row *r, const char *file, ck_err *err)
{
    int rc = read_predicted(root, r, file, err);
    if (rc == CK_OK)
        rc = read_measure(root, "baseline", &r->baseline_peak, &r->baseline_rss, &r->baseline_time, file, err);
    if (rc == CK_OK)
        rc = read_measure(root, "plan_run", &r->measured_peak, &r->measured_rss, &r->measured_time, file, err);
    const cJSON *ov = rc == CK_OK ? cJSON_GetObjectItemCaseSensitive(root, "measured_overhead") : NULL;
    if (rc == CK_OK && (!cJSON_IsNumber(ov) || !isfinite(ov->valuedouble)))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: measured_overhead: expected a finite number", file);
    if (rc == CK_OK)
        r->measured_overhead = ov->valuedouble;
    const cJSON *v;
    if (rc == CK_OK)
        rc = get_object(root, "verification", &v, file, err);
    if (rc == CK_OK)
        rc = ck_json_get_bool(v, "performed", true, &r->verify_performed, file, "verification", err);
    if (rc == CK_OK)
        rc = ck_json_get_bool(v, "passed", true, &r->verify_passed, file, "verification", err);
    r->has_measured = rc == CK_OK;
    return rc;
}

/* model.options, checked as a plan file's are, into r->options as text. */
static int read_options(const cJSON *model, const char *file, ck_run_row *r, ck_err *err)
{
    ck_model_opts opts;
    memset(&opts, 0, sizeof opts);
    cJSON *json = NULL;
    int rc = ck_plan_read_model_opts(model, file, &opts, &json, err);
    if (rc == CK_OK && !(r->options = ck_model_opts_text(&opts)))
        rc = ck_err_oom(err);
    cJSON_Delete(json);
    return rc;
}

/* Parses line `line` of `path` into r; `file` is "FILE:LINE", the prefix of every message. */
static int read_record(const char *path, size_t line, const char *text, size_t len,
                       const char *file, ck_run_row *r, ck_err *err)
{
    cJSON *root;
    int rc = ck_json_parse_record(path, line, text, len, &root, err);
    if (rc != CK_OK)
        return rc;
    static const char *const formats[] = {CK_RUN_FORMAT, NULL};
    const char *format, *status = "ran", *s;
    const cJSON *plan, *model;
    rc = ck_json_expect_format(root, formats, file, "", &format, err);
    if (rc == CK_OK)
        rc = ck_json_get_string(root, "status", false, &status, file, "", err);
    if (rc == CK_OK) {
        if (strcmp(status, "ran") == 0)
            r->status = CK_RUN_RAN;
        else if (strcmp(status, "planned") == 0)
            r->status = CK_RUN_PLANNED;
        else if (strcmp(status, "infeasible") == 0)
            r->status = CK_RUN_INFEASIBLE;
        else
            rc = ck_err_fail(err, CK_ERR_INPUT, "%s: status: expected \"ran\", \"planned\" or "
                                            "\"infeasible\", got \"%.40s\"", file, status);
    }
    if (rc == CK_OK)
        rc = ck_json_get_string(root, "time", true, &s, file, "", err);
    if (rc == CK_OK && !(r->time = dup_string(s)))
        rc = ck_err_oom(err);
    if (rc == CK_OK)
        rc = get_object(root, "plan", &plan, file, err);
    if (rc == CK_OK)
        rc = ck_json_get_string(plan, "planner", true, &s, file, "plan", err);
    if (rc == CK_OK && !(r->planner = dup_string(s)))
        rc = ck_err_oom(err);
    if (rc == CK_OK)
        rc = ck_json_get_u64(plan, "budget_bytes", true, &r->budget_bytes, file, "plan", err);
    if (rc == CK_OK)
        rc = get_object(root, "model", &model, file, err);
    if (rc == CK_OK)
        rc = ck_json_get_string(model, "name", true, &s, file, "model", err);
    if (rc == CK_OK && !(r->model = dup_string(s)))
        rc = ck_err_oom(err);
    if (rc == CK_OK)
        rc = read_options(model, file, r, err);
    if (rc == CK_OK && r->status == CK_RUN_RAN)
        rc = read_ran(root, r, file, err);
    else if (rc == CK_OK && r->status == CK_RUN_PLANNED)
        rc = read_predicted(root, r, file, err);
    else if (rc == CK_OK)
        rc = ck_json_get_u64(root, "minimum_budget_bytes", true, &r->min_budget_bytes, file, "", err);
    cJSON_Delete(root);
    return rc;
}

static void row_free(ck_run_row *r)
{
    free(r->time);
    free(r->model);
    free(r->planner);
    free(r->options);
}

int ck_record_parse_runs(const char *path, const char *text, size_t len,
                         ck_record_bad_line *bad_line, void *ctx, const atomic_int *interrupt,
                         ck_runs *out, ck_err *err)
{
    memset(out, 0, sizeof *out);
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    out->rows = calloc(lines, sizeof *out->rows);
    if (!out->rows)
        return ck_err_oom(err);
    size_t line = 0;
    int rc = CK_OK;
    /* polled after the last line too: a report never prints after a signal */
    for (size_t start = 0; rc == CK_OK && (rc = ck_err_check_stop(interrupt, err)) == CK_OK && start < len;) {
        const char *nl = memchr(text + start, '\n', len - start);
        size_t stop = nl ? (size_t)(nl - text) : len;
        line++;
        size_t a = start, b = stop;
        while (a < b && (text[a] == ' ' || text[a] == '\t' || text[a] == '\r'))
            a++;
        start = stop + 1;
        if (a == b) /* blank lines are not records, and not errors either */
            continue;
        out->n_lines++;
        char label[4200];
        snprintf(label, sizeof label, "%.4000s:%zu", path, line);
        ck_run_row *r = &out->rows[out->n];
        memset(r, 0, sizeof *r);
        r->line = line;
        ck_err why;
        int lrc = read_record(path, line, text + a, b - a, label, r, &why);
        if (lrc == CK_OK) {
            out->n++;
        } else {
            row_free(r);
            memset(r, 0, sizeof *r);
            if (lrc == CK_ERR_RUNTIME) /* out of memory: no point going on */
                rc = ck_err_oom(err);
            else {
                out->n_bad++;
                if (bad_line)
                    bad_line(ctx, why.msg);
            }
        }
    }
    if (rc != CK_OK)
        ck_record_runs_free(out);
    return rc;
}

void ck_record_runs_free(ck_runs *r)
{
    for (size_t i = 0; r->rows && i < r->n; i++)
        row_free(&r->rows[i]);
    free(r->rows);
    memset(r, 0, sizeof *r);
}

const char *ck_record_outcome(const ck_run_row *r)
{
    switch (r->status) {
    case CK_RUN_PLANNED: return "planned only";
    case CK_RUN_INFEASIBLE: return "infeasible";
    case CK_RUN_RAN: break;
    }
    if (!r->verify_performed)
        return "not checked";
    return r->verify_passed ? "passed" : "FAILED";
}
