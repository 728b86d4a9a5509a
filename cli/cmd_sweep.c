/* ckplan sweep: plan a model at many budgets with several planners, optionally run each
 * plan, and append one record per point to the runs file, for report to compare. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/files.h"
#include "cli/gpus.h"
#include "cli/human.h"
#include "cli/interrupt.h"
#include "cli/options.h"
#include "cli/runner.h"
#include "planner/device.h"
#include "planner/json.h"
#include "planner/plan.h"
#include "planner/planner.h"
#include "planner/sha256.h"
#include "planner/size.h"
#include "planner/workload.h"
#include "sim/record.h"

#define DEFAULT_RUNS_FILE "ckplan.runs.jsonl"
#define DEFAULT_PLANNERS "dp,revolve,chen,sqrt"
#define MAX_POINTS 10000
/* How sweep's plans are named in run records: they are never written to a file. */
#define IN_MEMORY_PLAN "(sweep, in memory)"
#define BUDGETS_FORMS                                                                              \
    "expected a comma-separated list of sizes (e.g. 16M,24M,32M) or FROM:TO:N (e.g. "             \
    "16M:32M:5, N budgets evenly spaced from FROM to TO, both included)"

static void sweep_usage(FILE *out)
{
    char names[128];
    ck_planner_names(names, sizeof names);
    fprintf(out,
            "usage: ckplan sweep MODEL --budgets LIST|FROM:TO:N [options]\n"
            "       ckplan sweep MODEL --gpus N --device NAME [--global-batch G] [--csv] [options]\n"
            "\n"
            "Plans MODEL at every budget with every planner and appends one record per point\n"
            "to the runs file: the predictions, or with --run what was measured and verified.\n"
            "Budgets a planner cannot meet are recorded too, with its smallest budget.\n"
            "A parallel layout (--dp, --zero, --tp, --sp, --cp, --pp, ...) applies to every\n"
            "point: budgets and figures are then per GPU, a pipeline's those of its worst rank\n"
            "(as 'ckplan plan' gives them), and each record keeps the layout.\n"
            "Compare the points with 'ckplan report'.\n"
            "\n"
            "  --budgets B           sizes as for plan --budget: a list (16M,24M,32M) or\n"
            "                        FROM:TO:N, N budgets evenly spaced with both ends\n"
            "                        included (16M:32M:5); without it, --device's budget\n"
            "  --planners LIST       comma-separated planners (default %s), of\n"
            "                        %s (see 'ckplan plan --help')\n"
            "  --run                 run each feasible plan with verification, as run --verify;\n"
            "                        a plan too large to run on this machine (see run --help)\n"
            "                        is recorded as planned, with a warning; not with a\n"
            "                        pipeline layout or --partition-activations, which one\n"
            "                        process cannot run\n"
            "  --steps N             with --run: steps per run (default 3)\n"
            "  --threads N           with --run: threads for matrix products\n"
            "  --seed S              with --run: seed of parameters, inputs and dropout,\n"
            "                        below 2^53 (default 1)\n"
            "  --runs FILE           append the records to FILE (default %s);\n"
            "                        sweeps and runs at once may share one file\n"
            "  --slots N|exact       dp: memory resolution (default %d), or exact: in bytes\n",
            DEFAULT_PLANNERS, names, DEFAULT_RUNS_FILE, CK_DEFAULT_SLOTS);
    fprintf(out,
            "\n"
            "Which layout? With --gpus N, plans MODEL with dp in every parallel layout of exactly\n"
            "N GPUs (tensor parallelism with --sp over each divisor tp of N, Hugging Face configs\n"
            "only; a 1F1B pipeline over each divisor pp of N/tp, microbatches from the global\n"
            "batch; dp = N/(tp pp) with ZeRO 0 to 3) at --device's budget a GPU, and prints them\n"
            "best first: those that fit, fastest predicted step first (ties: fewer bytes\n"
            "communicated), then those that do not, with the smallest budget they need, then\n"
            "those the model refuses, with the reason. Figures are per GPU (a pipeline's worst\n"
            "rank's) and are what 'ckplan plan' predicts for that layout; the step time is a\n"
            "microbatch's times the microbatches a rank runs (a pipeline: microbatches + pp - 1,\n"
            "its bubble), communication not included (it is given in bytes, data-, tensor- and\n"
            "pipeline-parallel: see docs/parallel.md). Nothing is appended to a runs file; the\n"
            "exit code is 0 whether any layout fits or none does.\n"
            "  --gpus N              the GPUs, 1 to %d; needs --device, and takes none of\n"
            "                        --budgets, --planners, --run, --steps, --threads, --seed,\n"
            "                        --runs, --dp, --zero, --fsdp, --tp, --sp, --cp, --pp,\n"
            "                        --microbatches, --virtual-stages,\n"
            "                        --partition-activations\n"
            "  --global-batch G      sequences a step, the same for every layout (default N x\n"
            "                        --batch): each data-parallel rank runs G / (dp x --batch)\n"
            "                        microbatches (gradient accumulation; a pipeline's flow\n"
            "                        through it); needs --batch; layouts it does not divide are\n"
            "                        listed after those that do not fit\n"
            "  --csv                 one CSV row per layout (bytes, seconds) instead of the table\n",
            CK_LAYOUT_MAX_DP);
    ck_options_workload_help(out);
    fprintf(out, "  -h, --help            show this help\n"
                 "\n"
                 "Exit codes: 0 every point processed (infeasible ones and ones too large to run\n"
                 "included), 1 a run failed or its verification did, 2 usage or input error,\n"
                 "130, 143, 129 stopped by SIGINT (Ctrl-C), SIGTERM, SIGHUP (the points done so\n"
                 "far are in the runs file).\n");
}

enum {
    OPT_BUDGETS = 4000,
    OPT_PLANNERS,
    OPT_RUN,
    OPT_STEPS,
    OPT_THREADS,
    OPT_SEED,
    OPT_RUNS,
    OPT_GPUS,
    OPT_GLOBAL_BATCH,
    OPT_CSV
};

typedef struct {
    const char *model_path, *runs_path;
    uint64_t *budgets;
    size_t n_budgets;
    const ck_planner *planners[16];
    size_t n_planners;
    bool run;
    uint64_t steps, threads, seed;
    ck_planner_opts planner_opts;
    ck_workload_opts workload_opts;
    /* --gpus mode: the GPUs (0: not asked for), --global-batch, --csv, and the first option
     * given that it takes no part of (for the refusal) */
    uint64_t gpus, global_batch;
    bool csv;
    const char *not_with_gpus;
} sweep_args;

/* FROM:TO:N or a comma-separated list, into a->budgets. */
static int parse_budgets(const char *text, sweep_args *a, ck_err *err)
{
    const char *colon = strchr(text, ':');
    char buf[256];
    if (strlen(text) >= sizeof buf)
        return ck_err_fail(err, CK_ERR_INPUT, "--budgets: too long; " BUDGETS_FORMS);
    strcpy(buf, text);
    ck_err why;
    if (colon) {
        char *from = buf, *to = strchr(buf, ':') + 1, *count = strchr(to, ':');
        if (!count || strchr(count + 1, ':'))
            return ck_err_fail(err, CK_ERR_INPUT, "--budgets: '%s': " BUDGETS_FORMS, text);
        to[-1] = '\0';
        *count++ = '\0';
        uint64_t lo, hi, n;
        if (ck_size_parse(from, &lo, &why) != CK_OK || ck_size_parse(to, &hi, &why) != CK_OK)
            return ck_err_fail(err, CK_ERR_INPUT, "--budgets: '%s': %s; " BUDGETS_FORMS, text, why.msg);
        if (ck_options_parse_count(count, "N", 1, MAX_POINTS, &n, &why) != CK_OK)
            return ck_err_fail(err, CK_ERR_INPUT, "--budgets: '%s': %s; " BUDGETS_FORMS, text, why.msg);
        if (hi < lo || (n == 1 && hi != lo))
            return ck_err_fail(err, CK_ERR_INPUT, "--budgets: '%s': TO must be at least FROM, and N at "
                                              "least 2 unless they are equal; " BUDGETS_FORMS, text);
        a->budgets = calloc(n, sizeof *a->budgets);
        if (!a->budgets)
            return ck_err_oom(err);
        /* lo + (hi - lo) * i / (n - 1) without overflowing: quotient and remainder apart */
        uint64_t span = hi - lo, q = n > 1 ? span / (n - 1) : 0, r = n > 1 ? span % (n - 1) : 0;
        for (uint64_t i = 0; i < n; i++)
            a->budgets[i] = lo + q * i + (n > 1 ? r * i / (n - 1) : 0);
        a->n_budgets = n;
        return CK_OK;
    }
    size_t n = 1;
    for (const char *p = buf; *p; p++)
        n += *p == ',';
    a->budgets = calloc(n, sizeof *a->budgets);
    if (!a->budgets)
        return ck_err_oom(err);
    char *item = buf;
    for (size_t i = 0; i < n; i++) {
        char *comma = strchr(item, ',');
        if (comma)
            *comma = '\0';
        if (ck_size_parse(item, &a->budgets[i], &why) != CK_OK)
            return ck_err_fail(err, CK_ERR_INPUT, "--budgets: '%s': %s; " BUDGETS_FORMS, text, why.msg);
        item = comma ? comma + 1 : item;
    }
    a->n_budgets = n;
    return CK_OK;
}

static int parse_planners(const char *text, sweep_args *a, ck_err *err)
{
    char buf[256];
    if (strlen(text) >= sizeof buf)
        return ck_err_fail(err, CK_ERR_INPUT, "--planners: too long");
    strcpy(buf, text);
    a->n_planners = 0;
    for (char *item = buf; item;) {
        char *comma = strchr(item, ',');
        if (comma)
            *comma = '\0';
        const ck_planner *p = ck_planner_find(item);
        char names[128];
        ck_planner_names(names, sizeof names);
        if (!p)
            return ck_err_fail(err, CK_ERR_INPUT, "--planners: no planner '%s' (%s, "
                                              "comma-separated)", item, names);
        if (a->n_planners == sizeof a->planners / sizeof a->planners[0])
            return ck_err_fail(err, CK_ERR_INPUT, "--planners: more than %zu planners",
                           sizeof a->planners / sizeof a->planners[0]);
        a->planners[a->n_planners++] = p;
        item = comma ? comma + 1 : NULL;
    }
    return CK_OK;
}

/* Without --budgets, the one budget of --device: its memory less its reserve. */
static int device_budget(sweep_args *a, ck_err *err)
{
    if (!(a->budgets = calloc(1, sizeof *a->budgets)))
        return ck_err_oom(err);
    a->budgets[0] = ck_device_budget(a->workload_opts.device);
    a->n_budgets = 1;
    return CK_OK;
}

/* Remembers the first option given that --gpus takes no part of: the budgets and planners
 * are its own, it runs nothing, records nothing, and sets the layout itself, all of it: data,
 * tensor, sequence, context and pipeline parallelism. */
static void note_not_with_gpus(int code, const struct option *longs, sweep_args *a)
{
    bool other = code == OPT_BUDGETS || code == OPT_PLANNERS || code == OPT_RUN || code == OPT_STEPS ||
                 code == OPT_THREADS || code == OPT_SEED || code == OPT_RUNS || code == CK_OPT_DP ||
                 code == CK_OPT_ZERO || code == CK_OPT_FSDP || code == CK_OPT_TP || code == CK_OPT_SP ||
                 code == CK_OPT_CP || code == CK_OPT_PARTITION || code == CK_OPT_PP || code == CK_OPT_MICROBATCHES ||
                 code == CK_OPT_VIRTUAL_STAGES;
    for (const struct option *o = longs; other && !a->not_with_gpus && o->name; o++)
        if (o->val == code)
            a->not_with_gpus = o->name;
}

/* --gpus, --global-batch and --csv go together, with --device, and with none of the
 * options that note_not_with_gpus remembers. */
static int check_gpus_args(const sweep_args *a, ck_err *err)
{
    if (!a->gpus)
        return ck_err_fail(err, CK_ERR_INPUT, "sweep: %s is for --gpus N (see --help)",
                           a->csv ? "--csv" : "--global-batch");
    if (a->not_with_gpus)
        return ck_err_fail(err, CK_ERR_INPUT, "sweep: --gpus plans every layout of %llu GPUs with dp "
                                              "at --device's budget, recording nothing: it takes no "
                                              "--%s", (unsigned long long)a->gpus, a->not_with_gpus);
    if (!a->workload_opts.device)
        return ck_err_fail(err, CK_ERR_INPUT, "sweep: --gpus needs --device NAME, whose memory is the "
                                              "budget of each GPU and whose rates time the step (%s)",
                           ck_device_names());
    return CK_OK;
}

/* Returns CK_HELP_PRINTED when help was printed, else a status. */
static int parse_args(int argc, char **argv, sweep_args *a, ck_err *err)
{
    static const struct option longs[] = {
        CK_WORKLOAD_LONG_OPTIONS,
        {"budgets", required_argument, NULL, OPT_BUDGETS},
        {"planners", required_argument, NULL, OPT_PLANNERS},
        {"run", no_argument, NULL, OPT_RUN},
        {"steps", required_argument, NULL, OPT_STEPS},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"seed", required_argument, NULL, OPT_SEED},
        {"runs", required_argument, NULL, OPT_RUNS},
        {"slots", required_argument, NULL, CK_OPT_SLOTS},
        {"gpus", required_argument, NULL, OPT_GPUS},
        {"global-batch", required_argument, NULL, OPT_GLOBAL_BATCH},
        {"csv", no_argument, NULL, OPT_CSV},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    a->runs_path = DEFAULT_RUNS_FILE;
    a->steps = 3;
    a->seed = 1;
    a->planner_opts.slots = CK_DEFAULT_SLOTS;
    a->planner_opts.stop = ck_interrupt_flag();
    ck_workload_opts_default(&a->workload_opts);
    a->workload_opts.pipelines = true;
    int rc = parse_planners(DEFAULT_PLANNERS, a, err);
    opterr = 0;
    optind = 1;
    int code;
    while (rc == CK_OK && (code = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
        note_not_with_gpus(code, longs, a);
        switch (code) {
        case 'h': sweep_usage(stdout); return CK_HELP_PRINTED;
        case OPT_BUDGETS:
            free(a->budgets);
            a->budgets = NULL;
            rc = parse_budgets(optarg, a, err);
            break;
        case OPT_PLANNERS: rc = parse_planners(optarg, a, err); break;
        case OPT_RUN: a->run = true; break;
        case OPT_STEPS: rc = ck_options_parse_count(optarg, "--steps", 1, 1000, &a->steps, err); break;
        case OPT_THREADS: rc = ck_options_parse_count(optarg, "--threads", 1, 1024, &a->threads, err); break;
        case OPT_SEED: rc = ck_options_parse_count(optarg, "--seed", 0, CK_EXACT_LIMIT - 1, &a->seed, err); break;
        case OPT_RUNS: a->runs_path = optarg; break;
        case CK_OPT_SLOTS:
            rc = ck_options_parse_slots(optarg, &a->planner_opts, err);
            break;
        case OPT_GPUS: rc = ck_options_parse_count(optarg, "--gpus", 1, CK_LAYOUT_MAX_DP, &a->gpus, err); break;
        case OPT_GLOBAL_BATCH:
            rc = ck_options_parse_count(optarg, "--global-batch", 1, CK_EXACT_LIMIT - 1, &a->global_batch, err);
            break;
        case OPT_CSV: a->csv = true; break;
        default:
            rc = ck_options_is_workload(code) ? ck_options_workload(code, optarg, &a->workload_opts, err)
                                             : ck_options_error("sweep", argv, longs, code, err);
        }
    }
    if (rc != CK_OK)
        return rc;
    if (optind != argc - 1)
        return ck_err_fail(err, CK_ERR_INPUT, optind >= argc ? "sweep: no MODEL given; usage: ckplan sweep "
                                                           "MODEL --budgets LIST|FROM:TO:N (see --help)"
                                                         : "sweep: more than one MODEL given (%s)",
                       optind < argc ? argv[optind + 1] : "");
    a->model_path = argv[optind];
    if (a->gpus || a->global_batch || a->csv)
        return check_gpus_args(a, err);
    const ck_layout *l = &a->workload_opts.model.layout;
    if (a->run && (ck_layout_pipelined(l) || l->partition))
        return ck_err_fail(err, CK_ERR_INPUT, "sweep: --run runs each plan in one process, as 'ckplan "
                           "run' does, and %s: sweep it without --run to record its plans",
                           l->partition ? "partitioned checkpoints (--partition-activations) "
                                          "are gathered from the other tensor-parallel ranks"
                                        : "a pipeline layout (--pp, --microbatches, "
                                          "--virtual-stages) is several processes exchanging "
                                          "activations");
    if (!a->budgets && a->workload_opts.device)
        return device_budget(a, err);
    if (!a->budgets)
        return ck_err_fail(err, CK_ERR_INPUT, "sweep: --budgets is required (or --device NAME); " BUDGETS_FORMS);
    return CK_OK;
}

/* "[#####     ] 12/40 dp 8.0 GiB", redrawn in place. */
static void progress(bool show, size_t done, size_t total, const char *planner, uint64_t budget)
{
    if (!show)
        return;
    enum { WIDTH = 20 };
    char bar[WIDTH + 1], size[32];
    size_t filled = total ? done * WIDTH / total : WIDTH;
    for (size_t i = 0; i < WIDTH; i++)
        bar[i] = i < filled ? '#' : ' ';
    bar[WIDTH] = '\0';
    ck_size_format(budget, size, sizeof size);
    fprintf(stderr, "\r[%s] %zu/%zu %s %s      ", bar, done, total, planner, size);
    fflush(stderr);
}

typedef struct {
    size_t planned, ran, infeasible, too_large, failed;
} tally;

/* Names one point in messages: "sweep of models/m.json, dp at 8.0 GiB". */
static void point_label(const sweep_args *a, const ck_planner *planner, uint64_t budget,
                        char *buf, size_t len)
{
    char size[32];
    ck_size_format(budget, size, sizeof size);
    snprintf(buf, len, "sweep of %s, %s at %s", a->model_path, planner->name, size);
}

/* "ckplan: [KIND]POINT: [WHAT]MSG" about one point, on a line of its own below the
 * progress bar when there is one. The point names the model file and the message may quote
 * the input: both are shown escaped, as every message is. */
static void point_message(const char *kind, const char *point, const char *what, const char *msg)
{
    char line[2 * sizeof ((ck_err *)0)->msg];
    snprintf(line, sizeof line, "%s%s: %s%s", kind, point, what, msg);
    fprintf(stderr, "%sckplan: ", isatty(STDERR_FILENO) ? "\n" : "");
    ck_human_put_terminal_text(stderr, line);
    fputc('\n', stderr);
}

/* Runs a planned point with verification, on the sweep's own workload: a point that fails
 * is recorded (when it got as far as verification) and counted, and the sweep goes on. */
static int run_point(const sweep_args *a, const ck_workload *w, const ck_plan_file *plan,
                     const char *sha, const char *point, tally *t, ck_err *err)
{
    ck_run_settings s = {.plan_path = IN_MEMORY_PLAN, .label = point, .runs_path = a->runs_path,
                         .verify = true, .quiet = true, .steps = a->steps,
                         .threads = a->threads, .seed = a->seed};
    bool passed = false;
    int rc = ck_runner_run(&s, plan, sha, w, &passed, err);
    if (rc == CK_ERR_RUNTIME) {
        point_message("", point, "", err->msg);
        t->failed++;
        rc = CK_OK;
    } else if (rc == CK_OK) {
        t->ran++;
    }
    return rc;
}

/* One point: plan, then record it as infeasible, planned, or (with --run) ran. */
static int sweep_point(const sweep_args *a, const ck_workload *w, const ck_planner *planner,
                       uint64_t budget, const ck_run_memory *mem, tally *t, ck_err *err)
{
    ck_planned planned;
    char *line = NULL, point[512];
    point_label(a, planner, budget, point, sizeof point);
    int rc = ck_runner_plan(w, planner, budget, &a->planner_opts, &a->workload_opts, &planned, err);
    const char *gran = w->model ? ck_workload_granularity_name(a->workload_opts.granularity) : NULL;
    if (rc == CK_ERR_INFEASIBLE) {
        uint64_t min_budget = ck_runner_min_budget(w, &planned, NULL);
        line = ck_record_infeasible(planner->name, budget, min_budget, w, gran, &a->workload_opts.model);
        rc = line ? ck_files_append_line(a->runs_path, line, err) : ck_err_oom(err);
        t->infeasible += rc == CK_OK;
        free(line);
        ck_runner_planned_free(&planned);
        return rc;
    }
    /* The plan goes through its JSON text, as a plan file would: run and the planned record
     * then see exactly what `ckplan plan` would have written. */
    cJSON *root = NULL;
    ck_plan_file plan;
    bool have_plan = false;
    char sha[65];
    if (rc == CK_OK) {
        size_t len = strlen(planned.text);
        ck_sha256_hex(planned.text, len, sha);
        rc = ck_json_parse(point, planned.text, len, &root, err);
    }
    if (rc == CK_OK)
        have_plan = (rc = ck_plan_from_json(root, point, &plan, err)) == CK_OK;
    cJSON_Delete(root);
    bool run = a->run;
    if (rc == CK_OK && run) {
        /* A point this machine cannot hold is still a result worth keeping: its prediction. */
        ck_err why;
        if (ck_runner_fits_here(mem, &plan.predicted, 0, &why) != CK_OK) {
            point_message("warning: ", point, "not run, recorded as planned: ", why.msg);
            t->too_large++;
            run = false;
        }
    }
    if (rc == CK_OK && !run) {
        line = ck_record_planned(&plan, sha, w);
        rc = line ? ck_files_append_line(a->runs_path, line, err) : ck_err_oom(err);
        t->planned += rc == CK_OK;
    } else if (rc == CK_OK) {
        rc = run_point(a, w, &plan, sha, point, t, err);
    }
    free(line);
    if (have_plan)
        ck_plan_file_free(&plan);
    ck_runner_planned_free(&planned);
    return rc;
}

int ck_cmd_sweep(int argc, char **argv)
{
    sweep_args a;
    memset(&a, 0, sizeof a);
    ck_err err = {{0}};
    int rc = parse_args(argc, argv, &a, &err);
    if (rc == CK_HELP_PRINTED) {
        free(a.budgets);
        return 0;
    }
    if (rc == CK_OK && a.gpus) {
        ck_gpus_settings g = {a.model_path, a.gpus, a.global_batch, a.csv, &a.planner_opts,
                              &a.workload_opts};
        return ck_main_report(ck_gpus_sweep(&g, &err), err.msg);
    }
    const ck_named_file in[] = {{a.model_path, "MODEL"}, {a.workload_opts.costs_path, "--costs"}};
    const ck_named_file out[] = {{a.runs_path, "--runs"}};
    if (rc == CK_OK)
        rc = CK_CHECK_OUTPUTS_APART("sweep", in, out, &err);
    ck_workload w;
    bool have_w = false;
    ck_run_memory mem = {0};
    if (rc == CK_OK && a.run)
        rc = ck_runner_memory(&mem, &err); /* a bad CKPLAN_RUN_MEMORY stops it before any point */
    if (rc == CK_OK)
        have_w = (rc = ck_workload_load(a.model_path, &a.workload_opts, &w, &err)) == CK_OK;
    size_t total = a.n_budgets * a.n_planners, done = 0;
    bool show = isatty(STDERR_FILENO);
    tally t = {0};
    for (size_t p = 0; rc == CK_OK && p < a.n_planners; p++)
        for (size_t b = 0; rc == CK_OK && b < a.n_budgets; b++) {
            progress(show, done, total, a.planners[p]->name, a.budgets[b]);
            rc = ck_interrupt_check(&err); /* the points done so far stay in the runs file */
            if (rc == CK_OK)
                rc = sweep_point(&a, &w, a.planners[p], a.budgets[b], &mem, &t, &err);
            done++;
        }
    if (show && total)
        fprintf(stderr, "\r%70s\r", "");
    if (rc == CK_OK) {
        char too_large[64] = "";
        if (t.too_large)
            snprintf(too_large, sizeof too_large, " (%zu of them too large to run here)",
                     t.too_large);
        printf("sweep: %zu points: %zu ran, %zu planned only%s, %zu infeasible%s%s; records "
               "appended to %s (see 'ckplan report --runs %s')\n",
               total, t.ran, t.planned, too_large, t.infeasible, t.failed ? ", FAILED: " : "",
               t.failed ? "some runs (see above)" : "", a.runs_path, a.runs_path);
    }
    if (rc == CK_OK && t.failed)
        rc = ck_err_fail(&err, CK_ERR_RUNTIME, "sweep: %zu of %zu runs failed", t.failed, total);
    if (have_w)
        ck_workload_free(&w);
    free(a.budgets);
    return ck_main_report(rc, err.msg);
}
