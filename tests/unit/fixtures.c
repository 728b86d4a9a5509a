#include "tests/unit/fixtures.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/json.h"

static int load_text(const char *text, const ck_model_opts *o, ck_model **m, ck_err *err)
{
    cJSON *root = NULL;
    int rc = ck_json_parse(FX_FILE, text, strlen(text), &root, err);
    if (rc == CK_OK)
        rc = ck_model_from_json_opts(root, FX_FILE, o, m, err);
    cJSON_Delete(root);
    return rc;
}

static int load_fmt(const ck_model_opts *o, const char *fmt, va_list ap, ck_model **m, ck_err *err)
{
    static char text[16384];
    vsnprintf(text, sizeof text, fmt, ap);
    for (char *p = text; *p; p++)
        if (*p == '\'')
            *p = '"';
    return load_text(text, o, m, err);
}

static ck_model *load_or_fail(const ck_model_opts *o, const char *fmt, va_list ap)
{
    ck_model *m = NULL;
    ck_err err = {{0}};
    int rc = load_fmt(o, fmt, ap, &m, &err);
    ck_assert_msg(rc == CK_OK, "%s", err.msg);
    return m;
}

static const char *refused(const ck_model_opts *o, const char *fmt, va_list ap)
{
    static ck_err err;
    ck_model *m = NULL;
    int rc = load_fmt(o, fmt, ap, &m, &err);
    ck_assert_msg(rc == CK_ERR_INPUT, "expected an input error, got status %d", rc);
    ck_assert_ptr_null(m);
    return err.msg;
}

ck_model *fx_load(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ck_model *m = load_or_fail(NULL, fmt, ap);
    va_end(ap);
    return m;
}

ck_model *fx_load_opts(const ck_model_opts *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ck_model *m = load_or_fail(o, fmt, ap);
    va_end(ap);
    return m;
}

const char *fx_refuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *msg = refused(NULL, fmt, ap);
    va_end(ap);
    return msg;
}

const char *fx_refuse_opts(const ck_model_opts *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *msg = refused(o, fmt, ap);
    va_end(ap);
    return msg;
}

ck_model *fx_load_file(const char *path)
{
    cJSON *root = NULL;
    ck_model *m = NULL;
    ck_err err = {{0}};
    int rc = ck_json_load_file(path, &root, NULL, NULL, &err);
    if (rc == CK_OK)
        rc = ck_model_from_json(root, path, &m, &err);
    cJSON_Delete(root);
    ck_assert_msg(rc == CK_OK, "%s", err.msg);
    return m;
}

void fx_workload_load(const char *path, ck_workload *w)
{
    ck_err err = {{0}};
    ck_workload_opts wo;
    ck_workload_opts_default(&wo);
    ck_assert_msg(ck_workload_load(path, &wo, w, &err) == CK_OK, "%s", err.msg);
}

void fx_gpt2_dp_make(fx_gpt2_dp *g)
{
    ck_err err = {{0}};
    fx_workload_load("models/gpt2-tiny.json", &g->w);
    ck_exec_opts eo = {.seed = 1};
    ck_assert_msg(ck_exec_create(g->w.model, &g->w.chain, g->w.stage_first, &eo, &g->e, &err) ==
                      CK_OK, "%s", err.msg);
    g->base = (ck_schedule){0};
    ck_assert_int_eq(ck_schedule_baseline(&g->w.chain, &g->base, &err), CK_OK);
    ck_assert_int_eq(ck_schedule_replay(&g->w.chain, &g->base, &g->base_replay, NULL, NULL, &err),
                     CK_OK);
    g->budget = g->base_replay.peak_bytes * 6 / 10;
    uint64_t min = 0;
    ck_planner_opts po = {.slots = CK_DEFAULT_SLOTS};
    ck_assert_msg(ck_planner_run(&g->w.chain, &ck_planner_dp, g->budget, &po, &g->plan,
                                &g->plan_replay, &min, &err) == CK_OK, "%s", err.msg);
}

void fx_gpt2_dp_free(fx_gpt2_dp *g)
{
    ck_planner_result_free(&g->plan);
    ck_schedule_free(&g->base);
    ck_exec_free(g->e);
    ck_workload_free(&g->w);
}

ck_model *fx_gpt(unsigned b, unsigned s, unsigned h, unsigned a, const char *dtype, bool flash,
                 unsigned layers)
{
    return fx_load(
        "{'format': 'ckplan-model/1', 'name': 'gpt', 'dtype': '%s',"
        " 'dims': {'B': %u, 'S': %u, 'C': %u, 'A': %u, 'L': %u},"
        " 'inputs': [{'name': 'x', 'shape': ['B', 'S', 'C']}, {'name': 'y', 'shape': ['B', 'S', 'C']}],"
        " 'blocks': {'layer': {'input': 'x', 'nodes': ["
        "  {'name': 'ln1', 'op': 'layernorm', 'inputs': ['x']},"
        "  {'name': 'qkv', 'op': 'linear', 'out': '3*C', 'inputs': ['ln1']},"
        "  {'name': 'attn', 'op': 'attention', 'heads': 'A', 'dropout': 0.1, 'flash': %s, 'inputs': ['qkv']},"
        "  {'name': 'proj', 'op': 'linear', 'out': 'C', 'inputs': ['attn']},"
        "  {'name': 'drop1', 'op': 'dropout', 'p': 0.1, 'inputs': ['proj']},"
        "  {'name': 'res1', 'op': 'add', 'inputs': ['x', 'drop1']},"
        "  {'name': 'ln2', 'op': 'layernorm', 'inputs': ['res1']},"
        "  {'name': 'fc1', 'op': 'linear', 'out': '4*C', 'inputs': ['ln2']},"
        "  {'name': 'gelu', 'op': 'gelu', 'inputs': ['fc1']},"
        "  {'name': 'fc2', 'op': 'linear', 'out': 'C', 'inputs': ['gelu']},"
        "  {'name': 'drop2', 'op': 'dropout', 'p': 0.1, 'inputs': ['fc2']},"
        "  {'name': 'res2', 'op': 'add', 'inputs': ['res1', 'drop2']}]}},"
        " 'nodes': [{'name': 'h', 'block': 'layer', 'repeat': 'L', 'inputs': ['x']},"
        "  {'name': 'loss', 'op': 'mse', 'inputs': ['h', 'y']}]}",
        dtype, b, s, h, a, layers, flash ? "true" : "false");
}

void fx_assert_has(const char *haystack, ...)
{
    va_list ap;
    va_start(ap, haystack);
    for (const char *needle = va_arg(ap, const char *); needle; needle = va_arg(ap, const char *))
        ck_assert_msg(strstr(haystack, needle), "\"%s\" not in: %s", needle, haystack);
    va_end(ap);
}

static const char *kept_dir(const fx_dir *d)
{
    const char *keep = getenv(d->keep_env);
    return keep && *keep ? keep : NULL;
}

void fx_dir_make(fx_dir *d)
{
    const char *keep = kept_dir(d);
    if (keep) {
        snprintf(d->path, sizeof d->path, "%s", keep);
        return;
    }
    snprintf(d->path, sizeof d->path, "/tmp/ckplan-%s-XXXXXX", d->name);
    ck_assert_ptr_nonnull(mkdtemp(d->path));
}

void fx_dir_remove(const fx_dir *d)
{
    if (kept_dir(d))
        return;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->path);
    ck_assert_int_eq(system(cmd), 0);
}

int fx_validate(const char *script, const char *path, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "python3 tests/cli/%s '%s' %s", script, path, args);
    return system(cmd);
}
