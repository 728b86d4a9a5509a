/* ckplan run: execute a plan for real, next to the store-everything baseline, measure both,
 * and with --verify check the plan against the baseline and against its own prediction. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/files.h"
#include "cli/graphplan.h"
#include "cli/options.h"
#include "cli/ranks.h"
#include "cli/runner.h"
#include "planner/size.h"
#include "planner/plan.h"

#define DEFAULT_PLAN_FILE "ckplan.plan.json"
#define DEFAULT_RUNS_FILE "ckplan.runs.jsonl"

static void run_usage(FILE *out)
{
    fprintf(out,
            "usage: ckplan run [PLAN] [options]\n"
            "\n"
            "Executes training steps of the plan's model on CPU kernels (OpenBLAS), once with\n"
            "the store-everything baseline and once with the plan's schedule, and reports the\n"
            "predicted against the measured memory and time. PLAN defaults to %s.\n"
            "A chain file's stages run as synthetic work of the declared sizes and times.\n"
            "A graph plan (of a Checkmate graph) is replayed, not executed: run loads the\n"
            "graph, checks its sha256, replays the schedule under the graph rules and checks\n"
            "the plan file's figures against the replay (exit 1 if they differ); the other\n"
            "options do not apply to it.\n"
            "\n"
            "  --verify          check that the plan's loss and every gradient equal the\n"
            "                    baseline's bit for bit, that its tracked activation peak\n"
            "                    is its prediction to the byte, and that the plan\n"
            "                    file's budget and predictions are those of its replayed\n"
            "                    schedule; exit 1 if not\n"
            "  --steps N         steps per run, after one warm-up step, for memory and\n"
            "                    gradients (default 3); then 2N+1 rounds time one baseline\n"
            "                    step and one plan step in turn\n"
            "  --threads N       threads for matrix products (default: OpenBLAS's choice)\n"
            "  --seed S          seed of parameters, inputs and dropout, below 2^53 (recorded\n"
            "                    exactly; default 1)\n"
            "  --runs FILE       append the run's record to FILE (default %s)\n"
            "  --rng stateful    draw dropout from one sequential generator that recomputation\n"
            "                    does not rewind: the bug --verify exists to catch\n"
            "  --svg FILE        draw the memory timeline, predicted and measured, of the plan\n"
            "                    and the baseline as a standalone SVG chart\n"
            "  --trace FILE      write one step of each as Chrome trace-event JSON (for\n"
            "                    Perfetto or chrome://tracing): operations and live bytes\n"
            "  --ranks N         run a data-parallel plan (planned with --dp N, any --zero)\n"
            "                    on N processes under OpenMPI's mpirun, each rank its own\n"
            "                    microbatch holding what its ZeRO stage keeps; with --verify\n"
            "                    every rank's tracked peak must be its predicted peak to the\n"
            "                    byte and the parameters those of the one-process run of the\n"
            "                    N microbatches, bit for bit (docs/parallel.md). Writes no\n"
            "                    record, chart or trace; no baseline run\n"
            "  --quiet           print nothing but errors and warnings\n"
            "  -h, --help        show this help\n"
            "\n"
            "Every predicted figure comes from replaying the plan's schedule (for a model,\n"
            "compiled to the executor's instructions), not from the plan file; without --verify a plan file that differs from\n"
            "the replay is run on the replayed figures, with a warning. A relative model\n"
            "path is relative to the plan file's directory (else the current one).\n"
            "\n"
            "A run needs the static memory plus the larger activation peak of the baseline\n"
            "and the plan; --ranks N needs N times a rank's static memory plus the plan's\n"
            "activation peak, the ranks sharing this machine. It is refused when that exceeds\n"
            "MemAvailable, or the size in CKPLAN_RUN_MEMORY when set (a positive size:\n"
            "CKPLAN_RUN_MEMORY=64G with swap).\n"
            "\n"
            "Exit codes: 0 ran (and verified), 1 a check failed or execution failed, 2 usage\n"
            "or input error (including a model changed since planning, or too large here),\n"
            "130, 143, 129 stopped by SIGINT (Ctrl-C), SIGTERM, SIGHUP (between operations:\n"
            "no record is written).\n",
            DEFAULT_PLAN_FILE, DEFAULT_RUNS_FILE);
}

enum { OPT_VERIFY = 2000, OPT_STEPS, OPT_THREADS, OPT_SEED, OPT_RUNS, OPT_QUIET, OPT_RNG, OPT_SVG, OPT_TRACE,
       OPT_RANKS };

typedef struct {
    ck_run_settings s;
    uint64_t ranks; /* 0: one process */
    bool runs_given;
} run_args;

/* Returns CK_HELP_PRINTED when help was printed, else a status. */
static int parse_args(int argc, char **argv, run_args *a, ck_err *err)
{
    static const struct option longs[] = {
        {"verify", no_argument, NULL, OPT_VERIFY},   {"steps", required_argument, NULL, OPT_STEPS},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"seed", required_argument, NULL, OPT_SEED}, {"runs", required_argument, NULL, OPT_RUNS},
        {"quiet", no_argument, NULL, OPT_QUIET},     {"rng", required_argument, NULL, OPT_RNG},
        {"svg", required_argument, NULL, OPT_SVG},   {"trace", required_argument, NULL, OPT_TRACE},
        {"ranks", required_argument, NULL, OPT_RANKS},
        {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0},
    };
    *a = (run_args){.s = {.plan_path = DEFAULT_PLAN_FILE, .runs_path = DEFAULT_RUNS_FILE, .steps = 3, .seed = 1}};
    ck_run_settings *s = &a->s;
    opterr = 0;
    optind = 1;
    int code, rc = CK_OK;
    while (rc == CK_OK && (code = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
        switch (code) {
        case 'h':
            run_usage(stdout);
            return CK_HELP_PRINTED;
        case OPT_VERIFY: s->verify = true; break;
        case OPT_QUIET: s->quiet = true; break;
        case OPT_RUNS: s->runs_path = optarg; a->runs_given = true; break;
        case OPT_SVG: s->svg_path = optarg; break;
        case OPT_TRACE: s->trace_path = optarg; break;
        case OPT_STEPS: rc = ck_options_parse_count(optarg, "--steps", 1, 1000, &s->steps, err); break;
        case OPT_THREADS: rc = ck_options_parse_count(optarg, "--threads", 1, 1024, &s->threads, err); break;
        case OPT_SEED: rc = ck_options_parse_count(optarg, "--seed", 0, CK_EXACT_LIMIT - 1, &s->seed, err); break;
        case OPT_RANKS: rc = ck_options_parse_count(optarg, "--ranks", 1, CK_LAYOUT_MAX_DP, &a->ranks, err); break;
        case OPT_RNG:
            if (strcmp(optarg, "stateful") == 0)
                s->stateful_rng = true;
            else if (strcmp(optarg, "counter") != 0)
                rc = ck_err_fail(err, CK_ERR_INPUT, "--rng: expected 'counter' or 'stateful', got '%s'", optarg);
            break;
        default:
            rc = ck_options_error("run", argv, longs, code, err);
        }
    }
    if (rc == CK_OK && argc - optind > 1)
        rc = ck_err_fail(err, CK_ERR_INPUT, "run: more than one PLAN given (%s)", argv[optind + 1]);
    if (rc == CK_OK && optind < argc)
        s->plan_path = argv[optind];
    if (rc == CK_OK && a->ranks && (a->runs_given || s->svg_path || s->trace_path || s->stateful_rng))
        rc = ck_err_fail(err, CK_ERR_INPUT, "run: --ranks writes no run record, chart or trace and "
                         "draws dropout by counter: --runs, --svg, --trace and --rng do not apply");
    return rc;
}

/* A plan for one rank of a layout that shards static memory needs the other ranks, which
 * one process does not have. */
static int refuse_sharded(const char *path, const ck_layout *l, ck_err *err)
{
    if (!ck_layout_shards(l))
        return CK_OK;
    return ck_err_fail(err, CK_ERR_INPUT, "%s: model.options: the plan is one rank's of --dp %llu "
                       "--zero %u, which shards static memory over %llu ranks; one process cannot "
                       "shard, gather or reduce-scatter: run it with --ranks %llu (all ranks "
                       "over MPI), or plan with --dp 1 or --zero 0 to run one rank's step",
                       path, (unsigned long long)l->dp, l->zero, (unsigned long long)l->dp,
                       (unsigned long long)l->dp);
}

/* run --ranks N: a model's plan made for --dp N, run on N processes (cli/ranks). */
static int run_ranks(const run_args *a, const ck_plan_file *plan, ck_err *err)
{
    const ck_layout *l = &plan->model_opts.layout;
    const char *path = a->s.plan_path;
    if (!plan->granularity)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: a chain file's plan has no parameters to run "
                           "data-parallel: --ranks runs the plan of a model", path);
    if (ck_layout_ranks(l) != a->ranks)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: --ranks %llu: the plan is one rank's of --dp %llu "
                           "(model.options.dp); run it with --ranks %llu, or plan again with --dp "
                           "%llu", path, (unsigned long long)a->ranks,
                           (unsigned long long)ck_layout_ranks(l), (unsigned long long)ck_layout_ranks(l),
                           (unsigned long long)a->ranks);
    ck_ranks_run r = {.plan_path = path, .ranks = a->ranks, .steps = a->s.steps, .seed = a->s.seed,
                      .threads = a->s.threads, .verify = a->s.verify, .quiet = a->s.quiet};
    return ck_ranks_launch(&r, err);
}

/* Layouts whose ranks exchange activations: a pipeline rank's plan is one chunk of the
 * model, fed by the ranks before it, and a tensor- or context-parallel rank's layers gather,
 * scatter and reduce with the others. Neither one process nor --ranks (data parallelism
 * only) can run them. */
static int refuse_exchanging(const char *path, const ck_layout *l, ck_err *err)
{
    if (ck_layout_pipelined(l))
        return ck_err_fail(err, CK_ERR_INPUT, "%s: model.options: the plan is the worst rank's of "
                           "--pp %llu --microbatches %llu --virtual-stages %llu, a pipeline whose "
                           "ranks each run part of the model on microbatches the others send; "
                           "'ckplan run' cannot run a pipeline: plan again without --pp to run "
                           "one rank's step", path, (unsigned long long)ck_layout_pp(l),
                           (unsigned long long)ck_layout_microbatches(l),
                           (unsigned long long)ck_layout_virtual(l));
    if (ck_layout_splits_model(l))
        return ck_err_fail(err, CK_ERR_INPUT, "%s: model.options: the plan is one rank's of --tp "
                           "%llu%s --cp %llu, whose layers exchange activations with the other "
                           "ranks; 'ckplan run' cannot run tensor- or context-parallel layers: "
                           "plan again without --tp and --cp to run a step", path,
                           (unsigned long long)ck_layout_tp(l), l->sp ? " --sp" : "",
                           (unsigned long long)ck_layout_cp(l));
    return CK_OK;
}

int ck_cmd_run(int argc, char **argv)
{
    run_args a;
    ck_err err = {{0}};
    int rc = parse_args(argc, argv, &a, &err);
    const ck_named_file in[] = {{a.s.plan_path, "PLAN"}};
    if (rc == CK_OK)
        rc = ck_runner_outputs_apart(&a.s, in, 1, &err);
    if (rc != CK_OK)
        return ck_main_report(rc, err.msg);

    bool graph = false;
    rc = ck_graphplan_is_graph_plan(a.s.plan_path, &graph, &err);
    if (rc == CK_OK && graph && a.ranks)
        rc = ck_err_fail(&err, CK_ERR_INPUT, "%s: a graph plan is replayed, not executed: --ranks "
                         "runs the plan of a model", a.s.plan_path);
    if (rc != CK_OK)
        return ck_main_report(rc, err.msg);
    if (graph)
        return ck_graphplan_run(a.s.plan_path, a.s.quiet);
    ck_plan_file plan;
    char plan_sha[65];
    rc = ck_runner_read_plan(a.s.plan_path, &plan, plan_sha, &err);
    if (rc != CK_OK)
        return ck_main_report(rc, err.msg);

    const ck_layout *layout = &plan.model_opts.layout;
    rc = refuse_exchanging(a.s.plan_path, layout, &err);
    if (rc == CK_OK && a.ranks)
        rc = run_ranks(&a, &plan, &err);
    else if (rc == CK_OK && (rc = refuse_sharded(a.s.plan_path, layout, &err)) == CK_OK)
        rc = ck_runner_run(&a.s, &plan, plan_sha, NULL, NULL, &err);
    ck_plan_file_free(&plan);
    return ck_main_report(rc, err.msg);
}
