/* revolve: binomial checkpointing (Griewank 1992; Griewank and Walther 2000) on the chain,
 * with as many snapshots as the budget allows. Every stage's forward runs once as F_all,
 * next to its backward; the snapshots are plain x_i made by F_ck and advanced with F_none.
 * In persistent.h's terms, every subproblem of more than one stage is a leaf. */
#include <stdbool.h>

#include "planner/persistent.h"
#include "planner/planners.h"
#include "planner/revolve.h"
#include "planner/size.h"

/* C(c+t, t) from prev = C(c+t-1, t-1), saturating at UINT64_MAX. prev * (c+t) is a
 * multiple of t; splitting prev = q*t + r keeps the intermediate products small. Exact
 * while r * (c+t) fits in 64 bits, which holds for n, c <= 2^31. */
static uint64_t binom_next(uint64_t prev, uint64_t c, uint64_t t)
{
    uint64_t whole, part, next;
    if (!ck_mul(prev / t, c + t, &whole) || !ck_mul(prev % t, c + t, &part) ||
        !ck_add(whole, part / t, &next))
        return UINT64_MAX;
    return next;
}

/* C(c+t, t). */
static uint64_t binom(uint64_t c, uint64_t t)
{
    uint64_t b = 1;
    for (uint64_t i = 1; i <= t && b != UINT64_MAX; i++)
        b = binom_next(b, c, i);
    return b;
}

uint64_t ck_revolve_advances(uint64_t n, uint64_t c)
{
    if (n <= 1)
        return 0;
    if (c == 1)
        return n % 2 ? n * ((n - 1) / 2) : n / 2 * (n - 1);
    uint64_t t = 0, reach = 1; /* reach = C(c+t, c): stages reversible with t advances each */
    while (reach < n)
        reach = binom_next(reach, c, ++t);
    return t * n - binom(c + 1, t - 1);
}

/* Advances with the first snapshot taken m stages ahead. */
static uint64_t advances_split_at(uint64_t n, uint64_t c, uint64_t m)
{
    return m + ck_revolve_advances(n - m, c - 1) + ck_revolve_advances(m, c);
}

uint64_t ck_revolve_split(uint64_t n, uint64_t c)
{
    /* p(., c) is convex (its increments are the number of advances of the newest stage,
     * which never decreases), so the cost of the split is convex in m: search its slope. */
    uint64_t lo = 1, hi = n - 1;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (advances_split_at(n, c, mid + 1) >= advances_split_at(n, c, mid))
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* The value threaded through subproblems is the number of snapshots, x_s's included. */
static void revolve_decide(void *ctx, size_t s, size_t t, uint64_t snapshots, ck_seg_choice *out)
{
    (void)ctx;
    uint64_t n = t - s + 1;
    if (snapshots == 1)
        *out = (ck_seg_choice){.leaf = t, .right = 1, .left = 1};
    else
        *out = (ck_seg_choice){.leaf = s + ck_revolve_split(n, snapshots), .right = snapshots - 1,
                               .left = snapshots};
}

int ck_revolve_schedule(const ck_chain *c, uint64_t snapshots, ck_schedule *out, ck_err *err)
{
    return ck_persistent_emit(c, revolve_decide, NULL, snapshots, out, err);
}

static int plan_revolve(const ck_chain *c, uint64_t budget, const ck_planner_opts *opts,
                        ck_plan_result *result, uint64_t *min_budget, ck_err *err)
{
    (void)opts;
    /* The replayed peak need not shrink with the snapshots on a heterogeneous chain, so
     * every count is tried, most first, and the smallest peak seen is the minimum budget. */
    uint64_t least = UINT64_MAX;
    for (size_t snapshots = c->n_stages; snapshots >= 1; snapshots--) {
        ck_schedule s = {0};
        ck_replay replay;
        int rc = ck_revolve_schedule(c, snapshots, &s, err);
        if (rc == CK_OK)
            rc = ck_schedule_replay(c, &s, &replay, NULL, NULL, err);
        if (rc == CK_OK && replay.peak_bytes <= budget) {
            result->schedule = s;
            result->snapshots = (long)snapshots;
            return CK_OK;
        }
        ck_schedule_free(&s);
        if (rc != CK_OK)
            return rc;
        if (replay.peak_bytes < least)
            least = replay.peak_bytes;
    }
    *min_budget = least;
    return ck_fail(err, CK_ERR_INFEASIBLE,
                   "revolve: no number of snapshots fits in %llu bytes; the smallest peak is "
                   "%llu bytes",
                   (unsigned long long)budget, (unsigned long long)least);
}

const ck_planner ck_planner_revolve = {
    "revolve", "binomial checkpointing (Griewank), as many snapshots as fit", plan_revolve};
