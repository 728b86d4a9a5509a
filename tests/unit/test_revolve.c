#include "planner/planner.h"
#include "planner/revolve.h"
#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"
#include "tests/unit/plan_run.h"

#define MAX_N 60
#define MAX_C 8

/* p(n, c) by its recursion, minimising over every split. */
static void advances_by_recursion(uint64_t p[MAX_N + 1][MAX_C + 1])
{
    for (uint64_t c = 1; c <= MAX_C; c++)
        p[1][c] = 0;
    for (uint64_t n = 2; n <= MAX_N; n++) {
        p[n][1] = n * (n - 1) / 2;
        for (uint64_t c = 2; c <= MAX_C; c++) {
            p[n][c] = UINT64_MAX;
            for (uint64_t m = 1; m < n; m++) {
                uint64_t cost = m + p[n - m][c - 1] + p[m][c];
                if (cost < p[n][c])
                    p[n][c] = cost;
            }
        }
    }
}

START_TEST(closed_form_matches_recursion)
{
    static uint64_t p[MAX_N + 1][MAX_C + 1];
    advances_by_recursion(p);
    for (uint64_t n = 1; n <= MAX_N; n++)
        for (uint64_t c = 1; c <= MAX_C; c++) {
            ck_assert_msg(ck_revolve_advances(n, c) == p[n][c], "p(%llu, %llu): %llu, expected %llu",
                          (unsigned long long)n, (unsigned long long)c,
                          (unsigned long long)ck_revolve_advances(n, c), (unsigned long long)p[n][c]);
            if (n < 2 || c < 2)
                continue;
            /* The split is the smallest m that reaches p(n, c). */
            uint64_t m = ck_revolve_split(n, c);
            ck_assert(m >= 1 && m < n);
            ck_assert_uint_eq(m + p[n - m][c - 1] + p[m][c], p[n][c]);
            for (uint64_t k = 1; k < m; k++)
                ck_assert_uint_gt(k + p[n - k][c - 1] + p[k][c], p[n][c]);
        }
    /* Known values: 10 stages, 3 snapshots: t = 2 (C(5,3) = 10), 2*10 - C(5,4) = 15. */
    ck_assert_uint_eq(ck_revolve_advances(10, 3), 15);
    ck_assert_uint_eq(ck_revolve_advances(100000, 1), 4999950000ULL);
    ck_assert_uint_eq(ck_revolve_advances(100000, 100000), 99999);
}
END_TEST

static ck_replay replay_snapshots(const ck_chain *c, uint64_t snapshots)
{
    ck_schedule s = {0};
    ck_replay replay;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_revolve_schedule(c, snapshots, &s, &err), CK_OK);
    ck_assert_msg(ck_schedule_replay(c, &s, &replay, NULL, NULL, &err) == CK_OK, "%s", err.msg);
    ck_schedule_free(&s);
    return replay;
}

START_TEST(schedules_have_the_binomial_counts)
{
    for (size_t L = 1; L <= 40; L++) {
        ck_chain c;
        ck_err err = {{0}};
        ck_assert_int_eq(ck_chaingen_uniform(&c, L, 1, &err), CK_OK);
        for (uint64_t snapshots = 1; snapshots <= L + 2; snapshots++) {
            ck_replay r = replay_snapshots(&c, snapshots);
            ck_assert_uint_eq(r.count[CK_F_ALL], L);
            ck_assert_uint_eq(r.count[CK_B], L);
            ck_assert_uint_eq(r.count[CK_LOSS], 1);
            ck_assert_msg(r.count[CK_F_CK] + r.count[CK_F_NONE] == ck_revolve_advances(L, snapshots),
                          "L %zu, %llu snapshots: %zu advances", L, (unsigned long long)snapshots,
                          r.count[CK_F_CK] + r.count[CK_F_NONE]);
            /* Uniform 1-byte tensors: the snapshots, the state being reversed and the
             * backward's x̄_{i+1}, y_{i+1} and y_i. */
            ck_assert_uint_le(r.peak_bytes, snapshots + 4);
        }
        ck_chain_free(&c);
    }
}
END_TEST

/* On random chains at every budget: the schedule fits, its number of snapshots is the
 * largest that fits, and below every count's peak the planner reports the smallest. */
START_TEST(takes_the_most_snapshots_that_fit)
{
    ck_rng rng;
    ck_rng_seed(&rng, 799);
    for (unsigned k = 0; k < 150; k++) {
        ck_chain c;
        ck_err err = {{0}};
        size_t L = 1 + k % 12;
        ck_assert_int_eq(ck_chaingen_random(&c, L, 10, 10, &rng, &err), CK_OK);
        uint64_t peaks[13], least = UINT64_MAX;
        for (size_t s = 1; s <= L; s++) {
            peaks[s] = replay_snapshots(&c, s).peak_bytes;
            if (peaks[s] < least)
                least = peaks[s];
        }
        uint64_t top = ck_test_baseline(&c).peak_bytes + 2;
        for (uint64_t budget = 0; budget <= top; budget++) {
            ck_plan_result r;
            ck_replay replay;
            uint64_t min_budget = 0;
            int rc = ck_test_plan(&ck_planner_revolve, &c, budget, 500, &r, &replay, &min_budget,
                                  &err);
            if (budget < least) {
                ck_assert_int_eq(rc, CK_ERR_INFEASIBLE);
                ck_assert_uint_eq(min_budget, least);
                continue;
            }
            ck_assert_msg(rc == CK_OK, "chain %u budget %llu: %s", k, (unsigned long long)budget,
                          err.msg);
            ck_assert(replay.peak_bytes <= budget);
            long s = r.snapshots;
            ck_assert(s >= 1 && (size_t)s <= L);
            ck_assert_uint_eq(replay.peak_bytes, peaks[s]);
            for (size_t more = (size_t)s + 1; more <= L; more++)
                ck_assert_uint_gt(peaks[more], budget);
            ck_schedule_free(&r.schedule);
        }
        ck_chain_free(&c);
    }
}
END_TEST

START_TEST(uniform_chain_minimum_is_one_snapshot)
{
    ck_chain c;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chaingen_uniform(&c, 20, 4, &err), CK_OK);
    uint64_t one = replay_snapshots(&c, 1).peak_bytes;
    ck_plan_result r;
    ck_replay replay;
    uint64_t min_budget = 0;
    ck_assert_int_eq(ck_test_plan(&ck_planner_revolve, &c, one - 1, 500, &r, &replay, &min_budget,
                                  &err),
                     CK_ERR_INFEASIBLE);
    ck_assert_uint_eq(min_budget, one);
    ck_assert_int_eq(ck_test_plan(&ck_planner_revolve, &c, one, 500, &r, &replay, &min_budget, &err),
                     CK_OK);
    ck_assert_int_eq(r.snapshots, 1);
    ck_schedule_free(&r.schedule);
    ck_assert_int_eq(ck_test_plan(&ck_planner_revolve, &c, UINT64_MAX, 500, &r, &replay,
                                  &min_budget, &err),
                     CK_OK);
    ck_assert_int_eq(r.snapshots, 20);
    ck_assert_uint_eq(replay.count[CK_F_CK] + replay.count[CK_F_NONE], 19);
    ck_schedule_free(&r.schedule);
    ck_chain_free(&c);
}
END_TEST

/* With one snapshot, stage 0 is recomputed once with y_2 held (while reversing stage 1);
 * with two, x_1 becomes a snapshot and that never happens. A huge forward temporary in
 * stage 0 and a large x_2 make two snapshots need less memory than one, so the minimum
 * budget is not always the one-snapshot peak. */
START_TEST(more_snapshots_can_need_less_memory)
{
    ck_chain c;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chain_alloc(&c, "two-beats-one", 3, &err), CK_OK);
    c.input_bytes = 1;
    c.stages[0] = (ck_stage){.fwd_time = 1, .bwd_time = 1, .out_bytes = 1, .saved_bytes = 1,
                             .fwd_tmp_bytes = 100};
    c.stages[1] = (ck_stage){.fwd_time = 1, .bwd_time = 1, .out_bytes = 10, .saved_bytes = 10};
    c.stages[2] = (ck_stage){.fwd_time = 1, .bwd_time = 1, .out_bytes = 1, .saved_bytes = 1};
    uint64_t one = replay_snapshots(&c, 1).peak_bytes, two = replay_snapshots(&c, 2).peak_bytes;
    ck_assert_uint_eq(one, 1 + 1 + 10 + 100); /* F_ck 0 holding x_0, x_1, y_2 */
    ck_assert_uint_lt(two, one);
    ck_plan_result r;
    ck_replay replay;
    uint64_t min_budget = 0;
    ck_assert_int_eq(ck_test_plan(&ck_planner_revolve, &c, two - 1, 500, &r, &replay, &min_budget,
                                  &err),
                     CK_ERR_INFEASIBLE);
    ck_assert_uint_eq(min_budget, two);
    ck_assert_int_eq(ck_test_plan(&ck_planner_revolve, &c, two, 500, &r, &replay, &min_budget, &err),
                     CK_OK);
    ck_assert_int_ge(r.snapshots, 2);
    ck_schedule_free(&r.schedule);
    ck_chain_free(&c);
}
END_TEST

static Suite *revolve_suite(void)
{
    Suite *s = suite_create("revolve");
    TCase *tc = tcase_create("revolve");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, closed_form_matches_recursion);
    tcase_add_test(tc, schedules_have_the_binomial_counts);
    tcase_add_test(tc, takes_the_most_snapshots_that_fit);
    tcase_add_test(tc, uniform_chain_minimum_is_one_snapshot);
    tcase_add_test(tc, more_snapshots_can_need_less_memory);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(revolve_suite)
