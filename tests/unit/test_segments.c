/* The segment schedules of Chen et al. and the two planners built on them. */
#include "planner/segments.h"

#include <math.h>
#include <stdlib.h>

#include "planner/planner.h"
#include "tests/unit/chaingen.h"
#include "tests/unit/plan_run.h"
#include "tests/unit/check_main.h"

static ck_replay replay_ok(const ck_chain *c, const ck_schedule *s)
{
    ck_replay r;
    ck_err err;
    ck_assert_msg(ck_schedule_replay(c, s, &r, NULL, NULL, &err) == CK_OK, "%s", err.msg);
    return r;
}

/* Every way to cut chains of up to 7 stages gives a valid schedule that runs each stage
 * with F_all once, keeps each segment input with one F_ck, and recomputes exactly the
 * stages before the last segment once. */
START_TEST(every_segmentation_is_valid_and_recomputes_once)
{
    ck_rng rng;
    ck_rng_seed(&rng, 7);
    for (size_t L = 1; L <= 7; L++) {
        ck_chain c;
        ck_assert_int_eq(ck_chaingen_random(&c, L, 6, 10, &rng, NULL), CK_OK);
        for (unsigned mask = 0; mask < 1u << (L - 1); mask++) {
            size_t starts[8], n = 0;
            starts[n++] = 0;
            for (size_t i = 1; i < L; i++)
                if (mask & 1u << (i - 1))
                    starts[n++] = i;
            ck_schedule s = {0};
            ck_assert_int_eq(ck_segments_of(&c, starts, n, &s, NULL), CK_OK);
            ck_replay r = replay_ok(&c, &s);
            size_t recomputed = starts[n - 1];
            double extra = 0;
            for (size_t i = 0; i < recomputed; i++)
                extra += c.stages[i].fwd_time;
            ck_assert_uint_eq(r.count[CK_F_ALL], L);
            ck_assert_uint_eq(r.count[CK_F_CK], n - 1);
            ck_assert_uint_eq(r.count[CK_F_CK] + r.count[CK_F_NONE], recomputed);
            ck_assert_uint_eq(r.count[CK_B], L);
            ck_assert_double_eq_tol(r.time, ck_test_baseline(&c).time + extra, 1e-9);
            ck_schedule_free(&s);
        }
        ck_chain_free(&c);
    }
}
END_TEST

/* Uniform chain, 16 stages of 1 byte: sqrt cuts 4 segments of 4 and keeps x_0, x_4, x_8,
 * x_12. The first forward then holds those 4 bytes plus the last segment's x̄_13..x̄_16
 * (8 bytes); the loss adds y_16 (9) and B 15 adds y_15: a peak of 10. Recomputing the
 * first three segments costs 12 extra forward steps. */
START_TEST(sqrt_cuts_equal_segments)
{
    ck_chain c;
    ck_assert_int_eq(ck_chaingen_uniform(&c, 16, 1, NULL), CK_OK);
    ck_plan_result res;
    ck_planner_result_init(&res);
    uint64_t min_budget = 0;
    ck_assert_int_eq(ck_planner_sqrt.plan(&c, 1000, NULL, &res, &min_budget, NULL), CK_OK);
    ck_assert_int_eq(res.segments, 4);
    ck_replay r = replay_ok(&c, &res.schedule);
    ck_assert_uint_eq(r.count[CK_F_CK], 3);
    ck_assert_uint_eq(r.count[CK_F_NONE], 9);
    ck_assert_double_eq(r.time, 32 + 12);
    ck_assert_uint_eq(r.peak_bytes, 10);
    ck_planner_result_free(&res);
    ck_assert_int_eq(ck_planner_sqrt.plan(&c, 9, NULL, &res, &min_budget, NULL), CK_ERR_INFEASIBLE);
    ck_assert_uint_eq(min_budget, 10);
    ck_planner_result_free(&res);
    ck_chain_free(&c);
}
END_TEST

/* The oracle for chen: Algorithm 3 written out again for every integer per-segment budget
 * (sizes are integers, so these cover every segmentation it can produce), replayed. */
static void best_greedy_by_oracle(const ck_chain *c, uint64_t budget, bool *found, double *time,
                                  uint64_t *lowest_peak)
{
    uint64_t total = 0;
    for (size_t i = 0; i < c->n_stages; i++)
        total += c->stages[i].saved_bytes;
    *found = false;
    *lowest_peak = UINT64_MAX;
    for (long b = -1; b <= (long)total; b++) {
        size_t starts[16], n = 0;
        long sum = 0;
        starts[n++] = 0;
        for (size_t i = 0; i + 1 < c->n_stages; i++) {
            sum += (long)c->stages[i].saved_bytes;
            if (sum > b) {
                starts[n++] = i + 1;
                sum = 0;
            }
        }
        ck_schedule s = {0};
        ck_assert_int_eq(ck_segments_of(c, starts, n, &s, NULL), CK_OK);
        ck_replay r = replay_ok(c, &s);
        ck_schedule_free(&s);
        if (r.peak_bytes < *lowest_peak)
            *lowest_peak = r.peak_bytes;
        if (r.peak_bytes <= budget && (!*found || r.time < *time)) {
            *found = true;
            *time = r.time;
        }
    }
}

START_TEST(chen_finds_the_best_greedy_segmentation)
{
    ck_rng rng;
    ck_rng_seed(&rng, 2016);
    for (int trial = 0; trial < 150; trial++) {
        ck_chain c;
        ck_assert_int_eq(ck_chaingen_random(&c, 1 + (size_t)(trial % 9), 8, 10, &rng, NULL), CK_OK);
        uint64_t top = ck_test_baseline(&c).peak_bytes;
        for (uint64_t budget = 0; budget <= top; budget++) {
            bool found;
            double want_time;
            uint64_t want_min;
            best_greedy_by_oracle(&c, budget, &found, &want_time, &want_min);
            ck_plan_result res;
            ck_planner_result_init(&res);
            uint64_t min_budget = 0;
            int rc = ck_planner_chen.plan(&c, budget, NULL, &res, &min_budget, NULL);
            if (!found) {
                ck_assert_int_eq(rc, CK_ERR_INFEASIBLE);
                ck_assert_uint_eq(min_budget, want_min);
            } else {
                ck_assert_int_eq(rc, CK_OK);
                ck_replay r = replay_ok(&c, &res.schedule);
                ck_assert_uint_le(r.peak_bytes, budget);
                ck_assert_double_eq_tol(r.time, want_time, 1e-9);
            }
            ck_planner_result_free(&res);
        }
        ck_chain_free(&c);
    }
}
END_TEST

/* Through ck_planner_run, a budget at or above the baseline's peak gives the baseline,
 * whatever the planner; one byte less makes every planner plan. */
START_TEST(driver_returns_baseline_when_it_fits)
{
    ck_chain c;
    ck_assert_int_eq(ck_chaingen_uniform(&c, 9, 4, NULL), CK_OK);
    for (size_t i = 0; i < c.n_stages; i++)
        c.stages[i].saved_bytes = 8;
    ck_schedule base = {0};
    ck_assert_int_eq(ck_schedule_baseline(&c, &base, NULL), CK_OK);
    ck_replay b = replay_ok(&c, &base);
    ck_planner_opts opts = {.slots = CK_DEFAULT_SLOTS};
    const ck_planner *mine[] = {&ck_planner_sqrt, &ck_planner_chen, &ck_planner_none};
    for (int p = 0; p < 3; p++) {
        ck_plan_result res;
        ck_replay r;
        uint64_t min_budget = 0;
        ck_assert_int_eq(ck_planner_run(&c, mine[p], b.peak_bytes, &opts, &res, &r, &min_budget, NULL), CK_OK);
        ck_assert_uint_eq(res.schedule.n, base.n);
        ck_assert_double_eq(r.time, b.time);
        ck_planner_result_free(&res);
        int rc = ck_planner_run(&c, mine[p], b.peak_bytes - 1, &opts, &res, &r, &min_budget, NULL);
        if (mine[p] == &ck_planner_none) {
            ck_assert_int_eq(rc, CK_ERR_INFEASIBLE);
            ck_assert_uint_eq(min_budget, b.peak_bytes);
        } else {
            ck_assert_int_eq(rc, CK_OK);
            ck_assert_uint_lt(r.peak_bytes, b.peak_bytes);
            ck_assert(r.time > b.time);
        }
        ck_planner_result_free(&res);
    }
    ck_schedule_free(&base);
    ck_chain_free(&c);
}
END_TEST

static Suite *segments_suite(void)
{
    Suite *s = suite_create("segments");
    TCase *tc = tcase_create("segments");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, every_segmentation_is_valid_and_recomputes_once);
    tcase_add_test(tc, sqrt_cuts_equal_segments);
    tcase_add_test(tc, chen_finds_the_best_greedy_segmentation);
    tcase_add_test(tc, driver_returns_baseline_when_it_fits);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(segments_suite)
