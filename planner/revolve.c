/* revolve: binomial checkpointing (Griewank 1992; Griewank and Walther 2000) on the chain,
 * with as many snapshots as the budget allows. Every stage's forward runs once as F_all,
 * next to its backward; the snapshots are plain x_i made by F_ck and advanced with F_none.
 * In persistent.h's terms, every subproblem of more than one stage is a leaf. */
#include <stdbool.h>
#include <stdio.h>

#include "planner/persistent.h"
#include "planner/planner.h"
#include "planner/rangemax.h"
#include "planner/revolve.h"
#include "planner/size.h"

/* C(c+t, t) from prev = C(c+t-1, t-1), saturating at UINT64_MAX. prev * (c+t) is a
 * multiple of t; splitting prev = q*t + r keeps the intermediate products small. Exact
 * while r * (c+t) fits in 64 bits, which holds for n, c <= 2^31. */
static uint64_t binom_next(uint64_t prev, uint64_t c, uint64_t t)
{
    uint64_t whole, part, next;
    if (!ck_size_mul(prev / t, c + t, &whole) || !ck_size_mul(prev % t, c + t, &part) ||
        !ck_size_add(whole, part / t, &next))
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

/* C(c+t, c-1) from b = C(c+t, c): b * c / (t+1), exact (the product is a multiple of t+1),
 * saturating like binom_next. */
static uint64_t binom_down(uint64_t b, uint64_t c, uint64_t t)
{
    uint64_t whole, part, out;
    if (b == UINT64_MAX || !ck_size_mul(b / (t + 1), c, &whole) || !ck_size_mul(b % (t + 1), c, &part) ||
        !ck_size_add(whole, part / (t + 1), &out))
        return UINT64_MAX;
    return out;
}

uint64_t ck_revolve_split(uint64_t n, uint64_t c)
{
    /* The cost of the split, m + p(n-m, c-1) + p(m, c), rises from m to m+1 by
     * 1 - t(n-m, c-1) + t(m+1, c), where t(k, c), the least t with C(c+t, c) >= k, is the
     * increment p(k, c) - p(k-1, c). Those rises never decrease (p(., c) is convex), so the
     * smallest minimiser is the first m whose rise is >= 0, or n-1. Group m by
     * tau = t(m+1, c), i.e. C(c+tau-1, c) <= m < C(c+tau, c): the rise is >= 0 when
     * t(n-m, c-1) <= tau+1, i.e. n-m <= C(c+tau, c-1). So the first m of the group that
     * qualifies is max(C(c+tau-1, c), n - C(c+tau, c-1)). */
    uint64_t below = 1; /* C(c+tau-1, c) */
    for (uint64_t tau = 1; below <= n - 2; tau++) {
        uint64_t upto = binom_next(below, c, tau); /* C(c+tau, c) */
        uint64_t reach = binom_down(upto, c, tau); /* C(c+tau, c-1) */
        uint64_t m = reach >= n ? below : n - reach > below ? n - reach : below;
        if (m < upto && m <= n - 2)
            return m;
        below = upto;
    }
    return n - 1;
}

/* The value threaded through subproblems is the number of snapshots, x_s's included. */
static void revolve_decide(void *ctx, size_t s, size_t t, ck_seg_kind kind, uint64_t snapshots,
                           ck_seg_choice *out)
{
    (void)ctx;
    (void)kind; /* revolve plans usual subproblems only */
    uint64_t n = t - s + 1;
    if (snapshots == 1)
        *out = (ck_seg_choice){.leaf = t, .right = 1, .left = 1};
    else
        *out = (ck_seg_choice){.leaf = s + ck_revolve_split(n, snapshots), .right = snapshots - 1,
                               .left = snapshots};
}

int ck_revolve_schedule(const ck_chain *c, uint64_t snapshots, ck_schedule *out, ck_err *err)
{
    return ck_persistent_emit(c, revolve_decide, NULL, NULL, CK_SEG_USUAL, snapshots, out, err);
}

uint64_t ck_revolve_schedule_length(uint64_t L, uint64_t snapshots)
{
    uint64_t ops; /* L F_all, L B, the loss and the advances */
    return ck_size_add(2 * L + 1, ck_revolve_advances(L, snapshots), &ops) ? ops : UINT64_MAX;
}

static bool within_length_limit(const ck_chain *c, uint64_t snapshots)
{
    return ck_schedule_check_length("", ck_revolve_schedule_length(c->n_stages, snapshots),
                                    NULL) == CK_OK;
}

static int replay_snapshots(const ck_chain *c, uint64_t snapshots, ck_schedule *s,
                            ck_replay *replay, ck_err *err)
{
    int rc = ck_revolve_schedule(c, snapshots, s, err);
    if (rc == CK_OK)
        rc = ck_schedule_replay(c, s, replay, NULL, NULL, err);
    return rc;
}

/* The replayed peak of revolve with `snapshots`, priced; a price of 2^64 or more is
 * replayed instead, so that an overflow is reported as the replay words it. */
static int peak_of(const ck_chain *c, ck_revolve_pricer *pricer, uint64_t snapshots,
                   uint64_t *peak, ck_err *err)
{
    *peak = ck_revolve_peak(pricer, snapshots);
    if (*peak != CK_SAT || !within_length_limit(c, snapshots))
        return CK_OK;
    ck_schedule s = {0};
    ck_replay replay;
    int rc = replay_snapshots(c, snapshots, &s, &replay, err);
    ck_schedule_free(&s);
    *peak = replay.peak_bytes;
    return rc;
}

/* Prices the snapshot counts, most first, until one fits in budget: *fits is that count (0
 * when none does) and *least_at the count with the smallest peak among those priced whose
 * schedules are within the length limit (0 when none is). The replayed peak need not
 * shrink with the snapshots on a heterogeneous chain, so no count is skipped. */
static int search_snapshots(const ck_chain *c, uint64_t budget, uint64_t *fits,
                            uint64_t *least_at, ck_err *err)
{
    ck_revolve_pricer *pricer = NULL;
    int rc = ck_revolve_pricer_new(c, &pricer, err);
    uint64_t least = CK_SAT;
    *fits = *least_at = 0;
    for (uint64_t snapshots = c->n_stages; snapshots >= 1 && !*fits && rc == CK_OK; snapshots--) {
        uint64_t peak;
        rc = peak_of(c, pricer, snapshots, &peak, err);
        if (rc == CK_OK && peak <= budget)
            *fits = snapshots;
        else if (rc == CK_OK && peak < least && within_length_limit(c, snapshots))
            least = peak, *least_at = snapshots;
    }
    ck_revolve_pricer_free(pricer);
    return rc;
}

static int plan_revolve(const ck_chain *c, uint64_t budget, const ck_planner_opts *opts,
                        ck_plan_result *result, uint64_t *min_budget, ck_err *err)
{
    (void)opts;
    uint64_t fits, least_at;
    int rc = search_snapshots(c, budget, &fits, &least_at, err);
    if (rc != CK_OK)
        return rc;
    /* Build (and replay) the schedule that fits, or else the least-memory one within the
     * length limit, whose replayed peak is the minimum budget. */
    uint64_t chosen = fits ? fits : least_at ? least_at : c->n_stages;
    char what[160];
    if (fits)
        snprintf(what, sizeof what, "revolve: with %llu snapshot%s, the most that fit in %llu "
                 "bytes, the schedule", (unsigned long long)chosen, chosen == 1 ? "" : "s",
                 (unsigned long long)budget);
    else
        snprintf(what, sizeof what, "revolve: even with %llu snapshots, the schedule",
                 (unsigned long long)chosen);
    rc = ck_schedule_check_length(what, ck_revolve_schedule_length(c->n_stages, chosen), err);
    ck_replay replay;
    if (rc == CK_OK)
        rc = replay_snapshots(c, chosen, &result->schedule, &replay, err);
    if (rc == CK_OK && fits) {
        result->snapshots = (long)fits;
        return CK_OK;
    }
    ck_schedule_free(&result->schedule);
    if (rc != CK_OK)
        return rc;
    *min_budget = replay.peak_bytes;
    return ck_err_fail(err, CK_ERR_INFEASIBLE,
                   "revolve: no number of snapshots fits in %llu bytes; the smallest peak is "
                   "%llu bytes",
                   (unsigned long long)budget, (unsigned long long)replay.peak_bytes);
}

const ck_planner ck_planner_revolve = {
    "revolve", "binomial checkpointing (Griewank), as many snapshots as fit", plan_revolve,
    NULL, false};
