/* ckplan-run/1 records (sim/record.h): what is written reads back as the same figures, for
 * each status, and a corrupt line costs only itself. */
#include "sim/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_main.h"

enum { STEPS = 2 };

typedef struct {
    double losses[STEPS];
    char sha[STEPS][65];
    ck_run_measure m;
} execution;

static void execution_init(execution *x, uint64_t peak, uint64_t rss, double seconds)
{
    for (int k = 0; k < STEPS; k++) {
        x->losses[k] = 3.0 + k;
        memset(x->sha[k], '0' + k, 64);
        x->sha[k][64] = '\0';
    }
    x->m = (ck_run_measure){.activation_peak = peak, .static_bytes = 4096, .rss_peak = rss,
                            .median_seconds = seconds, .losses = x->losses, .grad_sha = x->sha};
}

static ck_workload workload(void)
{
    ck_workload w = {.path = "models/m.json"};
    memset(w.sha256, 'c', 64);
    w.chain.name = "tiny-model";
    w.chain.n_stages = 3;
    return w;
}

static ck_plan_file plan_file(void)
{
    return (ck_plan_file){
        .planner = "dp", .granularity = "block", .budget_bytes = 22 << 20,
        .predicted = {.activation_peak_bytes = 1000, .static_bytes = 4096,
                      .baseline_activation_peak_bytes = 3000, .time = 1.5, .baseline_time = 1.25,
                      .overhead = 0.2}};
}

/* Parses one line, which must be a record. */
static ck_runs parse(const char *line)
{
    ck_runs runs;
    ck_err err = {{0}};
    ck_assert_msg(ck_record_parse_runs("r.jsonl", line, strlen(line), NULL, NULL, NULL, &runs, &err) ==
                      CK_OK, "%s", err.msg);
    ck_assert_uint_eq(runs.n, 1);
    ck_assert_uint_eq(runs.n_bad, 0);
    return runs;
}

static void check_predicted(const ck_run_row *r)
{
    ck_assert(r->has_predicted);
    ck_assert_uint_eq(r->predicted_peak, 1000);
    ck_assert_uint_eq(r->predicted_baseline_peak, 3000);
    ck_assert_uint_eq(r->static_bytes, 4096);
    ck_assert_double_eq(r->predicted_time, 1.5);
    ck_assert_double_eq(r->predicted_baseline_time, 1.25);
    ck_assert_double_eq(r->predicted_overhead, 0.2);
}

/* A ran record with verdict v and --verify performed or not reads back as written. */
static ck_runs ran_round_trip(bool verify, bool passed)
{
    ck_workload w = workload();
    ck_plan_file p = plan_file();
    execution base, plan;
    execution_init(&base, 3000, 9 << 20, 0.25);
    execution_init(&plan, 990, 8 << 20, 0.3);
    ck_plan_check check = {0};
    ck_verdict v = {.passed = passed, .loss_identical = true, .gradients_identical = passed,
                    .peak_within = true, .plan_file_matches = true, .peak_ratio = 0.99};
    ck_ran_record r = {.plan_path = "p.json", .plan_sha = "ab", .plan = &p, .check = &check,
                       .w = &w, .steps = STEPS, .threads = 2, .seed = 7,
                       .verify_performed = verify, .baseline = &base.m, .plan_run = &plan.m,
                       .measured_overhead = -0.125, .verdict = &v};
    char *line = ck_record_ran(&r);
    ck_assert_ptr_nonnull(line);
    ck_assert_ptr_null(strchr(line, '\n'));
    ck_runs runs = parse(line);
    free(line);
    return runs;
}

START_TEST(ran_record_reads_back)
{
    ck_runs runs = ran_round_trip(true, true);
    const ck_run_row *r = &runs.rows[0];
    ck_assert_int_eq(r->status, CK_RUN_RAN);
    ck_assert_uint_eq(r->line, 1);
    ck_assert_str_eq(r->planner, "dp");
    ck_assert_str_eq(r->model, "tiny-model");
    ck_assert_uint_eq(r->budget_bytes, 22 << 20);
    check_predicted(r);
    ck_assert(r->has_measured);
    ck_assert_uint_eq(r->measured_peak, 990);
    ck_assert_uint_eq(r->measured_rss, 8 << 20);
    ck_assert_uint_eq(r->baseline_peak, 3000);
    ck_assert_uint_eq(r->baseline_rss, 9 << 20);
    ck_assert_double_eq(r->measured_time, 0.3);
    ck_assert_double_eq(r->baseline_time, 0.25);
    ck_assert_double_eq(r->measured_overhead, -0.125);
    ck_assert(r->verify_performed && r->verify_passed);
    ck_assert_str_eq(ck_record_outcome(r), "passed");
    ck_record_runs_free(&runs);
}
END_TEST

START_TEST(verdicts_read_back_as_outcomes)
{
    ck_runs failed = ran_round_trip(true, false), unchecked = ran_round_trip(false, true);
    ck_assert_str_eq(ck_record_outcome(&failed.rows[0]), "FAILED");
    ck_assert_str_eq(ck_record_outcome(&unchecked.rows[0]), "not checked");
    ck_record_runs_free(&failed);
    ck_record_runs_free(&unchecked);
}
END_TEST

START_TEST(planned_and_infeasible_records_read_back)
{
    ck_workload w = workload();
    ck_plan_file p = plan_file();
    char *line = ck_record_planned(&p, "ab", &w);
    ck_runs runs = parse(line);
    free(line);
    ck_assert_int_eq(runs.rows[0].status, CK_RUN_PLANNED);
    check_predicted(&runs.rows[0]);
    ck_assert(!runs.rows[0].has_measured);
    ck_assert_str_eq(ck_record_outcome(&runs.rows[0]), "planned only");
    ck_record_runs_free(&runs);

    line = ck_record_infeasible("revolve", 1 << 20, 5 << 20, &w, NULL, NULL);
    runs = parse(line);
    free(line);
    ck_assert_int_eq(runs.rows[0].status, CK_RUN_INFEASIBLE);
    ck_assert_str_eq(runs.rows[0].planner, "revolve");
    ck_assert_uint_eq(runs.rows[0].budget_bytes, 1 << 20);
    ck_assert_uint_eq(runs.rows[0].min_budget_bytes, 5 << 20);
    ck_assert(!runs.rows[0].has_predicted);
    ck_assert_str_eq(ck_record_outcome(&runs.rows[0]), "infeasible");
    ck_record_runs_free(&runs);
}
END_TEST

/* The options a plan was made with, a whole layout among them, read back from every kind of
 * record as one line of text; none as "". */
START_TEST(records_keep_the_options_and_layout)
{
    ck_workload w = workload();
    ck_plan_file p = plan_file();
    char *none = ck_record_planned(&p, "ab", &w);
    ck_runs runs = parse(none);
    free(none);
    ck_assert_str_eq(runs.rows[0].options, "");
    ck_record_runs_free(&runs);

    ck_model_opts o = {.recipe = "bf16-master",
                       .layout = {.dp = 8, .zero = 3, .tp = 2, .sp = true, .pp = 4,
                                  .microbatches = 8, .virtual_stages = 2}};
    ck_assert(ck_model_opts_set(&o, "T", 1, 4096));
    const char *want = "T=4096 recipe=bf16-master tp=2 sp dp=8 zero=3 pp=4 microbatches=8 virtual_stages=2";
    p.model_opts = o;
    char *line = ck_record_planned(&p, "ab", &w);
    runs = parse(line);
    free(line);
    ck_assert_str_eq(runs.rows[0].options, want);
    ck_record_runs_free(&runs);

    line = ck_record_infeasible("dp", 1, 2, &w, "block", &o);
    ck_assert_ptr_nonnull(strstr(line, "\"options\":{\"set\":{\"T\":4096}"));
    runs = parse(line);
    free(line);
    ck_assert_str_eq(runs.rows[0].options, want);
    ck_record_runs_free(&runs);

    /* a pipeline given by --microbatches alone (one stage) is written, and read, with its defaults */
    ck_model_opts m = {.layout = {.pp = 1, .microbatches = 4}};
    line = ck_record_infeasible("dp", 1, 2, &w, "block", &m);
    runs = parse(line);
    free(line);
    ck_assert_str_eq(runs.rows[0].options, "pp=1 microbatches=4 virtual_stages=1");
    ck_record_runs_free(&runs);
}
END_TEST

typedef struct {
    int n;
    char first[1024];
} bad_lines;

static void collect(void *ctx, const char *msg)
{
    bad_lines *b = ctx;
    if (b->n++ == 0)
        snprintf(b->first, sizeof b->first, "%s", msg);
}

/* A corrupt line between good ones is reported with its number and JSON path, the blank
 * line is neither, and the good ones are kept with their own line numbers. */
START_TEST(a_bad_line_costs_only_itself)
{
    ck_workload w = workload();
    char *good = ck_record_infeasible("chen", 1, 2, &w, NULL, NULL);
    char text[4096];
    snprintf(text, sizeof text, "%s\n\n{\"format\": \"ckplan-run/1\", \"status\": \"lost\"}\n%s", good, good);
    free(good);
    bad_lines b = {0};
    ck_runs runs;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_record_parse_runs("r.jsonl", text, strlen(text), collect, &b, NULL, &runs, &err),
                     CK_OK);
    ck_assert_uint_eq(runs.n, 2);
    ck_assert_uint_eq(runs.n_lines, 3);
    ck_assert_uint_eq(runs.n_bad, 1);
    ck_assert_int_eq(b.n, 1);
    ck_assert_uint_eq(runs.rows[0].line, 1);
    ck_assert_uint_eq(runs.rows[1].line, 4);
    ck_assert_msg(strncmp(b.first, "r.jsonl:3: status: expected", 27) == 0, "%s", b.first);
    ck_record_runs_free(&runs);
}
END_TEST

/* model.options are checked as a plan file's: a layout out of range costs its line. */
START_TEST(bad_options_cost_their_line)
{
    static const char *const cases[][2] = {
        {"{\"dp\": 0, \"zero\": 1}", "r.jsonl:1: model.options.dp: expected a whole number from 1"},
        {"{\"pp\": 2}", "r.jsonl:1: model.options.microbatches: missing"},
        {"{\"sp\": true}", "r.jsonl:1: model.options.sp: expected true, and only with"},
        {"{\"frob\": 1}", "r.jsonl:1: model.options.frob: unknown field"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text, "{\"format\": \"ckplan-run/1\", \"status\": \"infeasible\", "
                 "\"time\": \"t\", \"plan\": {\"planner\": \"dp\", \"budget_bytes\": 1}, "
                 "\"model\": {\"name\": \"m\", \"options\": %s}, \"minimum_budget_bytes\": 2}",
                 cases[i][0]);
        bad_lines b = {0};
        ck_runs runs;
        ck_err err = {{0}};
        ck_assert_int_eq(ck_record_parse_runs("r.jsonl", text, strlen(text), collect, &b, NULL, &runs,
                                              &err), CK_OK);
        ck_assert_uint_eq(runs.n_bad, 1);
        ck_assert_msg(strstr(b.first, cases[i][1]) == b.first, "%s", b.first);
        ck_record_runs_free(&runs);
    }
}
END_TEST

START_TEST(an_interrupt_keeps_nothing)
{
    atomic_int stop = 1;
    ck_runs runs;
    ck_err err = {{0}};
    const char *text = "\n";
    ck_assert_int_eq(ck_record_parse_runs("r.jsonl", text, 1, NULL, NULL, &stop, &runs, &err),
                     CK_INTERRUPTED);
    ck_assert_ptr_null(runs.rows);
    ck_assert_uint_eq(runs.n, 0);
}
END_TEST

static Suite *record_suite(void)
{
    Suite *s = suite_create("record");
    TCase *tc = tcase_create("record");
    tcase_add_test(tc, ran_record_reads_back);
    tcase_add_test(tc, verdicts_read_back_as_outcomes);
    tcase_add_test(tc, planned_and_infeasible_records_read_back);
    tcase_add_test(tc, a_bad_line_costs_only_itself);
    tcase_add_test(tc, records_keep_the_options_and_layout);
    tcase_add_test(tc, bad_options_cost_their_line);
    tcase_add_test(tc, an_interrupt_keeps_nothing);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(record_suite)
