/* ckplan profile: measure each stage's forward and backward time on this machine with the
 * executor, and write them as a costs file for `ckplan plan --costs`. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/files.h"
#include "cli/interrupt.h"
#include "cli/options.h"
#include "planner/costs.h"
#include "planner/json.h"
#include "planner/segments.h"
#include "planner/size.h"
#include "planner/workload.h"
#include "sim/blas.h"
#include "sim/exec.h"
#include "sim/clock.h"

#define DEFAULT_COSTS_FILE "ckplan.costs.json"

static void profile_usage(FILE *out)
{
    fprintf(out, "usage: ckplan profile MODEL [options]\n"
                 "\n"
                 "Runs training steps of MODEL with the executor, every stage checkpointed, and\n"
                 "measures the median time of each stage's forward that keeps nothing (F_ck), its\n"
                 "forward that keeps what backward needs (F_all), its backward (B), and the loss.\n"
                 "Writes them as a costs file: 'ckplan plan MODEL --costs FILE' then plans with\n"
                 "these times instead of the roofline cost model (see docs/run-format.md).\n"
                 "\n"
                 "  --granularity G   op or block (default block); plan with the same\n"
                 "  --steps N         measured steps, after one warm-up step (default 5)\n"
                 "  --threads N       threads for matrix products (default: OpenBLAS's choice)\n"
                 "  --seed S          seed of parameters and inputs (default 1)\n"
                 "  -o, --output FILE where to write the costs (default %s)\n"
                 "  -h, --help        show this help\n",
            DEFAULT_COSTS_FILE);
}

enum { OPT_STEPS = 3000, OPT_THREADS, OPT_SEED };

/* Runs `steps` measured steps of s and sets op_median[k] to the median time of op k and
 * *outside_ops to the median time of a step spent outside its operations (optimizer,
 * inputs); *peak receives the largest tracked activation peak of a step. */
static int time_ops(ck_exec *e, const ck_schedule *s, uint64_t steps, double *op_median,
                    double *outside_ops, uint64_t *peak, ck_err *err)
{
    double *samples = calloc(s->n * steps, sizeof *samples);
    double *column = calloc(steps, sizeof *column), *outside = calloc(steps, sizeof *outside);
    if (!samples || !column || !outside) {
        free(samples);
        free(column);
        free(outside);
        return ck_err_oom(err);
    }
    int rc = CK_OK;
    *peak = 0;
    for (uint64_t k = 0; k <= steps; k++) {
        ck_step_stats st;
        /* step 0 warms up; its times are written into row 0 and overwritten by step 1 */
        double *row = samples + (k ? k - 1 : 0) * s->n;
        rc = ck_exec_step(e, s, k, &st, &(ck_exec_trace){.seconds = row}, err);
        if (rc != CK_OK) /* interrupted, say: st holds nothing */
            break;
        if (st.activation_peak_bytes > *peak)
            *peak = st.activation_peak_bytes;
        outside[k ? k - 1 : 0] = st.seconds;
        for (size_t op = 0; op < s->n; op++)
            outside[k ? k - 1 : 0] -= row[op];
    }
    *outside_ops = fmax(0, ck_clock_median(outside, steps));
    free(outside);
    for (size_t op = 0; rc == CK_OK && op < s->n; op++) {
        for (uint64_t k = 0; k < steps; k++)
            column[k] = samples[k * s->n + op];
        op_median[op] = ck_clock_median(column, steps);
    }
    free(samples);
    free(column);
    return rc;
}

int ck_cmd_profile(int argc, char **argv)
{
    static const struct option longs[] = {
        {"granularity", required_argument, NULL, CK_OPT_GRANULARITY},
        {"steps", required_argument, NULL, OPT_STEPS},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"seed", required_argument, NULL, OPT_SEED},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ck_workload_opts opts;
    ck_workload_opts_default(&opts);
    const char *output = DEFAULT_COSTS_FILE;
    uint64_t steps = 5, threads = 0, seed = 1;
    ck_err err = {{0}};
    int code, rc = CK_OK;
    opterr = 0;
    optind = 1;
    while (rc == CK_OK && (code = getopt_long(argc, argv, ":o:h", longs, NULL)) != -1) {
        switch (code) {
        case 'h':
            profile_usage(stdout);
            return 0;
        case 'o': output = optarg; break;
        case CK_OPT_GRANULARITY: rc = ck_options_workload(code, optarg, &opts, &err); break;
        case OPT_STEPS: rc = ck_options_parse_count(optarg, "--steps", 1, 1000, &steps, &err); break;
        case OPT_THREADS: rc = ck_options_parse_count(optarg, "--threads", 1, 1024, &threads, &err); break;
        case OPT_SEED: rc = ck_options_parse_count(optarg, "--seed", 0, UINT64_MAX, &seed, &err); break;
        default: rc = ck_options_error("profile", argv, longs, code, &err);
        }
    }
    const ck_named_file in[] = {{optind < argc ? argv[optind] : NULL, "MODEL"}};
    const ck_named_file out[] = {{output, "-o"}};
    if (rc == CK_OK)
        rc = CK_CHECK_OUTPUTS_APART("profile", in, out, &err);
    ck_workload w;
    if (rc == CK_OK)
        rc = ck_options_model_operand("profile", argc, argv, &opts, &w, &err);
    if (rc != CK_OK)
        return ck_main_report(rc, err.msg);
    if (!w.model) {
        ck_workload_free(&w);
        return ck_main_report(CK_ERR_INPUT, "profile: a chain file has no ops to measure; profile the "
                                       "model it came from");
    }
    if (threads)
        ck_blas_set_threads((int)threads);
    ck_exec *exec = NULL;
    ck_schedule base = {0}, every = {0};
    double *base_median = NULL, *median = NULL;
    uint64_t peak = 0, ignored;
    double outside_ops = 0, ignored_time;
    ck_exec_opts eo = {.seed = seed, .stop = ck_interrupt_flag()};
    size_t L = w.chain.n_stages;
    size_t *starts = malloc(L * sizeof *starts);
    rc = starts ? ck_exec_create(w.model, &w.chain, w.stage_first, &eo, &exec, &err) : ck_err_oom(&err);
    for (size_t i = 0; rc == CK_OK && i < L; i++)
        starts[i] = i;
    /* Two schedules: the baseline for the store-everything peak, and one that checkpoints
     * every stage, in which each stage runs F_ck (but the last), F_all and B once. */
    if (rc == CK_OK)
        rc = ck_schedule_baseline(&w.chain, &base, &err);
    if (rc == CK_OK)
        rc = ck_segments_of(&w.chain, starts, L, &every, &err);
    if (rc == CK_OK && (!(base_median = calloc(base.n, sizeof *base_median)) ||
                        !(median = calloc(every.n, sizeof *median))))
        rc = ck_err_oom(&err);
    if (rc == CK_OK)
        rc = time_ops(exec, &base, 1, base_median, &ignored_time, &peak, &err);
    if (rc == CK_OK)
        rc = time_ops(exec, &every, steps, median, &outside_ops, &ignored, &err);
    ck_chain measured = w.chain; /* same stages; times replaced below */
    ck_stage *stages = NULL;
    double *keep_nothing = calloc(L, sizeof *keep_nothing), *keep_all = calloc(L, sizeof *keep_all);
    if (rc == CK_OK && (!(stages = malloc(L * sizeof *stages)) || !keep_nothing || !keep_all))
        rc = ck_err_oom(&err);
    if (rc == CK_OK) {
        memcpy(stages, w.chain.stages, L * sizeof *stages);
        measured.stages = stages;
        for (size_t k = 0; k < every.n; k++) {
            const ck_action *op = &every.actions[k];
            if (op->kind == CK_F_CK)
                keep_nothing[op->stage] = median[k];
            else if (op->kind == CK_F_ALL)
                keep_all[op->stage] = median[k];
            else if (op->kind == CK_B)
                stages[op->stage].bwd_time = median[k];
            else
                measured.loss_bwd_time = median[k];
        }
        keep_nothing[L - 1] = keep_all[L - 1]; /* the last stage is never checkpointed */
        /* The optimizer step and the inputs cost the same in every schedule, once a step,
         * like the loss: counted with it, they keep overheads relative to whole steps. */
        measured.loss_bwd_time += outside_ops;
        /* Every schedule ckplan makes runs each stage's F_all and B exactly once, and adds
         * only F_ck / F_none forwards: so the chain's single fwd_time is the forward that
         * keeps nothing, and what keeping costs on top of it goes with the backward. The
         * chain's times then add up to the measured ones for every such schedule. */
        for (size_t i = 0; i < L; i++) {
            stages[i].fwd_time = keep_nothing[i];
            stages[i].bwd_time = fmax(0, stages[i].bwd_time + keep_all[i] - keep_nothing[i]);
        }
        cJSON *json = ck_costs_to_json(&measured, w.path, w.sha256,
                                       ck_workload_granularity_name(opts.granularity), peak);
        char *text = json ? ck_json_print(json) : NULL;
        cJSON_Delete(json);
        rc = text ? ck_interrupt_check(&err) : ck_err_oom(&err); /* measured, but stopped */
        if (rc == CK_OK)
            rc = ck_files_write_atomic(output, text, strlen(text), &err);
        free(text);
    }
    if (rc == CK_OK) {
        printf("times in ms: the cost model's, then measured (fwd_time is the forward that keeps\n"
               "nothing; bwd_time adds what keeping costs; F_all and B as measured)\n\n");
        printf("%-20s %9s %9s %9s %9s %9s %9s\n", "stage", "fwd model", "fwd_time", "bwd model",
               "bwd_time", "F_all", "B");
        for (size_t i = 0; i < L; i++)
            printf("%-20.20s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", stages[i].name,
                   1e3 * w.chain.stages[i].fwd_time, 1e3 * stages[i].fwd_time,
                   1e3 * w.chain.stages[i].bwd_time, 1e3 * stages[i].bwd_time,
                   1e3 * keep_all[i], 1e3 * (stages[i].bwd_time - keep_all[i] + keep_nothing[i]));
        printf("%-20s %9s %9s %9.3f %9.3f   (includes %.3f outside the operations:\n"
               "%-20s %49s optimizer step and inputs)\n", "loss", "", "", 1e3 * w.chain.loss_bwd_time,
               1e3 * measured.loss_bwd_time, 1e3 * outside_ops, "", "");
        char p[32];
        ck_size_format(peak, p, sizeof p);
        printf("\ntracked activation peak of a store-everything step: %s\ncosts written to %s\n", p,
               output);
    }
    free(stages);
    free(keep_nothing);
    free(keep_all);
    free(starts);
    free(median);
    free(base_median);
    ck_schedule_free(&every);
    ck_schedule_free(&base);
    ck_exec_free(exec);
    ck_workload_free(&w);
    return ck_main_report(rc, err.msg);
}
