#include "cli/trace.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/files.h"
#include "planner/json.h"

/* cJSON's adders return NULL when out of memory and leave the parent without the member;
 * `ok` turns that into one failure checked when the document is complete. */
typedef struct {
    bool ok;
} guard;

static cJSON *add_obj(guard *g, cJSON *array)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(array, o)) {
        cJSON_Delete(o);
        g->ok = false;
        return NULL;
    }
    return o;
}

static void add_num(guard *g, cJSON *o, const char *key, double v)
{
    if (o && !ck_json_add_number(o, key, v))
        g->ok = false;
}

static void add_str(guard *g, cJSON *o, const char *key, const char *v)
{
    if (o && !cJSON_AddStringToObject(o, key, v))
        g->ok = false;
}

static cJSON *add_child(guard *g, cJSON *o, const char *key)
{
    cJSON *c = o ? cJSON_AddObjectToObject(o, key) : NULL;
    if (o && !c)
        g->ok = false;
    return c;
}

/* A metadata event naming a process or a thread. */
static void add_meta(guard *g, cJSON *events, const char *what, int pid, int tid,
                     const char *name)
{
    cJSON *e = add_obj(g, events);
    add_str(g, e, "name", what);
    add_str(g, e, "ph", "M");
    add_num(g, e, "pid", pid);
    add_num(g, e, "tid", tid);
    add_str(g, add_child(g, e, "args"), "name", name);
}

static void add_counter(guard *g, cJSON *events, int pid, double ts_us, uint64_t bytes)
{
    cJSON *e = add_obj(g, events);
    add_str(g, e, "name", "live activation bytes");
    add_str(g, e, "ph", "C");
    add_num(g, e, "ts", ts_us);
    add_num(g, e, "pid", pid);
    add_num(g, e, "tid", 0);
    add_num(g, add_child(g, e, "args"), "bytes", (double)bytes);
}

static int check_run(const ck_trace_run *r, size_t i, ck_err *err)
{
    if (!r->chain || !r->schedule || !r->start || !r->seconds)
        return ck_err_fail(err, CK_ERR_INPUT, "trace: run %zu has no operations or times", i);
    for (size_t k = 0; k < r->schedule->n; k++) {
        const ck_action *op = &r->schedule->actions[k];
        if (op->kind >= CK_N_ACTIONS || (op->kind != CK_LOSS && op->stage >= r->chain->n_stages))
            return ck_err_fail(err, CK_ERR_INPUT, "trace: run %zu, operation %zu is not in the chain",
                           i, k);
        if (!isfinite(r->start[k]) || !isfinite(r->seconds[k]) || r->start[k] < 0 ||
            r->seconds[k] < 0)
            return ck_err_fail(err, CK_ERR_INPUT, "trace: run %zu, operation %zu has no valid time",
                           i, k);
    }
    return CK_OK;
}

static void add_run(guard *g, cJSON *events, const ck_trace_run *r, int pid)
{
    add_meta(g, events, "process_name", pid, 0, r->label ? r->label : "run");
    add_meta(g, events, "thread_name", pid, 1, "operations");
    if (r->live_after)
        add_counter(g, events, pid, 0, r->chain->input_bytes);
    for (size_t k = 0; k < r->schedule->n && g->ok; k++) {
        const ck_action *op = &r->schedule->actions[k];
        const char *kind = ck_action_name(op->kind);
        char name[256];
        if (op->kind == CK_LOSS)
            snprintf(name, sizeof name, "%s", kind);
        else if (r->chain->stages[op->stage].name)
            snprintf(name, sizeof name, "%s %s", kind, r->chain->stages[op->stage].name);
        else
            snprintf(name, sizeof name, "%s %zu", kind, op->stage);
        double ts = r->start[k] * 1e6, dur = r->seconds[k] * 1e6;
        cJSON *e = add_obj(g, events);
        add_str(g, e, "name", name);
        add_str(g, e, "cat", kind);
        add_str(g, e, "ph", "X");
        add_num(g, e, "ts", ts);
        add_num(g, e, "dur", dur);
        add_num(g, e, "pid", pid);
        add_num(g, e, "tid", 1);
        cJSON *args = add_child(g, e, "args");
        add_num(g, args, "index", (double)k);
        if (op->kind != CK_LOSS)
            add_num(g, args, "stage", (double)op->stage);
        if (r->live_after) {
            add_num(g, args, "live_after_bytes", (double)r->live_after[k]);
            /* the counter steps when the operation ends */
            add_counter(g, events, pid, ts + dur, r->live_after[k]);
        }
    }
}

int ck_trace_json(const ck_trace_run *runs, size_t n_runs, char **json, size_t *len,
                  ck_err *err)
{
    if (n_runs == 0)
        return ck_err_fail(err, CK_ERR_INPUT, "trace: no runs to write");
    for (size_t i = 0; i < n_runs; i++) {
        int rc = check_run(&runs[i], i, err);
        if (rc != CK_OK)
            return rc;
    }
    guard g = {true};
    cJSON *root = cJSON_CreateObject();
    cJSON *events = root ? cJSON_AddArrayToObject(root, "traceEvents") : NULL;
    if (!events)
        g.ok = false;
    for (size_t i = 0; i < n_runs && g.ok; i++)
        add_run(&g, events, &runs[i], (int)i + 1);
    add_str(&g, root, "displayTimeUnit", "ms");
    /* one event per line would need a custom printer; unformatted keeps large traces small */
    char *text = g.ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return ck_err_oom(err);
    *json = text;
    *len = strlen(text);
    return CK_OK;
}

int ck_trace_write(const char *path, const ck_trace_run *runs, size_t n_runs, ck_err *err)
{
    char *json;
    size_t len;
    int rc = ck_trace_json(runs, n_runs, &json, &len, err);
    if (rc != CK_OK)
        return rc;
    rc = ck_files_write_atomic(path, json, len, err);
    free(json);
    return rc;
}
