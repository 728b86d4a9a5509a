/* ckplan profile: measure each stage's forward and backward time on this machine with the
 * executor, and write them as a costs file for `ckplan plan --costs`. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/files.h"
#include "cli/interrupt.h"
#include "cli/options.h"
#include "planner/costs.h"
#include "planner/json.h"
#include "planner/size.h"
#include "planner/workload.h"
#include "sim/blas.h"
#include "sim/profile.h"

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
                 "  -h, --help        show this help\n"
                 "\n"
                 "The model as planned (plan with the same):\n",
            DEFAULT_COSTS_FILE);
    ck_options_model_help(out);
}

enum { OPT_STEPS = 3000, OPT_THREADS, OPT_SEED };

typedef struct {
    uint64_t steps, threads, seed;
} profile_counts;

static int profile_option(void *ctx, int code, const char *arg, ck_err *err)
{
    profile_counts *c = ctx;
    switch (code) {
    case OPT_STEPS: return ck_options_parse_count(arg, "--steps", 1, 1000, &c->steps, err);
    case OPT_THREADS: return ck_options_parse_count(arg, "--threads", 1, 1024, &c->threads, err);
    case OPT_SEED: return ck_options_parse_count(arg, "--seed", 0, UINT64_MAX, &c->seed, err);
    default: return CK_ERR_UNKNOWN;
    }
}

int ck_cmd_profile(int argc, char **argv)
{
    static const struct option longs[] = {
        {"granularity", required_argument, NULL, CK_OPT_GRANULARITY},
        CK_MODEL_LONG_OPTIONS,
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
    profile_counts counts = {.steps = 5, .threads = 0, .seed = 1};
    ck_err err = {{0}};
    const ck_options_spec spec = {.cmd = "profile", .longs = longs, .usage = profile_usage,
                                  .own = profile_option, .ctx = &counts};
    int rc = ck_options_parse(&spec, argc, argv, &opts, &output, &err);
    if (rc == CK_HELP_PRINTED)
        return 0;
    uint64_t steps = counts.steps, threads = counts.threads, seed = counts.seed;
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
    ck_profile prof;
    ck_exec_opts eo = {.seed = seed, .stop = ck_interrupt_flag()};
    rc = ck_profile_run(&w, steps, &eo, &prof, &err);
    const ck_stage *stages = prof.chain.stages;
    const double *keep_all = prof.keep_all;
    size_t L = w.chain.n_stages;
    if (rc == CK_OK) {
        char *key = ck_model_opts_key(&opts.model);
        cJSON *json = key ? ck_costs_to_json(&prof.chain, w.path, w.sha256, key,
                                             ck_workload_granularity_name(opts.granularity),
                                             prof.peak_bytes)
                          : NULL;
        free(key);
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
                   1e3 * keep_all[i], 1e3 * (stages[i].bwd_time - keep_all[i] + stages[i].fwd_time));
        printf("%-20s %9s %9s %9.3f %9.3f   (includes %.3f outside the operations:\n"
               "%-20s %49s optimizer step and inputs)\n", "loss", "", "", 1e3 * w.chain.loss_bwd_time,
               1e3 * prof.chain.loss_bwd_time, 1e3 * prof.outside_ops, "", "");
        char p[32];
        ck_size_format(prof.peak_bytes, p, sizeof p);
        printf("\ntracked activation peak of a store-everything step: %s\ncosts written to %s\n", p,
               output);
    }
    ck_profile_free(&prof);
    ck_workload_free(&w);
    return ck_main_report(rc, err.msg);
}
