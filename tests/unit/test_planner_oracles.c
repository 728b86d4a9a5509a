/* revolve and chen price their candidate schedules from prefix sums and range maxima
 * instead of building and replaying each one. The oracles here are the straightforward
 * planners (every candidate built and replayed, as ck_schedule_replay defines the figures):
 * on many random chains and budgets the fast planners must return the same schedule, the
 * same details and the same minimum budget. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/planner.h"
#include "planner/revolve.h"
#include "planner/segments.h"
#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"
#include "tests/unit/plan_run.h"

/* ck_assert_msg for the inner loops: check records every passing ck_assert through a pipe,
 * which would cost more than the checks themselves. */
#define REQUIRE(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ck_abort_msg(__VA_ARGS__);                                                             \
    } while (0)

static ck_replay replay_of(const ck_chain *c, const ck_schedule *s)
{
    ck_replay r;
    ck_err err = {{0}};
    REQUIRE(ck_schedule_replay(c, s, &r, NULL, NULL, &err) == CK_OK, "%s", err.msg);
    return r;
}

/* The replayed peak of revolve with `snapshots`, UINT64_MAX when the replay finds the
 * memory held past 2^64. */
static uint64_t revolve_replayed_peak(const ck_chain *c, uint64_t snapshots)
{
    ck_schedule s = {0};
    ck_replay r;
    ck_err err = {{0}};
    REQUIRE(ck_revolve_schedule(c, snapshots, &s, NULL) == CK_OK, "revolve schedule");
    int rc = ck_schedule_replay(c, &s, &r, NULL, NULL, &err);
    REQUIRE(rc == CK_OK || strstr(err.msg, "exceeds 2^64"), "%s", err.msg);
    ck_schedule_free(&s);
    return rc == CK_OK ? r.peak_bytes : UINT64_MAX;
}

/* Reference revolve: build and replay every snapshot count, most first; the first that fits
 * wins, else the smallest peak is the minimum budget. */
static int reference_revolve(const ck_chain *c, uint64_t budget, ck_schedule *out, long *snapshots,
                             uint64_t *min_budget)
{
    uint64_t least = UINT64_MAX;
    for (uint64_t s = c->n_stages; s >= 1; s--) {
        ck_schedule sched = {0};
        REQUIRE(ck_revolve_schedule(c, s, &sched, NULL) == CK_OK, "revolve schedule");
        uint64_t peak = replay_of(c, &sched).peak_bytes;
        if (peak <= budget) {
            *out = sched;
            *snapshots = (long)s;
            return CK_OK;
        }
        ck_schedule_free(&sched);
        if (peak < least)
            least = peak;
    }
    *min_budget = least;
    return CK_ERR_INFEASIBLE;
}

/* Reference chen: Algorithm 3's greedy rerun for each per-segment budget, walking the
 * stages with a running sum, each segmentation built and replayed. */
static size_t reference_greedy(const ck_chain *c, double b, size_t *starts, double *next_b)
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

static int reference_chen(const ck_chain *c, uint64_t budget, ck_schedule *out, long *segments,
                          uint64_t *min_budget)
{
    size_t *starts = malloc(c->n_stages * sizeof *starts);
    ck_assert_ptr_nonnull(starts);
    bool have = false;
    ck_replay best = {0};
    uint64_t lowest = UINT64_MAX;
    double b = -1;
    for (int tried = 0; tried < 20000 && isfinite(b); tried++) {
        double next_b;
        size_t n = reference_greedy(c, b, starts, &next_b);
        b = next_b;
        ck_schedule s = {0};
        REQUIRE(ck_segments_of(c, starts, n, &s, NULL) == CK_OK, "segments");
        ck_replay r = replay_of(c, &s);
        if (r.peak_bytes < lowest)
            lowest = r.peak_bytes;
        if (r.peak_bytes <= budget &&
            (!have || r.time < best.time || (r.time == best.time && r.peak_bytes < best.peak_bytes))) {
            ck_schedule_free(out);
            *out = s;
            best = r;
            *segments = (long)n;
            have = true;
        } else {
            ck_schedule_free(&s);
        }
    }
    free(starts);
    *min_budget = lowest;
    return have ? CK_OK : CK_ERR_INFEASIBLE;
}

typedef int (*reference_planner)(const ck_chain *c, uint64_t budget, ck_schedule *out,
                                 long *detail, uint64_t *min_budget);

/* Plans c at budget with p and with its reference; both must agree in everything. */
static void compare(const ck_planner *p, reference_planner ref, const ck_chain *c, uint64_t budget,
                    const char *what)
{
    ck_plan_result r;
    ck_replay replay;
    uint64_t min_budget = 0, ref_min = 0;
    ck_err err = {{0}};
    int rc = ck_test_plan(p, c, budget, 500, &r, &replay, &min_budget, &err);
    ck_schedule expected = {0};
    long detail = -1;
    int ref_rc = ref(c, budget, &expected, &detail, &ref_min);
    REQUIRE(rc == ref_rc, "%s, budget %llu: %s returned %d, the reference %d (%s)", what,
                  (unsigned long long)budget, p->name, rc, ref_rc, err.msg);
    if (rc == CK_OK) {
        long got = p == &ck_planner_revolve ? r.snapshots : r.segments;
        REQUIRE(got == detail, "%s, budget %llu: %ld, the reference %ld", what,
                      (unsigned long long)budget, got, detail);
        REQUIRE(ck_test_same_schedule(&r.schedule, &expected),
                      "%s, budget %llu: %s's schedule differs from the reference's", what,
                      (unsigned long long)budget, p->name);
    } else {
        REQUIRE(min_budget == ref_min, "%s, budget %llu: minimum %llu, the reference %llu",
                      what, (unsigned long long)budget, (unsigned long long)min_budget,
                      (unsigned long long)ref_min);
    }
    ck_schedule_free(&r.schedule);
    ck_schedule_free(&expected);
}

/* Budgets from below the least peak to the baseline's peak: every one for small chains,
 * a spread of them otherwise. */
static void compare_over_budgets(const ck_planner *p, reference_planner ref, const ck_chain *c,
                                 const char *what)
{
    uint64_t top = ck_test_baseline(c).peak_bytes;
    uint64_t step = top / 60 + 1;
    for (uint64_t budget = 0; budget <= top + step; budget += step)
        compare(p, ref, c, budget, what);
}

/* The cost of reversing n stages with c snapshots, the first taken m stages ahead. */
static uint64_t split_cost(uint64_t n, uint64_t c, uint64_t m)
{
    return m + ck_revolve_advances(n - m, c - 1) + ck_revolve_advances(m, c);
}

/* ck_revolve_split against every split for n <= 150, and on long chains against its
 * neighbours (the cost is convex in m, so a smallest minimiser is one that beats m-1 and
 * is no worse than m+1). */
START_TEST(revolve_split_is_the_smallest_minimiser)
{
    for (uint64_t n = 2; n <= 150; n++)
        for (uint64_t c = 2; c <= n + 1; c++) {
            uint64_t best = 1;
            for (uint64_t m = 2; m < n; m++)
                if (split_cost(n, c, m) < split_cost(n, c, best))
                    best = m;
            REQUIRE(ck_revolve_split(n, c) == best, "n %llu, c %llu: split %llu, expected %llu",
                          (unsigned long long)n, (unsigned long long)c,
                          (unsigned long long)ck_revolve_split(n, c), (unsigned long long)best);
        }
    ck_rng rng;
    ck_rng_seed(&rng, 31);
    for (int k = 0; k < 20000; k++) {
        uint64_t n = 3 + ck_rng_below(&rng, 100000), c = 2 + ck_rng_below(&rng, k % 2 ? 40 : n);
        uint64_t m = ck_revolve_split(n, c);
        REQUIRE(m >= 1 && m < n && (m == 1 || split_cost(n, c, m - 1) > split_cost(n, c, m)) &&
                    (m == n - 1 || split_cost(n, c, m + 1) >= split_cost(n, c, m)),
                "n %llu, c %llu: split %llu is not the smallest minimiser", (unsigned long long)n,
                (unsigned long long)c, (unsigned long long)m);
    }
}
END_TEST

START_TEST(revolve_price_is_the_replayed_peak)
{
    ck_rng rng;
    ck_rng_seed(&rng, 1992);
    for (unsigned k = 0; k < 400; k++) {
        ck_chain c;
        size_t L = 1 + k % 70;
        ck_assert_int_eq(ck_chaingen_random(&c, L, 1 + k % 30, 10, &rng, NULL), CK_OK);
        ck_revolve_pricer *pricer;
        ck_assert_int_eq(ck_revolve_pricer_new(&c, &pricer, NULL), CK_OK);
        for (uint64_t s = 1; s <= L + 1; s++)
            REQUIRE(ck_revolve_peak(pricer, s) == revolve_replayed_peak(&c, s),
                          "chain %u (%zu stages), %llu snapshots: priced %llu, replayed %llu", k, L,
                          (unsigned long long)s, (unsigned long long)ck_revolve_peak(pricer, s),
                          (unsigned long long)revolve_replayed_peak(&c, s));
        ck_revolve_pricer_free(pricer);
        ck_chain_free(&c);
    }
}
END_TEST

/* Sizes near 2^60: where the replay overflows the price is UINT64_MAX ("cannot tell",
 * which the planner then replays); any other price is the replayed peak. */
START_TEST(revolve_price_saturates_where_sums_overflow)
{
    ck_rng rng;
    ck_rng_seed(&rng, 64);
    for (unsigned k = 0; k < 100; k++) {
        ck_chain c;
        size_t L = 2 + k % 30;
        ck_assert_int_eq(ck_chaingen_random(&c, L, (uint64_t)1 << (58 + k % 4), 10, &rng, NULL),
                         CK_OK);
        ck_revolve_pricer *pricer;
        ck_assert_int_eq(ck_revolve_pricer_new(&c, &pricer, NULL), CK_OK);
        for (uint64_t s = 1; s <= L; s++) {
            uint64_t price = ck_revolve_peak(pricer, s), replayed = revolve_replayed_peak(&c, s);
            REQUIRE(price == replayed || price == UINT64_MAX, "%llu snapshots: priced %llu, replayed %llu",
                    (unsigned long long)s, (unsigned long long)price, (unsigned long long)replayed);
        }
        ck_revolve_pricer_free(pricer);
        ck_chain_free(&c);
    }
}
END_TEST

/* Long chains reach the regimes short ones do not: long runs of consecutive snapshots,
 * splits far from 1, and one-snapshot rounds over hundreds of stages. */
START_TEST(revolve_price_is_the_replayed_peak_on_long_chains)
{
    ck_rng rng;
    ck_rng_seed(&rng, 2000);
    const size_t lengths[] = {300, 1000, 2500};
    for (size_t k = 0; k < 3; k++) {
        ck_chain c;
        size_t L = lengths[k];
        ck_assert_int_eq(ck_chaingen_random(&c, L, 1000, 10, &rng, NULL), CK_OK);
        ck_revolve_pricer *pricer;
        ck_assert_int_eq(ck_revolve_pricer_new(&c, &pricer, NULL), CK_OK);
        for (uint64_t s = 1; s <= L + 1; s += s < 12 ? 1 : 1 + ck_rng_below(&rng, L / 7))
            REQUIRE(ck_revolve_peak(pricer, s) == revolve_replayed_peak(&c, s),
                          "%zu stages, %llu snapshots", L, (unsigned long long)s);
        ck_revolve_pricer_free(pricer);
        ck_chain_free(&c);
    }
}
END_TEST

START_TEST(revolve_plans_as_the_reference)
{
    ck_rng rng;
    ck_rng_seed(&rng, 2000);
    for (unsigned k = 0; k < 200; k++) {
        ck_chain c;
        ck_assert_int_eq(ck_chaingen_random(&c, 1 + k % 40, 1 + k % 20, 10, &rng, NULL), CK_OK);
        compare_over_budgets(&ck_planner_revolve, reference_revolve, &c, "revolve");
        ck_chain_free(&c);
    }
}
END_TEST

START_TEST(chen_plans_as_the_reference)
{
    ck_rng rng;
    ck_rng_seed(&rng, 2016);
    for (unsigned k = 0; k < 300; k++) {
        ck_chain c;
        /* times in steps of 0.1, so that sums round and equal times are common */
        ck_assert_int_eq(ck_chaingen_random(&c, 1 + k % 60, 1 + k % 25, 1 + k % 4, &rng, NULL),
                         CK_OK);
        compare_over_budgets(&ck_planner_chen, reference_chen, &c, "chen, random chain");
        ck_chain_free(&c);
    }
}
END_TEST

/* Where every candidate takes the same time, the peak decides: forward times of zero, and
 * identical stages. */
START_TEST(chen_plans_as_the_reference_on_equal_times)
{
    ck_rng rng;
    ck_rng_seed(&rng, 3);
    ck_chain c;
    for (unsigned k = 0; k < 60; k++) {
        ck_assert_int_eq(ck_chaingen_random(&c, 2 + k % 30, 1 + k % 20, 10, &rng, NULL), CK_OK);
        for (size_t i = 0; i < c.n_stages; i++)
            c.stages[i].fwd_time = 0;
        compare_over_budgets(&ck_planner_chen, reference_chen, &c, "chen, zero forward times");
        ck_chain_free(&c);
    }
    for (size_t L = 1; L <= 80; L += 7) {
        ck_assert_int_eq(ck_chaingen_uniform(&c, L, 3, NULL), CK_OK);
        for (size_t i = 0; i < L; i++)
            c.stages[i].fwd_time = 0.1, c.stages[i].bwd_time = 0.3;
        compare_over_budgets(&ck_planner_chen, reference_chen, &c, "chen, uniform chain");
        ck_chain_free(&c);
    }
}
END_TEST

/* Sizes whose sums pass 2^53, where Algorithm 3's running sums (doubles) round. */
START_TEST(chen_plans_as_the_reference_past_2_to_the_53)
{
    ck_rng rng;
    ck_rng_seed(&rng, 53);
    ck_chain c;
    for (unsigned k = 0; k < 40; k++) {
        ck_assert_int_eq(ck_chaingen_random(&c, 2 + k % 40, (uint64_t)1 << 52, 10, &rng, NULL),
                         CK_OK);
        compare_over_budgets(&ck_planner_chen, reference_chen, &c, "chen, sums past 2^53");
        ck_chain_free(&c);
    }
    /* found by a search: here the rounded running sums cut elsewhere than exact sums would */
    const uint64_t rounding[] = {0, 9007199254740986, 4503599627370501, 2, 9007199254740991,
                                 4503599627370496, 2251799813685253};
    ck_assert_int_eq(ck_chain_alloc(&c, "rounding", 7, NULL), CK_OK);
    for (size_t i = 0; i < 7; i++)
        c.stages[i] = (ck_stage){.fwd_time = 1 + (double)i, .bwd_time = 1,
                                 .out_bytes = rounding[i] / 2, .saved_bytes = rounding[i]};
    for (uint64_t budget = (uint64_t)1 << 52; budget < (uint64_t)1 << 56; budget += budget / 64)
        compare(&ck_planner_chen, reference_chen, &c, budget, "chen, rounded running sums");
    ck_chain_free(&c);
}
END_TEST

/* Random segmentations of random chains: the priced peak and the summed time are the
 * replay's, to the last bit. */
START_TEST(segments_price_and_time_are_the_replayed_ones)
{
    ck_rng rng;
    ck_rng_seed(&rng, 1604);
    for (unsigned k = 0; k < 400; k++) {
        ck_chain c;
        size_t L = 1 + k % 50;
        ck_assert_int_eq(ck_chaingen_random(&c, L, 1 + k % 40, 10, &rng, NULL), CK_OK);
        ck_segments_pricer *pricer;
        ck_assert_int_eq(ck_segments_pricer_new(&c, &pricer, NULL), CK_OK);
        size_t starts[50];
        for (int trial = 0; trial < 20; trial++) {
            size_t n = 1;
            starts[0] = 0;
            for (size_t i = 1; i < L; i++)
                if (ck_rng_below(&rng, 1 + (uint64_t)trial % 5) == 0)
                    starts[n++] = i;
            ck_schedule s = {0};
            REQUIRE(ck_segments_of(&c, starts, n, &s, NULL) == CK_OK, "segments");
            ck_replay r = replay_of(&c, &s);
            REQUIRE(ck_segments_peak(pricer, starts, n) == r.peak_bytes, "chain %u: priced %llu, replayed %llu",
                    k, (unsigned long long)ck_segments_peak(pricer, starts, n),
                    (unsigned long long)r.peak_bytes);
            REQUIRE(ck_segments_time(&c, starts, n) == r.time, "chain %u: time %.17g, replayed %.17g",
                          k, ck_segments_time(&c, starts, n), r.time);
            ck_schedule_free(&s);
        }
        ck_segments_pricer_free(pricer);
        ck_chain_free(&c);
    }
}
END_TEST

static Suite *oracles_suite(void)
{
    Suite *s = suite_create("planner_oracles");
    TCase *tc = tcase_create("planner_oracles");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, revolve_split_is_the_smallest_minimiser);
    tcase_add_test(tc, revolve_price_is_the_replayed_peak);
    tcase_add_test(tc, revolve_price_saturates_where_sums_overflow);
    tcase_add_test(tc, revolve_price_is_the_replayed_peak_on_long_chains);
    tcase_add_test(tc, revolve_plans_as_the_reference);
    tcase_add_test(tc, segments_price_and_time_are_the_replayed_ones);
    tcase_add_test(tc, chen_plans_as_the_reference);
    tcase_add_test(tc, chen_plans_as_the_reference_on_equal_times);
    tcase_add_test(tc, chen_plans_as_the_reference_past_2_to_the_53);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(oracles_suite)
