/* Planner speed: wall-clock time of each planner on a 100-stage heterogeneous chain with
 * 500 memory slots, and of dp on the shipped models. Prints markdown rows on stdout.
 * Run through `make bench`, which writes docs/benchmarks.md. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "planner/planner.h"
#include "planner/workload.h"
#include "tests/unit/chaingen.h"
#include "sim/clock.h"

#define REPEATS 5

static ck_replay baseline(const ck_chain *c)
{
    ck_schedule s = {0};
    ck_replay r = {0};
    if (ck_schedule_baseline(c, &s, NULL) != CK_OK || ck_schedule_replay(c, &s, &r, NULL, NULL, NULL) != CK_OK)
        abort();
    ck_schedule_free(&s);
    return r;
}

/* Median wall time of planning c with p under budget; also the replayed overhead. */
static int time_planner(const ck_chain *c, const ck_planner *p, uint64_t budget, uint32_t slots,
                        double *median, double *overhead)
{
    double t[REPEATS];
    ck_planner_opts opts = {.slots = slots};
    ck_replay base = baseline(c);
    for (int r = 0; r < REPEATS; r++) {
        ck_plan_result res;
        ck_replay replay;
        uint64_t min_budget;
        ck_err err;
        double start = ck_clock_seconds();
        int rc = ck_planner_run(c, p, budget, &opts, &res, &replay, &min_budget, &err);
        t[r] = ck_clock_seconds() - start;
        ck_planner_result_free(&res);
        if (rc != CK_OK)
            return rc;
        *overhead = replay.time / base.time - 1;
    }
    *median = ck_clock_median(t, REPEATS);
    return CK_OK;
}

/* Half-way between dp's minimum and the baseline's peak. */
static uint64_t half_way(const ck_chain *c)
{
    ck_planner_opts opts = {.slots = CK_DEFAULT_SLOTS};
    ck_plan_result res;
    ck_replay replay;
    uint64_t min_budget = 0;
    ck_planner_run(c, &ck_planner_dp, 0, &opts, &res, &replay, &min_budget, NULL);
    ck_planner_result_free(&res);
    return min_budget + (baseline(c).peak_bytes - min_budget) / 2;
}

static void row(const char *what, size_t stages, const ck_chain *c, const ck_planner *p,
                uint64_t budget)
{
    double median, overhead;
    int rc = time_planner(c, p, budget, CK_DEFAULT_SLOTS, &median, &overhead);
    if (rc == CK_OK)
        printf("| %s | %zu | %s | %.4f | %+.1f%% |\n", what, stages, p->name, median, 100 * overhead);
    else
        printf("| %s | %zu | %s | - | infeasible at this budget |\n", what, stages, p->name);
}

int main(void)
{
    printf("| workload | stages | planner | median seconds (of %d) | overhead of the plan |\n"
           "|---|---|---|---|---|\n", REPEATS);
    ck_rng rng;
    ck_rng_seed(&rng, 100);
    ck_chain c;
    if (ck_chaingen_random(&c, 100, 1000, 10, &rng, NULL) != CK_OK)
        return 1;
    uint64_t budget = half_way(&c);
    for (const ck_planner *const *p = ck_planners; *p; p++)
        row("random chain, 500 slots", c.n_stages, &c, *p, budget);
    ck_chain_free(&c);

    const char *models[] = {"models/gpt2-small.json", "models/llama-tiny.json"};
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        for (int g = CK_GRAN_OP; g <= CK_GRAN_BLOCK; g++) {
            ck_workload_opts opts;
            ck_workload_opts_default(&opts);
            opts.granularity = (ck_granularity)g;
            ck_workload w;
            ck_err err;
            if (ck_workload_load(models[m], &opts, &w, &err) != CK_OK) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
            char what[96];
            snprintf(what, sizeof what, "%s, %s granularity", models[m], ck_workload_granularity_name(opts.granularity));
            row(what, w.chain.n_stages, &w.chain, &ck_planner_dp, half_way(&w.chain));
            ck_workload_free(&w);
        }
    }
    return 0;
}
