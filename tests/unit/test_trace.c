/* Chrome traces of executed steps: written for gpt2-tiny (plan and baseline) and a chain,
 * read back and checked here and by tests/cli/check_trace.py. Set CK_TRACE_KEEP to a
 * directory to keep the traces. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/trace.h"

#include "planner/json.h"
#include "sim/exec.h"
#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

static fx_dir dir = {.keep_env = "CK_TRACE_KEEP", .name = "trace"};

static int check_trace(const char *path, const char *args)
{
    return fx_validate("check_trace.py", path, args);
}

/* One executed schedule and what it measured. */
typedef struct {
    double *start, *seconds;
    uint64_t *live;
} measured;

static measured execute(ck_exec *e, const ck_schedule *s)
{
    measured m = {calloc(s->n, sizeof(double)), calloc(s->n, sizeof(double)),
                  calloc(s->n, sizeof(uint64_t))};
    ck_assert(m.start && m.seconds && m.live);
    ck_err err = {{0}};
    ck_exec_reset(e);
    ck_exec_trace t = {.seconds = m.seconds, .start = m.start, .live_after = m.live};
    ck_assert_msg(ck_exec_step(e, s, 0, NULL, &t, &err) == CK_OK, "%s", err.msg);
    return m;
}

static void measured_free(measured *m)
{
    free(m->start);
    free(m->seconds);
    free(m->live);
}

static cJSON *load(const char *path)
{
    cJSON *root;
    ck_err err = {{0}};
    ck_assert_msg(ck_json_load_file(path, &root, NULL, NULL, &err) == CK_OK, "%s", err.msg);
    return root;
}

static const char *str(const cJSON *e, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static double num(const cJSON *e, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
    ck_assert_msg(cJSON_IsNumber(v), "no number %s", key);
    return v->valuedouble;
}

/* gpt2-tiny, dp plan and baseline: one X event per operation of each, in order, named after
 * the stages, timed as measured; a counter with the measured live bytes after each. */
START_TEST(gpt2_tiny_trace)
{
    fx_dir_make(&dir);
    ck_err err = {{0}};
    fx_gpt2_dp g;
    fx_gpt2_dp_make(&g);
    const ck_chain *c = &g.w.chain;
    measured mp = execute(g.e, &g.plan.schedule), mb = execute(g.e, &g.base);
    ck_trace_run runs[2] = {
        {"plan (dp) <&>", c, &g.plan.schedule, mp.start, mp.seconds, mp.live},
        {"baseline", c, &g.base, mb.start, mb.seconds, mb.live}};
    char path[512];
    snprintf(path, sizeof path, "%s/gpt2-tiny.trace.json", dir.path);
    ck_assert_msg(ck_trace_write(path, runs, 2, &err) == CK_OK, "%s", err.msg);

    cJSON *root = load(path);
    ck_assert_str_eq(str(root, "displayTimeUnit"), "ms");
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    ck_assert(cJSON_IsArray(events));
    size_t xs[3] = {0}, cs[3] = {0}, meta = 0;
    double last_end[3] = {0};
    const cJSON *ev;
    cJSON_ArrayForEach(ev, events)
    {
        const char *ph = str(ev, "ph");
        int pid = (int)num(ev, "pid");
        ck_assert(pid == 1 || pid == 2);
        const ck_schedule *s = pid == 1 ? &g.plan.schedule : &g.base;
        const measured *m = pid == 1 ? &mp : &mb;
        if (!strcmp(ph, "M")) {
            meta++;
            continue;
        }
        if (!strcmp(ph, "X")) {
            size_t k = xs[pid]++;
            ck_assert_uint_lt(k, s->n);
            ck_assert_uint_eq((size_t)num(cJSON_GetObjectItem(ev, "args"), "index"), k);
            const ck_action *op = &s->actions[k];
            char want[128];
            if (op->kind == CK_LOSS)
                snprintf(want, sizeof want, "loss");
            else
                snprintf(want, sizeof want, "%s %s", ck_action_name(op->kind),
                         c->stages[op->stage].name);
            ck_assert_str_eq(str(ev, "name"), want);
            ck_assert_str_eq(str(ev, "cat"), ck_action_name(op->kind));
            ck_assert(fabs(num(ev, "ts") - m->start[k] * 1e6) < 1e-3);
            ck_assert(fabs(num(ev, "dur") - m->seconds[k] * 1e6) < 1e-3);
            ck_assert(num(ev, "ts") >= last_end[pid] - 1e-3); /* operations do not overlap */
            last_end[pid] = num(ev, "ts") + num(ev, "dur");
            ck_assert_int_eq((int)num(ev, "tid"), 1);
        } else {
            ck_assert_str_eq(ph, "C");
            ck_assert_str_eq(str(ev, "name"), "live activation bytes");
            double bytes = num(cJSON_GetObjectItem(ev, "args"), "bytes");
            size_t k = cs[pid]++;
            if (k == 0)
                ck_assert(bytes == (double)c->input_bytes);
            else
                ck_assert(bytes == (double)m->live[k - 1]);
        }
    }
    ck_assert_uint_eq(xs[1], g.plan.schedule.n);
    ck_assert_uint_eq(xs[2], g.base.n);
    ck_assert_uint_eq(cs[1], g.plan.schedule.n + 1);
    ck_assert_uint_eq(cs[2], g.base.n + 1);
    ck_assert_uint_eq(meta, 4);
    cJSON_Delete(root);

    char args[512];
    snprintf(args, sizeof args, "--ops %zu --processes 2 --names 'loss,F_all %s,B %s'",
             g.plan.schedule.n + g.base.n, c->stages[0].name, c->stages[c->n_stages - 1].name);
    ck_assert_int_eq(check_trace(path, args), 0);

    measured_free(&mp);
    measured_free(&mb);
    fx_gpt2_dp_free(&g);
    fx_dir_remove(&dir);
}
END_TEST

/* A chain file's stages have no names: events use the stage number. Without live bytes
 * there is no counter track, and the validator says so. */
START_TEST(chain_trace_without_names_or_counter)
{
    fx_dir_make(&dir);
    ck_chain c;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chaingen_uniform(&c, 3, 64, &err), CK_OK);
    for (size_t i = 0; i < c.n_stages; i++) {
        free(c.stages[i].name);
        c.stages[i].name = NULL;
    }
    ck_exec *e;
    ck_exec_opts eo = {.seed = 1, .skip_chain_work = true};
    ck_assert_int_eq(ck_exec_create(NULL, &c, NULL, &eo, &e, &err), CK_OK);
    ck_schedule base = {0};
    ck_assert_int_eq(ck_schedule_baseline(&c, &base, &err), CK_OK);
    measured m = execute(e, &base);
    ck_trace_run run = {"chain", &c, &base, m.start, m.seconds, m.live};
    char path[512];
    snprintf(path, sizeof path, "%s/chain.trace.json", dir.path);
    ck_assert_int_eq(ck_trace_write(path, &run, 1, &err), CK_OK);
    ck_assert_int_eq(check_trace(path, "--ops 7 --processes 1 --names 'F_all 0,loss,B 2'"), 0);
    run.live_after = NULL;
    ck_assert_int_eq(ck_trace_write(path, &run, 1, &err), CK_OK);
    ck_assert_int_ne(check_trace(path, "> /dev/null"), 0);
    char *json;
    size_t len;
    ck_assert_int_eq(ck_trace_json(&run, 1, &json, &len, &err), CK_OK);
    ck_assert_ptr_null(strstr(json, "\"C\""));
    ck_assert_uint_eq(strlen(json), len);
    free(json);
    measured_free(&m);
    ck_schedule_free(&base);
    ck_exec_free(e);
    ck_chain_free(&c);
    fx_dir_remove(&dir);
}
END_TEST

/* Nothing to write, a time that is not one, an operation outside the chain: input errors. */
START_TEST(refusals)
{
    ck_chain c;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chaingen_uniform(&c, 2, 8, &err), CK_OK);
    ck_schedule base = {0};
    ck_assert_int_eq(ck_schedule_baseline(&c, &base, &err), CK_OK);
    double start[5] = {0, 1, 2, 3, 4}, sec[5] = {1, 1, 1, 1, 1};
    ck_trace_run run = {"x", &c, &base, start, sec, NULL};
    char *json;
    size_t len;
    ck_assert_int_eq(ck_trace_json(&run, 0, &json, &len, &err), CK_ERR_INPUT);
    sec[2] = NAN;
    ck_assert_int_eq(ck_trace_json(&run, 1, &json, &len, &err), CK_ERR_INPUT);
    sec[2] = 1;
    base.actions[0].stage = 7;
    ck_assert_int_eq(ck_trace_json(&run, 1, &json, &len, &err), CK_ERR_INPUT);
    base.actions[0].stage = 0;
    ck_assert_int_ne(ck_trace_write("/nonexistent-dir/t.json", &run, 1, &err), CK_OK);
    ck_schedule_free(&base);
    ck_chain_free(&c);
}
END_TEST

static Suite *trace_suite(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("trace");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, gpt2_tiny_trace);
    tcase_add_test(tc, chain_trace_without_names_or_counter);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(trace_suite)
