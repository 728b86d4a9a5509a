/* chen: Chen, Xu, Zhang, Guestrin 2016, "Training deep nets with sublinear memory cost",
 * Algorithm 3 (greedy segmentation under a per-segment budget b) and the search over b.
 *
 * For a given b, walk the stages adding up what each keeps for backward (saved_bytes);
 * when the running sum exceeds b, the stage's output becomes a checkpoint and the sum
 * restarts. Every distinct segmentation over all b is replayed, and the fastest one that fits
 * the budget is kept (ties: the lower peak). */
#include <math.h>
#include <stdlib.h>

#include "planner/planners.h"
#include "planner/segments.h"

/* Distinct segmentations tried at most; far above what real chains produce. */
#define CHEN_MAX_SEGMENTATIONS 20000

/* Greedy segmentation under per-segment budget b. *next_b is the smallest running sum that
 * caused a cut: the next budget at which the segmentation changes (INFINITY if none did). */
static size_t greedy_starts(const ck_chain *c, double b, size_t *starts, double *next_b)
{
    size_t n = 0;
    double sum = 0;
    *next_b = INFINITY;
    starts[n++] = 0;
    for (size_t i = 0; i + 1 < c->n_stages; i++) {
        sum += (double)c->stages[i].saved_bytes;
        if (sum > b) {
            *next_b = fmin(*next_b, sum);
            starts[n++] = i + 1;
            sum = 0;
        }
    }
    return n;
}

typedef struct {
    ck_schedule schedule;
    ck_replay replay;
    size_t segments;
} candidate;

static bool better(const candidate *a, const candidate *b)
{
    return a->replay.time < b->replay.time ||
           (a->replay.time == b->replay.time && a->replay.peak_bytes < b->replay.peak_bytes);
}

static int plan_chen(const ck_chain *c, uint64_t budget, const ck_planner_opts *opts,
                     ck_plan_result *result, uint64_t *min_budget, ck_err *err)
{
    (void)opts;
    size_t *starts = malloc(c->n_stages * sizeof *starts);
    if (!starts)
        return ck_fail_oom(err);
    /* Rather than sampling b (the paper suggests trying values around sqrt(x*y)), step it
     * through every value at which the greedy segmentation changes, from "every stage
     * output is a checkpoint" (b < 0) to "one segment": the search is then exhaustive. */
    candidate best = {0}, trial = {0};
    bool have_best = false;
    uint64_t lowest_peak = UINT64_MAX;
    double b = -1;
    int rc = CK_OK;
    for (int tried = 0; tried < CHEN_MAX_SEGMENTATIONS && isfinite(b) && rc == CK_OK; tried++) {
        double next_b;
        size_t n = greedy_starts(c, b, starts, &next_b);
        b = next_b;
        trial.schedule.n = 0;
        trial.segments = n;
        rc = ck_schedule_segments(c, starts, n, &trial.schedule, err);
        if (rc == CK_OK)
            rc = ck_schedule_replay(c, &trial.schedule, &trial.replay, NULL, NULL, err);
        if (rc != CK_OK)
            break;
        if (trial.replay.peak_bytes < lowest_peak)
            lowest_peak = trial.replay.peak_bytes;
        if (trial.replay.peak_bytes <= budget && (!have_best || better(&trial, &best))) {
            candidate swap = best;
            best = trial;
            trial = swap;
            have_best = true;
        }
    }
    free(starts);
    ck_schedule_free(&trial.schedule);
    if (rc == CK_OK && !have_best) {
        *min_budget = lowest_peak;
        rc = CK_ERR_INFEASIBLE;
    }
    if (rc != CK_OK) {
        ck_schedule_free(&best.schedule);
        return rc;
    }
    result->schedule = best.schedule;
    result->segments = (long)best.segments;
    return CK_OK;
}

const ck_planner ck_planner_chen = {
    "chen", "Chen et al. 2016 Algorithm 3: greedy segments, best per-segment budget",
    plan_chen};
