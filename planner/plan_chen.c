/* chen: Chen, Xu, Zhang, Guestrin 2016, "Training deep nets with sublinear memory cost",
 * Algorithm 3 (greedy segmentation under a per-segment budget b) and the search over b.
 *
 * For a given b, walk the stages adding up what each keeps for backward (saved_bytes);
 * when the running sum exceeds b, the stage's output becomes a checkpoint and the sum
 * restarts. Every distinct segmentation over all b is considered, and the fastest one that
 * fits the budget is kept (ties: the lower peak), its time and peak being those
 * ck_schedule_replay gives. Candidates are priced without being built: peaks by
 * ck_segments_peak (exact), times from prefix sums, with the replay's own sum (whose
 * rounding follows the order of operations) computed only when two times are too close for
 * the prefix sums to order them as the replay would. */
#include <math.h>
#include <stdlib.h>

#include "planner/planner.h"
#include "planner/rangemax.h"
#include "planner/segments.h"

/* Distinct segmentations tried at most; far above what real chains produce. */
#define CHEN_MAX_SEGMENTATIONS 20000

typedef struct {
    const ck_chain *chain;
    ck_segments_pricer *pricer;
    uint64_t *saved_before; /* saved_0 + .. + saved_{i-1} */
    bool exact_sizes;       /* every running sum of saved_bytes is exact as a double */
    double *fwd_before;     /* fwd_0 + .. + fwd_{i-1} */
    double time_fixed;      /* every forward, backward and the loss once */
    double time_slack;      /* how far a priced time may be from the replay's; 0: exact */
    size_t *starts;
} chen_search;

/* Whether saved_start + .. + saved_i exceeds b (exact sizes only). */
static bool sum_exceeds(const chen_search *x, size_t start, size_t i, double b)
{
    return (double)(x->saved_before[i + 1] - x->saved_before[start]) > b;
}

/* The end of the segment starting at `start` under per-segment budget b: one past the first
 * stage (below the last) at which the running sum exceeds b, with that sum in *sum; L when
 * there is none. Exactly the walk of Algorithm 3, found by bisection when sums are exact. */
static size_t segment_end(const chen_search *x, size_t start, double b, double *sum)
{
    size_t L = x->chain->n_stages;
    if (!x->exact_sizes) {
        double running = 0;
        for (size_t i = start; i + 1 < L; i++) {
            running += (double)x->chain->stages[i].saved_bytes;
            if (running > b)
                return *sum = running, i + 1;
        }
        return L;
    }
    if (start + 1 >= L || !sum_exceeds(x, start, L - 2, b))
        return L;
    /* Gallop to a stage whose sum exceeds b, then bisect: O(log) of the segment's length. */
    size_t lo = start, hi = start;
    for (size_t step = 1; !sum_exceeds(x, start, hi, b); step *= 2) {
        lo = hi + 1;
        hi = hi + step < L - 2 ? hi + step : L - 2;
    }
    while (lo < hi) { /* the first i in [lo, hi] whose sum exceeds b */
        size_t mid = lo + (hi - lo) / 2;
        if (sum_exceeds(x, start, mid, b))
            hi = mid;
        else
            lo = mid + 1;
    }
    *sum = (double)(x->saved_before[lo + 1] - x->saved_before[start]);
    return lo + 1;
}

/* Greedy segmentation under per-segment budget b, into x->starts. *next_b is the smallest
 * running sum that caused a cut: the next budget at which the segmentation changes
 * (INFINITY if none did). */
static size_t greedy_starts(const chen_search *x, double b, double *next_b)
{
    size_t n = 1, L = x->chain->n_stages;
    double sum = 0;
    *next_b = INFINITY;
    x->starts[0] = 0;
    for (size_t end; (end = segment_end(x, x->starts[n - 1], b, &sum)) < L; n++) {
        *next_b = fmin(*next_b, sum);
        x->starts[n] = end;
    }
    return n;
}

static void search_free(chen_search *x)
{
    ck_segments_pricer_free(x->pricer);
    free(x->saved_before);
    free(x->fwd_before);
    free(x->starts);
}

/* Prefix sums, the pricer, and how exact the priced times are. The replay adds the times
 * one operation at a time: with whole numbers whose total stays below 2^53 every order
 * gives the same sum; otherwise each of the two sums of at most 3L + 2 non-negative terms
 * is within (3L + 2) u of their total (u = 2^-53, Higham's bound, with room to spare). */
static int search_init(chen_search *x, const ck_chain *c, ck_err *err)
{
    size_t L = c->n_stages;
    *x = (chen_search){.chain = c};
    x->saved_before = calloc(L + 1, sizeof *x->saved_before);
    x->fwd_before = calloc(L + 1, sizeof *x->fwd_before);
    x->starts = malloc(L * sizeof *x->starts);
    int rc = x->saved_before && x->fwd_before && x->starts
                 ? ck_segments_pricer_new(c, &x->pricer, err)
                 : ck_err_oom(err);
    if (rc != CK_OK) {
        search_free(x);
        return rc;
    }
    bool whole = c->loss_bwd_time == floor(c->loss_bwd_time);
    double fwd = 0, bwd = 0;
    for (size_t i = 0; i < L; i++) {
        const ck_stage *st = &c->stages[i];
        x->saved_before[i + 1] = ck_rangemax_sat_add(x->saved_before[i], st->saved_bytes);
        x->fwd_before[i + 1] = x->fwd_before[i] + st->fwd_time;
        fwd += st->fwd_time;
        bwd += st->bwd_time;
        whole = whole && st->fwd_time == floor(st->fwd_time) && st->bwd_time == floor(st->bwd_time);
    }
    x->exact_sizes = x->saved_before[L] < ((uint64_t)1 << 53);
    x->time_fixed = fwd + c->loss_bwd_time + bwd;
    double total = fwd + x->time_fixed; /* at least the time of any candidate */
    x->time_slack = whole && total < 0x1p53 ? 0
                    : isfinite(total)       ? 4.0 * (3.0 * (double)L + 3) * 0x1p-53 * total
                                            : INFINITY;
    return CK_OK;
}

typedef struct {
    double b;        /* the per-segment budget that gives it */
    size_t segments;
    uint64_t peak;   /* ck_schedule_replay's */
    double priced;   /* its time from prefix sums */
    double time;     /* ck_schedule_replay's; NAN until known */
} candidate;

/* Builds and replays the candidate's schedule, setting its time and peak; keeps the
 * schedule in *keep when keep is non-NULL. */
static int replay_candidate(const chen_search *x, candidate *cand, ck_schedule *keep, ck_err *err)
{
    double next_b;
    size_t n = greedy_starts(x, cand->b, &next_b);
    ck_schedule s = {0};
    ck_replay r;
    int rc = ck_segments_of(x->chain, x->starts, n, &s, err);
    if (rc == CK_OK)
        rc = ck_schedule_replay(x->chain, &s, &r, NULL, NULL, err);
    if (rc == CK_OK) {
        cand->time = r.time;
        cand->peak = r.peak_bytes;
    }
    if (rc == CK_OK && keep)
        *keep = s;
    else
        ck_schedule_free(&s);
    return rc;
}

/* The candidate's time as the replay sums it. */
static double replayed_time(const chen_search *x, candidate *cand)
{
    if (isnan(cand->time)) {
        double next_b;
        size_t n = greedy_starts(x, cand->b, &next_b);
        cand->time = ck_segments_time(x->chain, x->starts, n);
    }
    return cand->time;
}

/* Prices the segmentation for budget b (now in x->starts, n segments). */
static int price(const chen_search *x, double b, size_t n, candidate *out, ck_err *err)
{
    double priced = x->time_fixed + x->fwd_before[x->starts[n - 1]];
    *out = (candidate){b, n, ck_segments_peak(x->pricer, x->starts, n), priced,
                       x->time_slack == 0 ? priced : NAN};
    /* 2^64 or more: the replay reports the overflow as it reports it for any schedule */
    return out->peak == CK_SAT ? replay_candidate(x, out, NULL, err) : CK_OK;
}

/* Whether a beats b: the lower replayed time, then the lower peak. Sums the times as the
 * replay does only when the priced times are too close to tell. */
static bool beats(const chen_search *x, candidate *a, candidate *b)
{
    double gap = 2 * x->time_slack;
    if (a->priced + gap < b->priced || a->priced - gap > b->priced)
        return a->priced < b->priced;
    double ta = replayed_time(x, a), tb = replayed_time(x, b);
    return ta < tb || (ta == tb && a->peak < b->peak);
}

static int plan_chen(const ck_chain *c, uint64_t budget, const ck_planner_opts *opts,
                     ck_plan_result *result, uint64_t *min_budget, ck_err *err)
{
    (void)opts;
    chen_search x;
    int rc = search_init(&x, c, err);
    if (rc != CK_OK)
        return rc;
    /* Rather than sampling b (the paper suggests trying values around sqrt(x*y)), step it
     * through every value at which the greedy segmentation changes, from "every stage
     * output is a checkpoint" (b < 0) to "one segment": the search is then exhaustive. */
    candidate best = {0}, lowest = {.peak = CK_SAT};
    bool have_best = false;
    double b = -1;
    for (int tried = 0; tried < CHEN_MAX_SEGMENTATIONS && isfinite(b) && rc == CK_OK; tried++) {
        double next_b;
        candidate trial;
        size_t n = greedy_starts(&x, b, &next_b);
        rc = price(&x, b, n, &trial, err);
        b = next_b;
        if (rc == CK_OK && (trial.peak < lowest.peak || tried == 0))
            lowest = trial;
        if (rc == CK_OK && trial.peak <= budget && (!have_best || beats(&x, &trial, &best))) {
            best = trial;
            have_best = true;
        }
    }
    /* The figures returned are the replay's, of the schedule itself. */
    if (rc == CK_OK)
        rc = replay_candidate(&x, have_best ? &best : &lowest, &result->schedule, err);
    search_free(&x);
    if (rc == CK_OK && !have_best) {
        ck_schedule_free(&result->schedule);
        *min_budget = lowest.peak;
        return CK_ERR_INFEASIBLE;
    }
    if (rc != CK_OK)
        ck_schedule_free(&result->schedule);
    else
        result->segments = (long)best.segments;
    return rc;
}

const ck_planner ck_planner_chen = {
    "chen", "Chen et al. 2016 Algorithm 3: greedy segments, best per-segment budget",
    plan_chen, NULL, false};
