/* runner: planning and running one plan, shared by plan, run and sweep (see runner.h). */
#include "cli/runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/chart.h"
#include "cli/files.h"
#include "cli/human.h"
#include "cli/interrupt.h"
#include "cli/trace.h"
#include "planner/json.h"
#include "planner/layers.h"
#include "planner/sha256.h"
#include "planner/size.h"
#include "sim/blas.h"
#include "sim/exec.h"
#include "sim/mem.h"
#include "sim/clock.h"
#include "sim/record.h"
#include "sim/verify.h"

/* Rounds of alternating baseline and plan steps that the times come from. */
#define TIMING_ROUNDS(steps) (2 * (steps) + 1)

typedef ck_run_settings run_args;

static void measure_free(ck_run_measure *m)
{
    free(m->losses);
    free(m->grad_sha);
    free(m->last_grads);
}

typedef struct {
    bool show;
    double start;
} progress;

static void progress_update(progress *p, const char *what, uint64_t step, uint64_t steps)
{
    if (p->show && ck_clock_seconds() - p->start > 1.0)
        fprintf(stderr, "\rckplan run: %s, step %llu of %llu   ", what, (unsigned long long)step,
                (unsigned long long)steps);
}

static void progress_done(progress *p)
{
    if (p->show && ck_clock_seconds() - p->start > 1.0)
        fprintf(stderr, "\r%60s\r", "");
}

/* Runs one warm-up step and `steps` measured steps of s from the initial state. */
static int measure(ck_exec *e, const ck_schedule *s, uint64_t steps, const char *what,
                   progress *prog, ck_run_measure *m, ck_err *err)
{
    memset(m, 0, sizeof *m);
    m->losses = calloc(steps, sizeof *m->losses);
    m->grad_sha = calloc(steps, sizeof *m->grad_sha);
    double *seconds = calloc(steps, sizeof *seconds);
    if (!m->losses || !m->grad_sha || !seconds) {
        free(seconds);
        return ck_err_oom(err);
    }
    ck_exec_reset(e);
    int rc = ck_mem_rss_reset_peak(err);
    for (uint64_t k = 0; k <= steps && rc == CK_OK; k++) {
        progress_update(prog, what, k, steps);
        if ((rc = ck_interrupt_check(err)) != CK_OK)
            break;
        ck_step_stats st;
        rc = ck_exec_step(e, s, k, &st, NULL, err);
        if (rc != CK_OK || k == 0) /* step 0 warms caches and thread pools up */
            continue;
        size_t n;
        const float *g = ck_exec_gradients(e, &n);
        m->losses[k - 1] = st.loss;
        seconds[k - 1] = st.seconds;
        ck_sha256_hex(g, n * sizeof *g, m->grad_sha[k - 1]);
        if (st.activation_peak_bytes > m->activation_peak)
            m->activation_peak = st.activation_peak_bytes;
        m->static_bytes = st.static_bytes;
        if (k == steps) {
            m->last_grads = malloc(n * sizeof *g);
            if (!m->last_grads)
                rc = ck_err_oom(err);
            else
                memcpy(m->last_grads, g, n * sizeof *g);
            m->n_grads = n;
        }
    }
    if (rc == CK_OK)
        rc = ck_mem_rss_peak(&m->rss_peak, err);
    free(seconds);
    return rc;
}

/* Times the two schedules step by step in alternation, so that the machine's drift (turbo,
 * other load) falls on both alike; the overhead is the median of the per-round ratios.
 * Parameters keep training in between: the values do not change the time a step takes. */
static int time_interleaved(ck_exec *e, const ck_schedule *base, const ck_schedule *plan,
                            uint64_t rounds, ck_run_measure *mb, ck_run_measure *mp, double *overhead,
                            ck_err *err)
{
    double *t = calloc(3 * rounds, sizeof *t);
    if (!t)
        return ck_err_oom(err);
    double *tb = t, *tp = t + rounds, *ratio = t + 2 * rounds;
    int rc = CK_OK;
    ck_exec_reset(e);
    for (uint64_t k = 0; k < rounds && rc == CK_OK; k++) {
        ck_step_stats sb, sp;
        if ((rc = ck_interrupt_check(err)) != CK_OK)
            break;
        rc = ck_exec_step(e, base, k, &sb, NULL, err);
        if (rc == CK_OK)
            rc = ck_exec_step(e, plan, k, &sp, NULL, err);
        tb[k] = sb.seconds;
        tp[k] = sp.seconds;
        ratio[k] = sp.seconds / sb.seconds;
    }
    if (rc == CK_OK) {
        *overhead = ck_clock_median(ratio, rounds) - 1;
        mb->median_seconds = ck_clock_median(tb, rounds);
        mp->median_seconds = ck_clock_median(tp, rounds);
    }
    free(t);
    return rc;
}

static void print_summary(const ck_plan_file *p, const ck_workload *w, const ck_run_measure *base,
                          const ck_run_measure *plan, double measured_overhead,
                          const ck_verdict *v, bool verified)
{
    char a[32], b[32], c[32], d[32];
    ck_human_put_terminal_text(stdout, w->chain.name); /* names from the input: shown, never obeyed */
    fputs(": planner ", stdout);
    ck_human_put_terminal_text(stdout, p->planner);
    printf(", %zu stages, budget ", w->chain.n_stages);
    ck_size_format(p->budget_bytes, a, sizeof a);
    printf("%s\n\n", a);
    printf("  %-22s %12s %12s %12s %12s\n", "", "baseline", "", "plan", "");
    printf("  %-22s %12s %12s %12s %12s\n", "", "predicted", "measured", "predicted", "measured");
    const ck_plan_figures *f = &p->predicted;
    ck_size_format(f->baseline_activation_peak_bytes, a, sizeof a);
    ck_size_format(base->activation_peak, b, sizeof b);
    ck_size_format(f->activation_peak_bytes, c, sizeof c);
    ck_size_format(plan->activation_peak, d, sizeof d);
    printf("  %-22s %12s %12s %12s %12s\n", "activation peak", a, b, c, d);
    ck_size_format(f->static_bytes, a, sizeof a);
    ck_size_format(base->static_bytes, b, sizeof b);
    ck_size_format(plan->static_bytes, d, sizeof d);
    printf("  %-22s %12s %12s %12s %12s\n", "static", a, b, a, d);
    ck_size_format(base->rss_peak, b, sizeof b);
    ck_size_format(plan->rss_peak, d, sizeof d);
    printf("  %-22s %12s %12s %12s %12s\n", "resident peak (RSS)", "", b, "", d);
    bool seconds = p->granularity != NULL;
    snprintf(b, sizeof b, "%.2f ms", 1e3 * base->median_seconds);
    snprintf(d, sizeof d, "%.2f ms", 1e3 * plan->median_seconds);
    printf("  %-22s %12s %12s %12s %12s\n", "step time (median)", "", b, "", d);
    snprintf(c, sizeof c, "%+.1f%%", 100 * f->overhead);
    snprintf(d, sizeof d, "%+.1f%%", 100 * measured_overhead);
    printf("  %-22s %12s %12s %12s %12s\n\n", "overhead", "", "", c, d);
    if (!seconds)
        printf("(a chain file's time unit is scaled so that the baseline step takes about 0.2 s)\n\n");
    if (!verified)
        return;
    printf("verify: loss %s, gradients %s", v->loss_identical ? "identical" : "DIFFERENT",
           v->gradients_identical ? "identical bit for bit" : "DIFFERENT");
    if (!v->gradients_identical)
        printf(" (largest difference %.3g)", v->max_abs_diff);
    printf("\nverify: tracked activation peak is %.2f%% of the prediction: %s\n", 100 * v->peak_ratio,
           v->peak_within ? "within it" : "OUTSIDE the allowed range");
    printf("verify: the plan file's figures %s the replay of its schedule\n",
           v->plan_file_matches ? "match" : "DIFFER from");
    printf("verify: %s\n", v->passed ? "passed" : "FAILED");
}

static bool is_regular_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A path the plan file names: a relative one is relative to the plan's directory. Plans
 * name their files as `ckplan plan` was given them, from the directory it ran in, so a
 * path that is no file beside the plan but is one from here is taken from here. NULL when
 * out of memory. */
char *ck_runner_plan_relative(const char *plan_path, const char *path)
{
    const char *slash = strrchr(plan_path, '/');
    if (path[0] == '/' || !slash)
        return strdup(path);
    size_t dir = (size_t)(slash - plan_path) + 1;
    char *beside = malloc(dir + strlen(path) + 1);
    if (beside) {
        memcpy(beside, plan_path, dir);
        strcpy(beside + dir, path);
    }
    if (beside && !is_regular_file(beside) && is_regular_file(path)) {
        free(beside);
        return strdup(path);
    }
    return beside;
}

/* "LABEL: WHAT: the message already in err", for an error found in a file the plan names. */
static int name_plan(int rc, const char *label, const char *what, ck_err *err)
{
    char cause[sizeof err->msg];
    memcpy(cause, err->msg, sizeof cause);
    return ck_err_fail(err, rc, "%s: %s%s", label, what, cause);
}

/* Stage times from the costs file the plan was made with, if any. */
static int apply_plan_costs(const char *plan_path, const char *label, const ck_plan_file *p,
                            ck_workload_opts *opts, ck_workload *w, ck_err *err)
{
    if (!p->costs_path || !w->model)
        return CK_OK;
    char *costs = ck_runner_plan_relative(plan_path, p->costs_path);
    if (!costs)
        return ck_err_oom(err);
    opts->costs_path = costs;
    int rc = ck_workload_apply_costs(w, opts, err);
    free(costs);
    opts->costs_path = NULL;
    return rc == CK_ERR_INPUT ? name_plan(rc, label, "details.costs: ", err) : rc;
}

int ck_runner_read_plan(const char *path, ck_plan_file *out, char *sha256, ck_err *err)
{
    cJSON *root = NULL;
    char *raw = NULL;
    size_t raw_len = 0;
    int rc = ck_json_load_file(path, &root, &raw, &raw_len, err);
    if (rc != CK_OK)
        return rc;
    if (sha256)
        ck_sha256_hex(raw, raw_len, sha256);
    free(raw);
    rc = ck_plan_from_json(root, path, out, err);
    cJSON_Delete(root);
    return rc;
}

int ck_runner_load_plan_model(const char *plan_path, const char *label, const ck_plan_file *p,
                              ck_workload *w, ck_err *err)
{
    ck_workload_opts opts;
    ck_workload_opts_default(&opts);
    if (p->granularity && !ck_workload_granularity_parse(p->granularity, &opts.granularity))
        return ck_err_fail(err, CK_ERR_INPUT, "%s: details.granularity: expected 'op' or 'block', got '%s'",
                       label, p->granularity);
    if (p->has_cost_model)
        opts.cost = p->cost_model;
    opts.model = p->model_opts;
    char *model = ck_runner_plan_relative(plan_path, p->model_path);
    if (!model)
        return ck_err_oom(err);
    int rc = ck_workload_load(model, &opts, w, err);
    free(model);
    if (rc != CK_OK)
        return rc == CK_ERR_INPUT ? name_plan(rc, label, "model.path: ", err) : rc;
    if (strcasecmp(w->sha256, p->model_sha256) != 0)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: the model file %s changed since the plan was made "
                                        "(sha256 %.12s..., plan says %.12s...); plan it again",
                     label, w->path, w->sha256, p->model_sha256);
    else if (w->chain.n_stages != p->stages)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: stages: the plan has %zu stages, the model derives %zu",
                     label, p->stages, w->chain.n_stages);
    else if ((rc = ck_plan_check_stages(p, &(ck_plan_stage_map){&w->chain, w->model, w->stage_first},
                                        err)) != CK_OK)
        rc = name_plan(rc, label, "", err);
    if (rc == CK_OK)
        rc = apply_plan_costs(plan_path, label, p, &opts, w, err);
    if (rc != CK_OK)
        ck_workload_free(w);
    return rc;
}

/* MemAvailable of /proc/meminfo, or 0 when unknown. */
static uint64_t available_memory(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long kib = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kib * 1024;
}

int ck_runner_memory(ck_run_memory *out, ck_err *err)
{
    const char *env = getenv("CKPLAN_RUN_MEMORY");
    if (!env || !*env) {
        out->bytes = available_memory();
        out->source = "this machine has available (MemAvailable)";
        return CK_OK;
    }
    out->source = "CKPLAN_RUN_MEMORY allows";
    ck_err why;
    if (ck_size_parse(env, &out->bytes, &why) != CK_OK)
        return ck_err_fail(err, CK_ERR_INPUT, "CKPLAN_RUN_MEMORY: %s", why.msg);
    if (out->bytes == 0)
        return ck_err_fail(err, CK_ERR_INPUT, "CKPLAN_RUN_MEMORY: the memory a run may use must be "
                                          "positive (e.g. 64G), got '%s'", env);
    return CK_OK;
}

/* --ranks N: N processes of one rank's step each, no baseline. */
static int ranks_fit(const ck_run_memory *m, const ck_plan_figures *f, uint64_t ranks, ck_err *err)
{
    uint64_t one = ck_planner_step_budget(f->static_bytes, f->activation_peak_bytes), need;
    bool exact = ck_size_mul(one, ranks, &need);
    if (!m->bytes || (exact && need <= m->bytes))
        return CK_OK;
    char n[32], r[32], h[32];
    ck_size_format(exact ? need : UINT64_MAX, n, sizeof n);
    ck_size_format(one, r, sizeof r);
    ck_size_format(m->bytes, h, sizeof h);
    return ck_err_fail(err, CK_ERR_INPUT, "running %llu ranks on this machine needs %s%s (%llu x "
                       "%s, what each rank's step of the plan holds; --ranks runs no baseline), "
                       "more than the %s %s; free memory, run fewer ranks (plan for a smaller "
                       "--dp), or set CKPLAN_RUN_MEMORY (e.g. 64G) to allow more",
                       (unsigned long long)ranks, exact ? "" : "over ", n, (unsigned long long)ranks,
                       r, h, m->source);
}

int ck_runner_fits_here(const ck_run_memory *m, const ck_plan_figures *f, uint64_t ranks,
                        ck_err *err)
{
    if (ranks)
        return ranks_fit(m, f, ranks, err);
    uint64_t act = f->baseline_activation_peak_bytes > f->activation_peak_bytes
                       ? f->baseline_activation_peak_bytes
                       : f->activation_peak_bytes;
    uint64_t need = ck_planner_step_budget(f->static_bytes, act);
    if (m->bytes && need > m->bytes) {
        char n[32], h[32];
        ck_size_format(need, n, sizeof n);
        ck_size_format(m->bytes, h, sizeof h);
        return ck_err_fail(err, CK_ERR_INPUT, "running the baseline next to the plan needs %s, more "
                                          "than the %s %s; free memory, or set CKPLAN_RUN_MEMORY "
                                          "(e.g. 64G) to allow more",
                       n, h, m->source);
    }
    return CK_OK;
}

/* One more step of s with every operation's start, duration and live bytes recorded, for
 * the chart and the trace. The arrays (s->n entries each) belong to the caller. */
typedef struct {
    double *start, *seconds;
    uint64_t *live;
} traced_step;

static int trace_step(ck_exec *e, const ck_schedule *s, uint64_t step, traced_step *t, ck_err *err)
{
    t->start = calloc(s->n, sizeof *t->start);
    t->seconds = calloc(s->n, sizeof *t->seconds);
    t->live = calloc(s->n, sizeof *t->live);
    if (!t->start || !t->seconds || !t->live)
        return ck_err_oom(err);
    ck_exec_trace trace = {.seconds = t->seconds, .start = t->start, .live_after = t->live};
    ck_step_stats st;
    return ck_exec_step(e, s, step, &st, &trace, err);
}

static void traced_step_free(traced_step *t)
{
    free(t->start);
    free(t->seconds);
    free(t->live);
}

/* The chart and the trace of run --svg / --trace, from one traced step of each schedule. */
static int draw_run(const run_args *a, const ck_plan_file *plan, const ck_workload *w, ck_exec *e,
                    const ck_schedule *baseline, ck_err *err)
{
    traced_step tp = {0}, tb = {0};
    uint64_t step = TIMING_ROUNDS(a->steps);
    int rc = trace_step(e, &plan->schedule, step, &tp, err);
    if (rc == CK_OK)
        rc = trace_step(e, baseline, step, &tb, err);
    char label[64];
    snprintf(label, sizeof label, "%s plan", plan->planner);
    if (rc == CK_OK && a->svg_path) {
        char title[256];
        snprintf(title, sizeof title, "%s: %s plan, activation memory per operation, predicted and "
                                      "measured", w->chain.name, plan->planner);
        uint64_t budget;
        ck_planner_activation_budget(plan->budget_bytes, plan->predicted.static_bytes, &budget);
        rc = ck_chart_schedules_write(a->svg_path, title, &w->chain, label, &plan->schedule,
                                      tp.live, tb.live, budget, err);
    }
    if (rc == CK_OK && a->trace_path) {
        ck_trace_run runs[2] = {
            {label, &w->chain, &plan->schedule, tp.start, tp.seconds, tp.live},
            {"baseline", &w->chain, baseline, tb.start, tb.seconds, tb.live},
        };
        rc = ck_trace_write(a->trace_path, runs, 2, err);
    }
    traced_step_free(&tp);
    traced_step_free(&tb);
    return rc;
}

#define RUN_OUTPUTS(s) {{(s)->runs_path, "--runs"}, {(s)->svg_path, "--svg"}, {(s)->trace_path, "--trace"}}

int ck_runner_outputs_apart(const ck_run_settings *s, const ck_named_file *inputs, size_t n_inputs,
                            ck_err *err)
{
    const ck_named_file out[] = RUN_OUTPUTS(s);
    return ck_files_check_apart("run", inputs, n_inputs, out, sizeof out / sizeof out[0], err);
}

int ck_runner_plan_files_apart(const char *cmd, const char *plan_path, const ck_plan_file *p,
                               const ck_workload *w, const ck_named_file *outputs, size_t n_outputs,
                               ck_err *err)
{
    char *costs = p->costs_path ? ck_runner_plan_relative(plan_path, p->costs_path) : NULL;
    if (p->costs_path && !costs)
        return ck_err_oom(err);
    const ck_named_file in[] = {{w->path, "the plan's model"}, {costs, "the plan's costs"}};
    int rc = ck_files_check_apart(cmd, in, sizeof in / sizeof in[0], outputs, n_outputs, err);
    free(costs);
    return rc;
}

int ck_runner_prepare(const ck_run_settings *a, const ck_plan_file *p, const ck_workload *given,
                      ck_runner_basis *b, ck_err *err)
{
    memset(b, 0, sizeof *b);
    ck_run_memory mem;
    int rc = ck_runner_memory(&mem, err);
    if (rc == CK_OK && given) {
        b->w = given;
    } else if (rc == CK_OK) {
        rc = ck_runner_load_plan_model(a->plan_path, a->label, p, &b->loaded, err);
        b->have_loaded = rc == CK_OK;
        b->w = &b->loaded;
        const ck_named_file out[] = RUN_OUTPUTS(a);
        if (rc == CK_OK)
            rc = ck_runner_plan_files_apart("run", a->plan_path, p, &b->loaded, out,
                                            sizeof out / sizeof out[0], err);
    }
    if (rc == CK_OK)
        rc = ck_plan_bind_variants(p, &b->w->chain, a->label, &b->schedule, err);
    if (rc == CK_OK) { /* what the step holds exactly, as plan wrote it: the program's */
        ck_plan_file bound = *p;
        bound.schedule = b->schedule;
        ck_schedule_replayer exact = ck_workload_replayer(b->w);
        rc = ck_plan_check_replay(&bound, &b->w->chain, &exact, b->w->statics.total, &b->check, err);
        if (rc == CK_OK)
            ck_plan_check_statics(p, &b->w->statics, &b->check);
        if (rc == CK_ERR_INPUT)
            rc = name_plan(rc, a->label, "", err);
    }
    if (rc == CK_OK && (rc = ck_runner_fits_here(&mem, &b->check.replayed, a->ranks, err)) != CK_OK)
        rc = name_plan(rc, a->label, "", err);
    return rc;
}

/* Without --verify, a plan file whose figures its replay contradicts still runs, on the
 * replayed figures, and the record says so; the user is told here. */
static void warn_differences(const run_args *a, const ck_plan_check *check)
{
    if (check->n_differences)
        fprintf(stderr, "ckplan: warning: %s: the plan file's figures differ from the replay of "
                        "its schedule; running it on the replayed ones (--verify fails on this):\n",
                a->label);
    for (size_t k = 0; k < check->n_differences; k++) {
        char what[256];
        ck_plan_check_describe(&check->differences[k], what, sizeof what);
        fprintf(stderr, "ckplan: warning: %s: %s\n", a->label, what);
    }
}

/* The two schedules' measured steps, their interleaved timing, and the chart and trace. */
static int measure_both(const run_args *a, const ck_plan_file *plan, const ck_workload *w,
                        ck_exec *exec, const ck_schedule *baseline, ck_run_measure *base,
                        ck_run_measure *planned, double *overhead, ck_err *err)
{
    progress prog = {.show = !a->quiet && isatty(STDERR_FILENO), .start = ck_clock_seconds()};
    int rc = measure(exec, baseline, a->steps, "baseline", &prog, base, err);
    if (rc == CK_OK)
        rc = measure(exec, &plan->schedule, a->steps, "plan", &prog, planned, err);
    if (rc == CK_OK) {
        progress_update(&prog, "timing baseline and plan in turn", 0, TIMING_ROUNDS(a->steps));
        rc = time_interleaved(exec, baseline, &plan->schedule, TIMING_ROUNDS(a->steps), base,
                              planned, overhead, err);
    }
    if (rc == CK_OK)
        rc = ck_interrupt_check(err);
    if (rc == CK_OK && (a->svg_path || a->trace_path))
        rc = draw_run(a, plan, w, exec, baseline, err);
    progress_done(&prog);
    return rc;
}

/* Executes the plan (whose figures are the replayed ones) and its baseline, and records. */
static int execute(const run_args *a, const ck_plan_file *plan, const ck_runner_basis *b,
                   const char *plan_sha, ck_verdict *v, ck_err *err)
{
    const ck_workload *w = b->w;
    ck_exec *exec = NULL;
    ck_schedule baseline = {0};
    ck_run_measure base = {0}, planned = {0};
    double overhead = 0;
    if (a->threads)
        ck_blas_set_threads((int)a->threads);
    ck_exec_opts eo = {.seed = a->seed, .stateful_rng = a->stateful_rng, .stop = ck_interrupt_flag()};
    int rc = ck_exec_create(w->model, &w->chain, w->stage_first, &eo, &exec, err);
    if (rc == CK_ERR_INPUT)
        rc = name_plan(rc, a->label, "", err);
    if (rc == CK_OK)
        rc = ck_schedule_baseline(&w->chain, &baseline, err);
    if (rc == CK_OK)
        rc = measure_both(a, plan, w, exec, &baseline, &base, &planned, &overhead, err);
    if (rc == CK_OK)
        rc = ck_interrupt_check(err); /* the last boundary before the record is written */
    if (rc == CK_OK) {
        *v = ck_verify_run(plan->predicted.activation_peak_bytes, &b->check, &base, &planned, a->steps);
        ck_ran_record r = {
            .plan_path = a->plan_path, .plan_sha = plan_sha, .plan = plan, .check = &b->check,
            .w = w, .steps = a->steps, .threads = (uint64_t)ck_blas_threads(), .seed = a->seed,
            .stateful_rng = a->stateful_rng, .verify_performed = a->verify, .baseline = &base,
            .plan_run = &planned, .measured_overhead = overhead, .verdict = v,
        };
        char *line = ck_record_ran(&r);
        rc = line ? ck_files_append_line(a->runs_path, line, err) : ck_err_oom(err);
        free(line);
    }
    if (rc == CK_OK && !a->quiet)
        print_summary(plan, w, &base, &planned, overhead, v, a->verify);
    measure_free(&base);
    measure_free(&planned);
    ck_schedule_free(&baseline);
    ck_exec_free(exec);
    return rc;
}

int ck_runner_run(const ck_run_settings *s, const ck_plan_file *p, const char *plan_sha,
                  const ck_workload *w, bool *passed, ck_err *errp)
{
    run_args a = *s;
    if (!a.label)
        a.label = a.plan_path;
    ck_err err = {{0}};
    ck_verdict v = {0};
    ck_runner_basis b;
    int rc = ck_runner_prepare(&a, p, w, &b, &err);
    if (rc == CK_OK) {
        ck_plan_file plan = *p;
        plan.predicted = b.check.replayed;
        plan.schedule = b.schedule;
        if (!a.verify)
            warn_differences(&a, &b.check);
        rc = execute(&a, &plan, &b, plan_sha, &v, &err);
    }
    if (rc == CK_OK && a.verify && !v.passed) {
        rc = CK_ERR_RUNTIME;
        ck_verify_reasons(&v, &b.check, err.msg, sizeof err.msg);
    }
    ck_runner_basis_free(&b);
    if (passed)
        *passed = v.passed;
    *errp = err;
    return rc;
}

/* The plan document's fields that do not depend on the layout. */
static ck_plan_doc doc_of(const ck_workload *w, const ck_planner *planner, uint64_t budget,
                          const ck_planner_opts *popts, const ck_workload_opts *wopts,
                          ck_planned *out)
{
    return (ck_plan_doc){
        .planner = planner->name,
        .model_path = w->path,
        .model_sha256 = w->sha256,
        .model_opts = w->model ? &wopts->model : NULL,
        .budget_bytes = budget,
        .static_bytes = w->statics.total,
        .statics = w->model ? &w->statics : NULL,
        .stages = w->chain.n_stages,
        .predicted = out->predicted,
        .baseline = out->baseline,
        .result = &out->result,
        .baseline_fits = out->baseline.peak_bytes <= out->activation_budget &&
                         !planner->whatever_the_budget,
        .granularity = w->model ? ck_workload_granularity_name(wopts->granularity) : NULL,
        .time_unit = w->model ? "s" : NULL,
        .slots = popts->exact ? 0 : popts->slots,
        .costs_path = w->model ? wopts->costs_path : NULL,
        .cost_model = w->model && !wopts->costs_path ? &wopts->cost : NULL,
        .stage_map = {&w->chain, w->model, w->stage_first},
        .device = wopts->device ? wopts->device->name : NULL,
        .warnings = &out->warnings,
    };
}

static int print_doc(ck_planned *out, ck_err *err)
{
    cJSON *json = ck_plan_to_json(&out->doc);
    out->text = json ? ck_json_print(json) : NULL;
    cJSON_Delete(json);
    return out->text ? CK_OK : ck_err_oom(err);
}

/* A pipeline layout: every rank planned, the document of the worst (its first chunk's
 * schedule, its figures over all its chunks and microbatches in flight). */
static int plan_pipeline(const ck_workload *w, const ck_planner *planner, uint64_t budget,
                         const ck_planner_opts *popts, const ck_workload_opts *wopts,
                         ck_planned *out, ck_err *err)
{
    out->pipelined = true;
    int rc = ck_pipeline_split(w, &out->pipeline, err);
    if (rc == CK_OK)
        rc = ck_pipeline_plan(&out->pipeline, planner, budget, popts, err);
    if (rc != CK_OK)
        return rc;
    const ck_pipeline_rank *r = &out->pipeline.ranks[out->pipeline.worst];
    ck_pipeline_chunk *c = &r->chunks[0];
    out->result = c->plan.result;
    ck_planner_result_init(&c->plan.result); /* out->result owns it now */
    out->predicted = c->plan.replay;
    out->predicted.peak_bytes = r->activation;
    out->predicted.time = r->time;
    out->baseline = c->baseline.replay;
    out->baseline.peak_bytes = r->baseline_activation;
    out->baseline.time = r->baseline_time;
    ck_planner_activation_budget(budget, r->statics.total, &out->activation_budget);
    out->doc = doc_of(w, planner, budget, popts, wopts, out);
    out->doc.static_bytes = r->statics.total;
    out->doc.statics = &r->statics;
    out->doc.stages = c->chain.n_stages;
    out->doc.stage_map = (ck_plan_stage_map){&c->chain, w->model, w->stage_first + c->first};
    out->doc.pipeline = &out->pipeline;
    out->doc.baseline_fits = true; /* only when no rank recomputes */
    for (uint64_t i = 0; i < out->pipeline.n_ranks; i++) {
        const ck_pipeline_rank *q = &out->pipeline.ranks[i];
        uint64_t room;
        out->doc.baseline_fits = out->doc.baseline_fits &&
                                 ck_planner_activation_budget(budget, q->statics.total, &room) &&
                                 q->baseline_activation <= room;
    }
    return print_doc(out, err);
}

void ck_runner_basis_free(ck_runner_basis *b)
{
    ck_schedule_free(&b->schedule);
    if (b->have_loaded)
        ck_workload_free(&b->loaded);
    b->have_loaded = false;
}

/* Every-layer checkpointing of w, replayed exactly as the plan's schedule is (a model's
 * compiled program), into out->every; nothing for a model whose layers are unknown. */
static int replay_every(const ck_workload *w, ck_planned *out, ck_err *err)
{
    if (w->chain.layers == CK_CHAIN_LAYERS_UNKNOWN)
        return CK_OK;
    ck_schedule s;
    ck_schedule_replayer exact = ck_workload_replayer(w);
    int rc = ck_layers_every(&w->chain, &s, &out->every.layers, err);
    if (rc == CK_OK)
        rc = ck_schedule_replay_by(&exact, &w->chain, &s, &out->every.replay, err);
    ck_schedule_free(&s);
    out->have_every = rc == CK_OK;
    return rc;
}

int ck_runner_plan(const ck_workload *w, const ck_planner *planner, uint64_t budget,
                   const ck_planner_opts *popts, const ck_workload_opts *wopts, ck_planned *out,
                   ck_err *err)
{
    memset(out, 0, sizeof *out);
    int wrc = ck_warning_training(w, &out->warnings, err);
    if (wrc != CK_OK)
        return wrc;
    ck_err why;
    if (planner->accepts && (wrc = planner->accepts(&w->chain, &why)) != CK_OK)
        return ck_err_fail(err, wrc, "%s: --planner %s: %s", w->path, planner->name, why.msg);
    if (w->model && ck_layout_pipelined(&w->statics.layout))
        return plan_pipeline(w, planner, budget, popts, wopts, out, err);
    /* plans are held to, and report, what the step holds exactly: the model's program */
    ck_schedule_replayer exact = ck_workload_replayer(w);
    if (!ck_planner_activation_budget(budget, w->statics.total, &out->activation_budget)) {
        /* Still find the planner's minimum, so that a sweep can record what would fit. */
        ck_err why;
        ck_replay r;
        out->static_too_large = true;
        int rc = ck_planner_run_by(&w->chain, &exact, planner, 0, popts, &out->result, &r,
                                   &out->min_activation_bytes, &why);
        ck_planner_result_free(&out->result);
        if (rc == CK_ERR_RUNTIME || rc == CK_INTERRUPTED) /* no minimum found: nothing to record */
            return ck_err_fail(err, rc, "%s", why.msg);
        return CK_ERR_INFEASIBLE;
    }
    uint64_t min_budget = 0;
    int rc = ck_planner_run_by(&w->chain, &exact, planner, out->activation_budget, popts,
                               &out->result, &out->predicted, &min_budget, err);
    if (rc == CK_ERR_INFEASIBLE) {
        out->min_activation_bytes = min_budget;
        return rc;
    }
    ck_schedule base = {0};
    if (rc == CK_OK)
        rc = ck_schedule_baseline(&w->chain, &base, err);
    if (rc == CK_OK)
        rc = ck_workload_replay(w, &base, &out->baseline, NULL, NULL, err);
    ck_schedule_free(&base);
    if (rc == CK_OK)
        rc = replay_every(w, out, err);
    if (rc != CK_OK)
        return rc;
    out->doc = doc_of(w, planner, budget, popts, wopts, out);
    out->doc.every_layer = out->have_every ? &out->every : NULL;
    return print_doc(out, err);
}

uint64_t ck_runner_min_budget(const ck_workload *w, const ck_planned *p, uint64_t *static_bytes)
{
    /* ck_pipeline_plan makes the worst rank the one whose smallest total is the largest */
    const ck_pipeline_rank *r = p->pipelined ? &p->pipeline.ranks[p->pipeline.worst] : NULL;
    uint64_t statics = r ? r->statics.total : w->statics.total;
    if (static_bytes)
        *static_bytes = statics;
    return ck_planner_step_budget(statics, r ? r->min_activation : p->min_activation_bytes);
}

void ck_runner_planned_free(ck_planned *p)
{
    ck_planner_result_free(&p->result);
    if (p->pipelined)
        ck_pipeline_free(&p->pipeline);
    free(p->text);
    memset(p, 0, sizeof *p);
}
