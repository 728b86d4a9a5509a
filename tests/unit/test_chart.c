/* SVG charts: written for a replayed and an executed gpt2-tiny plan and for synthetic
 * chains, then checked for content here and by tests/cli/check_svg.py. Set CK_CHART_KEEP to
 * a directory to keep the charts for looking at. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/chart.h"

#include "planner/planner.h"
#include "planner/workload.h"
#include "sim/exec.h"
#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

static fx_dir dir = {.keep_env = "CK_CHART_KEEP", .name = "chart"};

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    ck_assert_int_ge(n, 0);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static size_t count(const char *s, const char *what)
{
    size_t n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

static int check_svg(const char *path, const char *args)
{
    return fx_validate("check_svg.py", path, args);
}

/* A schedule's predicted timeline (replay) and, when e is non-NULL, its measured one. */
typedef struct {
    uint64_t *predicted, *measured;
} timeline;

static timeline replay_and_run(const ck_chain *c, const ck_schedule *s, ck_exec *e)
{
    ck_err err = {{0}};
    timeline t = {calloc(s->n, sizeof(uint64_t)), e ? calloc(s->n, sizeof(uint64_t)) : NULL};
    ck_assert_ptr_nonnull(t.predicted);
    ck_replay r;
    ck_assert_int_eq(ck_schedule_replay(c, s, &r, t.predicted, NULL, &err), CK_OK);
    if (e) {
        ck_assert_ptr_nonnull(t.measured);
        ck_exec_reset(e);
        ck_exec_trace trace = {.live_after = t.measured};
        ck_assert_msg(ck_exec_step(e, s, 0, NULL, &trace, &err) == CK_OK, "%s", err.msg);
    }
    return t;
}

static void timeline_free(timeline *t)
{
    free(t->predicted);
    free(t->measured);
}

/* gpt2-tiny planned by dp at a budget between its smallest and its baseline peak, executed:
 * the chart has both panels, measured markers, the budget and recomputation marks. */
START_TEST(gpt2_tiny_timeline)
{
    fx_dir_make(&dir);
    ck_err err = {{0}};
    fx_gpt2_dp g;
    fx_gpt2_dp_make(&g);
    ck_assert_uint_gt(g.plan_replay.count[CK_F_CK] + g.plan_replay.count[CK_F_NONE], 0);

    timeline tp = replay_and_run(&g.w.chain, &g.plan.schedule, g.e);
    timeline tb = replay_and_run(&g.w.chain, &g.base, g.e);
    ck_chart_timeline plan = {"plan (dp)", &g.plan.schedule, tp.predicted, tp.measured};
    ck_chart_timeline baseline = {"baseline", &g.base, tb.predicted, tb.measured};
    char path[512];
    snprintf(path, sizeof path, "%s/timeline.svg", dir.path);
    ck_assert_msg(ck_chart_memory_write(path, "gpt2-tiny: dp under a 60% budget", &plan,
                                        &baseline, g.budget, &err) == CK_OK, "%s", err.msg);
    char *svg = slurp(path);
    ck_assert(strncmp(svg, "<?xml", 5) == 0);
    ck_assert_ptr_nonnull(strstr(svg, "xmlns=\"http://www.w3.org/2000/svg\""));
    ck_assert_ptr_null(strstr(svg, "<script"));
    ck_assert_uint_eq(count(svg, "<g class=\"series\">"), 4); /* predicted + measured, twice */
    ck_assert_uint_eq(count(svg, "<polyline"), 2);            /* one line per predicted series */
    ck_assert_uint_eq(count(svg, "<line class=\"budget\""), 2);
    ck_assert_ptr_nonnull(strstr(svg, ">budget "));
    ck_assert_uint_eq(count(svg, "<circle"), g.plan.schedule.n + g.base.n + 1); /* + the legend's */
    size_t recomputed = 0, dropped = 0, loss = 0;
    while (g.plan.schedule.actions[loss].kind != CK_LOSS)
        loss++;
    for (size_t k = 0; k < g.plan.schedule.n; k++) {
        ck_action_kind kind = g.plan.schedule.actions[k].kind;
        recomputed += k > loss && kind != CK_B;
        dropped += k < loss && (kind == CK_F_CK || kind == CK_F_NONE);
    }
    ck_assert_uint_gt(recomputed, 0);
    ck_assert_uint_gt(dropped, 0);
    ck_assert_uint_eq(count(svg, "recomputed:"), recomputed);
    ck_assert_uint_eq(count(svg, "dropped:"), dropped);
    ck_assert_ptr_nonnull(strstr(svg, "MiB</text>"));
    ck_assert_ptr_nonnull(strstr(svg, "gpt2-tiny: dp under a 60% budget"));
    ck_assert_int_eq(check_svg(path, "--series plan,baseline,measured --min-series 4 --legend 9"),
                     0);
    free(svg);
    timeline_free(&tp);
    timeline_free(&tb);
    fx_gpt2_dp_free(&g);
    fx_dir_remove(&dir);
}
END_TEST

/* Titles and labels are escaped: "<&>" and quotes never reach the document raw. */
START_TEST(text_is_escaped)
{
    fx_dir_make(&dir);
    ck_chain c;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chaingen_hetero3(&c, &err), CK_OK);
    ck_schedule base = {0};
    ck_assert_int_eq(ck_schedule_baseline(&c, &base, &err), CK_OK);
    timeline t = replay_and_run(&c, &base, NULL);
    ck_chart_timeline tl = {"a <b> & \"c\"", &base, t.predicted, NULL};
    char path[512];
    snprintf(path, sizeof path, "%s/escaped.svg", dir.path);
    ck_assert_int_eq(ck_chart_memory_write(path, "x<&>y 'q' \"r\"", &tl, NULL, 0, &err), CK_OK);
    char *svg = slurp(path);
    ck_assert_ptr_nonnull(strstr(svg, "x&lt;&amp;&gt;y &apos;q&apos; &quot;r&quot;"));
    ck_assert_ptr_nonnull(strstr(svg, "a &lt;b&gt; &amp; &quot;c&quot;"));
    ck_assert_ptr_null(strstr(svg, "<&>"));
    ck_assert_ptr_null(strstr(svg, "<b>"));
    /* no budget: no budget line, no legend entry for it; no measured series */
    ck_assert_ptr_null(strstr(svg, "class=\"budget\""));
    ck_assert_uint_eq(count(svg, "<g class=\"series\">"), 1);
    ck_assert_int_eq(check_svg(path, "--min-series 1 --legend 4"), 0);

    const ck_chart_point pts[] = {{"<&>", 100, 1.0, false}, {"\"q\"", 50, 2.0, true}};
    snprintf(path, sizeof path, "%s/escaped-tradeoff.svg", dir.path);
    ck_assert_int_eq(ck_chart_tradeoff_write(path, "a&b", "x<y", pts, 2, &err), CK_OK);
    free(svg);
    svg = slurp(path);
    ck_assert_ptr_nonnull(strstr(svg, ">&lt;&amp;&gt;</text>"));
    ck_assert_ptr_nonnull(strstr(svg, "x&lt;y (bytes, B)"));
    ck_assert_ptr_null(strstr(svg, "<&>"));
    ck_assert_int_eq(check_svg(path, "--series '<&>,\"q\"' --min-series 2"), 0);
    free(svg);
    timeline_free(&t);
    ck_schedule_free(&base);
    ck_chain_free(&c);
    fx_dir_remove(&dir);
}
END_TEST

/* Every planner of gpt2-tiny at several budgets, predicted, with measured points for dp:
 * one series per planner and kind, a legend entry per planner. */
START_TEST(gpt2_tiny_tradeoff)
{
    fx_dir_make(&dir);
    ck_err err = {{0}};
    ck_workload w;
    fx_workload_load("models/gpt2-tiny.json", &w);
    ck_schedule base = {0};
    ck_assert_int_eq(ck_schedule_baseline(&w.chain, &base, &err), CK_OK);
    ck_replay b;
    ck_assert_int_eq(ck_schedule_replay(&w.chain, &base, &b, NULL, NULL, &err), CK_OK);
    ck_chart_point pts[64];
    size_t n = 0;
    char series[256] = "";
    size_t planners = 0;
    for (const ck_planner *const *p = ck_planners; *p; p++) {
        size_t before = n;
        for (int k = 3; k <= 10; k++) {
            ck_plan_result r;
            ck_replay rp;
            uint64_t min = 0;
            ck_planner_opts po = {.slots = CK_DEFAULT_SLOTS};
            int rc = ck_planner_run(&w.chain, *p, b.peak_bytes * (uint64_t)k / 10, &po, &r, &rp,
                                   &min, &err);
            ck_assert_msg(rc == CK_OK || rc == CK_ERR_INFEASIBLE, "%s", err.msg);
            if (rc != CK_OK)
                continue;
            double overhead = 100.0 * (rp.time / b.time - 1.0);
            pts[n++] = (ck_chart_point){(*p)->name, rp.peak_bytes, overhead, false};
            if (*p == &ck_planner_dp) /* a stand-in for measured points: slightly off */
                pts[n++] = (ck_chart_point){(*p)->name, rp.peak_bytes - 4096, overhead + 1.5,
                                            true};
            ck_planner_result_free(&r);
        }
        if (n > before) {
            planners++;
            snprintf(series + strlen(series), sizeof series - strlen(series), "%s%s",
                     *series ? "," : "", (*p)->name);
        }
    }
    ck_assert_uint_ge(planners, 4);
    char path[512];
    snprintf(path, sizeof path, "%s/tradeoff.svg", dir.path);
    ck_assert_msg(ck_chart_tradeoff_write(path, "gpt2-tiny: memory against time", NULL, pts, n,
                                          &err) == CK_OK, "%s", err.msg);
    char *svg = slurp(path);
    ck_assert_uint_eq(count(svg, "<g class=\"series\">"), planners + 1);
    ck_assert_uint_eq(count(svg, "<g class=\"legend-item\">"), planners + 2);
    ck_assert_ptr_nonnull(strstr(svg, "stroke-dasharray=\"6 3\" points="));
    ck_assert_ptr_nonnull(strstr(svg, "%</text>"));
    char args[512];
    snprintf(args, sizeof args, "--series %s --min-series %zu --legend %zu", series, planners + 1,
             planners + 2);
    ck_assert_int_eq(check_svg(path, args), 0);
    free(svg);
    ck_schedule_free(&base);
    ck_workload_free(&w);
    fx_dir_remove(&dir);
}
END_TEST

/* What cannot be drawn is refused with an input error; an unwritable path is an error too,
 * and the validator rejects what is not an SVG chart. */
START_TEST(refusals)
{
    fx_dir_make(&dir);
    ck_err err = {{0}};
    ck_schedule empty = {0};
    ck_chart_timeline t = {"x", &empty, NULL, NULL};
    char *svg;
    size_t len;
    ck_assert_int_eq(ck_chart_memory_svg("t", &t, NULL, 0, &svg, &len, &err), CK_ERR_INPUT);
    ck_assert_int_eq(ck_chart_tradeoff_svg("t", NULL, NULL, 0, &svg, &len, &err), CK_ERR_INPUT);
    ck_chart_point nan_point = {"dp", 1, NAN, false};
    ck_assert_int_eq(ck_chart_tradeoff_svg("t", NULL, &nan_point, 1, &svg, &len, &err),
                     CK_ERR_INPUT);
    ck_chart_point one = {"dp", 1 << 20, 3, false};
    ck_assert_int_ne(ck_chart_tradeoff_write("/nonexistent-dir/x.svg", "t", NULL, &one, 1, &err),
                     CK_OK);
    /* a single point still makes a chart with a sensible range */
    ck_assert_int_eq(ck_chart_tradeoff_svg("t", NULL, &one, 1, &svg, &len, &err), CK_OK);
    ck_assert_uint_eq(strlen(svg), len);
    ck_assert_ptr_null(strstr(svg, "nan"));
    ck_assert_ptr_null(strstr(svg, "inf"));
    free(svg);

    char path[512];
    snprintf(path, sizeof path, "%s/bad.svg", dir.path);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("<svg><title>t</title><g class=\"series\"><line/></g>", f);
    fclose(f);
    ck_assert_int_ne(check_svg(path, "> /dev/null"), 0); /* not well-formed */
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("<svg><title>t</title></svg>", f);
    fclose(f);
    ck_assert_int_ne(check_svg(path, "> /dev/null"), 0); /* no SVG namespace */
    fx_dir_remove(&dir);
}
END_TEST

static Suite *chart_suite(void)
{
    Suite *s = suite_create("chart");
    TCase *tc = tcase_create("chart");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, gpt2_tiny_timeline);
    tcase_add_test(tc, text_is_escaped);
    tcase_add_test(tc, gpt2_tiny_tradeoff);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(chart_suite)
