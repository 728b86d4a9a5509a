/* Properties that hold across planners, checked by replay on random chains. */
#include "planner/planner.h"

#include "tests/unit/chaingen.h"
#include "tests/unit/plan_run.h"
#include "tests/unit/check_main.h"

/* Plans c with p under budget; returns whether it fit, with the replayed time in *time. */
static bool plan_time(const ck_chain *c, const ck_planner *p, uint64_t budget, double *time)
{
    ck_planner_opts opts = {.slots = (uint32_t)(budget + 1)}; /* one byte per slot: dp is exact */
    ck_plan_result res;
    ck_replay r;
    uint64_t min_budget = 0;
    ck_err err;
    int rc = ck_planner_run(c, p, budget, &opts, &res, &r, &min_budget, &err);
    ck_assert_msg(rc == CK_OK || rc == CK_ERR_INFEASIBLE, "%s: %s", p->name, err.msg);
    if (rc == CK_OK) {
        ck_assert_uint_le(r.peak_bytes, budget);
        *time = r.time;
    } else {
        ck_assert_uint_gt(min_budget, budget);
    }
    ck_planner_result_free(&res);
    return rc == CK_OK;
}

/* Every plan of sqrt, chen, revolve and every is a persistent schedule, so wherever one of
 * them fits, dp fits too and is at least as fast. */
START_TEST(dp_is_never_slower_than_the_others)
{
    const ck_planner *others[] = {&ck_planner_sqrt, &ck_planner_chen, &ck_planner_revolve,
                                  &ck_planner_every};
    ck_rng rng;
    ck_rng_seed(&rng, 2019);
    for (int trial = 0; trial < 60; trial++) {
        ck_chain c;
        ck_assert_int_eq(ck_chaingen_random(&c, 1 + (size_t)(trial % 12), 9, 10, &rng, NULL), CK_OK);
        uint64_t top = ck_test_baseline(&c).peak_bytes;
        for (uint64_t budget = 0; budget <= top; budget++) {
            double dp_time = 0;
            bool dp_fits = plan_time(&c, &ck_planner_dp, budget, &dp_time);
            for (size_t p = 0; p < sizeof others / sizeof others[0]; p++) {
                double t;
                if (!plan_time(&c, others[p], budget, &t))
                    continue;
                ck_assert_msg(dp_fits, "%s fits budget %llu where dp does not", others[p]->name,
                              (unsigned long long)budget);
                ck_assert_msg(dp_time <= t * (1 + 1e-12), "budget %llu: dp %g slower than %s %g",
                              (unsigned long long)budget, dp_time, others[p]->name, t);
            }
        }
        ck_chain_free(&c);
    }
}
END_TEST

/* Every planner's schedule is valid and within budget at every budget from its minimum
 * to the baseline's peak, and the minimum it reports is exactly where it starts to fit. */
START_TEST(every_planner_fits_from_its_minimum_up)
{
    ck_rng rng;
    ck_rng_seed(&rng, 42);
    for (int trial = 0; trial < 40; trial++) {
        ck_chain c;
        ck_assert_int_eq(ck_chaingen_random(&c, 1 + (size_t)(trial % 10), 7, 10, &rng, NULL), CK_OK);
        uint64_t top = ck_test_baseline(&c).peak_bytes;
        for (const ck_planner *const *p = ck_planners; *p; p++) {
            ck_planner_opts opts = {.slots = CK_DEFAULT_SLOTS};
            ck_plan_result res;
            ck_replay r;
            uint64_t min_budget = 0;
            int rc = ck_planner_run(&c, *p, 0, &opts, &res, &r, &min_budget, NULL);
            ck_planner_result_free(&res);
            if (rc == CK_OK) /* the baseline fits in nothing: all sizes are zero */
                min_budget = 0;
            else
                ck_assert_int_eq(rc, CK_ERR_INFEASIBLE);
            if (min_budget > 0) {
                double t;
                ck_assert_msg(!plan_time(&c, *p, min_budget - 1, &t), "%s fits below its minimum",
                              (*p)->name);
            }
            for (uint64_t budget = min_budget; budget <= top; budget++) {
                double t;
                ck_assert_msg(plan_time(&c, *p, budget, &t), "%s: no plan at %llu >= minimum %llu",
                              (*p)->name, (unsigned long long)budget, (unsigned long long)min_budget);
            }
        }
        ck_chain_free(&c);
    }
}
END_TEST

/* Partitioned checkpoints (planner/action.h): planners plan whole ones, and the search
 * around them (ck_planner_run) returns schedules whose replay with the shards fits the
 * budget, the replay it reports; when none fits, the minimum it reports is a budget at
 * which it finds one. Random chains, random shards of random stages' inputs. */
START_TEST(partitioned_plans_fit_and_their_minimum_plans)
{
    ck_rng rng;
    ck_rng_seed(&rng, 2022);
    for (int trial = 0; trial < 30; trial++) {
        ck_chain c;
        ck_assert_int_eq(ck_chaingen_random(&c, 2 + (size_t)(trial % 8), 9, 10, &rng, NULL), CK_OK);
        for (size_t i = 0; i < c.n_stages; i++)
            if (ck_chain_x_bytes(&c, i) && ck_rng_below(&rng, 2))
                c.stages[i].shard_bytes = 1 + ck_rng_below(&rng, ck_chain_x_bytes(&c, i));
        uint64_t top = ck_test_baseline(&c).peak_bytes;
        for (const ck_planner *const *p = ck_planners; *p; p++)
            for (uint64_t budget = 0; budget <= top; budget++) {
                ck_planner_opts opts = {.slots = CK_DEFAULT_SLOTS};
                ck_plan_result res;
                ck_replay r, again;
                uint64_t min_budget = 0;
                ck_err err;
                int rc = ck_planner_run(&c, *p, budget, &opts, &res, &r, &min_budget, &err);
                ck_assert_msg(rc == CK_OK || rc == CK_ERR_INFEASIBLE, "%s: %s", (*p)->name, err.msg);
                if (rc == CK_OK) {
                    ck_assert_int_eq(ck_schedule_replay(&c, &res.schedule, &again, NULL, NULL, NULL), CK_OK);
                    ck_assert_uint_eq(again.peak_bytes, r.peak_bytes);
                    ck_assert_msg(r.peak_bytes <= budget, "%s at %llu: %llu", (*p)->name,
                                  (unsigned long long)budget, (unsigned long long)r.peak_bytes);
                } else {
                    ck_assert_uint_gt(min_budget, budget);
                    ck_plan_result at_min;
                    uint64_t ignored;
                    ck_assert_msg(ck_planner_run(&c, *p, min_budget, &opts, &at_min, &again, &ignored,
                                                 &err) == CK_OK,
                                  "%s: no plan at its minimum %llu", (*p)->name,
                                  (unsigned long long)min_budget);
                    ck_planner_result_free(&at_min);
                }
                ck_planner_result_free(&res);
            }
        ck_chain_free(&c);
    }
}
END_TEST

static Suite *planners_suite(void)
{
    Suite *s = suite_create("planners");
    TCase *tc = tcase_create("planners");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, dp_is_never_slower_than_the_others);
    tcase_add_test(tc, every_planner_fits_from_its_minimum_up);
    tcase_add_test(tc, partitioned_plans_fit_and_their_minimum_plans);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(planners_suite)
