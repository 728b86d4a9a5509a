#include "cli/runs.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#include "cli/human.h"
#include "planner/json.h"

static char *dup_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Reads the whole file: runs files are appended to for a long time, so no size limit
 * beyond what memory allows. Under a shared lock: appends (ck_files_append_line) hold an
 * exclusive one while they write, so a record is never read half-written. Where locks
 * are not available (ENOLCK) the file is read all the same. */
static int read_all(const char *path, char **text, size_t *len, ck_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    while (flock(fileno(f), LOCK_SH) != 0 && errno == EINTR)
        continue;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int rc = buf ? CK_OK : ck_err_oom(err);
    while (rc == CK_OK) {
        if (n == cap) {
            char *bigger = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!bigger) {
                rc = ck_err_oom(err);
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f))
                rc = ck_err_fail(err, CK_ERR_INPUT, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (rc != CK_OK) {
        free(buf);
        return rc;
    }
    *text = buf;
    *len = n;
    return CK_OK;
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
}

int ck_runs_read(const char *path, FILE *warn, const atomic_int *interrupt, ck_runs *out, ck_err *err)
{
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t len = 0;
    int rc = read_all(path, &text, &len, err);
    if (rc != CK_OK)
        return rc;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    out->rows = calloc(lines, sizeof *out->rows);
    if (!out->rows) {
        free(text);
        return ck_err_oom(err);
    }
    size_t line = 0;
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
                fputs("ckplan: ", warn);
                ck_human_put_terminal_text(warn, why.msg);
                fputs(" (line skipped)\n", warn);
            }
        }
    }
    free(text);
    if (rc != CK_OK)
        ck_runs_free(out);
    return rc;
}

void ck_runs_free(ck_runs *r)
{
    for (size_t i = 0; r->rows && i < r->n; i++)
        row_free(&r->rows[i]);
    free(r->rows);
    memset(r, 0, sizeof *r);
}

const char *ck_runs_outcome(const ck_run_row *r)
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
