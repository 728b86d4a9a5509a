/* Properties that hold across planners, checked by replay on random chains. */
#include "planner/planner.h"

#include <stdlib.h>

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

/* What a search (ck_planner_run_by) promises at one budget: a plan whose replay by `exact`
 * (NULL: the chain's) is the one reported and fits the budget; or, when none fits, a
 * minimum above the budget at which a plan is found and one byte below which none is.
 * With an exact replayer, the plan is never slower than planning at the budget on the
 * chain's bound. */
static void search_holds(const ck_chain *c, const ck_schedule_replayer *exact, const ck_planner *p,
                         uint64_t budget)
{
    ck_planner_opts opts = {.slots = CK_DEFAULT_SLOTS};
    ck_plan_result res, other;
    ck_replay r, again;
    uint64_t min_budget = 0, ignored;
    ck_err err;
    int rc = ck_planner_run_by(c, exact, p, budget, &opts, &res, &r, &min_budget, &err);
    ck_assert_msg(rc == CK_OK || rc == CK_ERR_INFEASIBLE, "%s: %s", p->name, err.msg);
    if (rc == CK_OK) {
        ck_assert_int_eq(ck_schedule_replay_by(exact, c, &res.schedule, &again, NULL), CK_OK);
        ck_assert_uint_eq(again.peak_bytes, r.peak_bytes);
        ck_assert_msg(r.peak_bytes <= budget, "%s at %llu: %llu", p->name, (unsigned long long)budget,
                      (unsigned long long)r.peak_bytes);
        if (exact && ck_planner_run(c, p, budget, &opts, &other, &again, &ignored, NULL) == CK_OK)
            ck_assert_msg(r.time <= again.time, "%s at %llu: %g, on the chain's bound %g", p->name,
                          (unsigned long long)budget, r.time, again.time);
        ck_planner_result_free(&other);
    } else {
        ck_assert_uint_gt(min_budget, budget);
        ck_assert_msg(ck_planner_run_by(c, exact, p, min_budget, &opts, &other, &again, &ignored, &err) ==
                          CK_OK, "%s: no plan at its minimum %llu", p->name, (unsigned long long)min_budget);
        ck_planner_result_free(&other);
        ck_assert_msg(ck_planner_run_by(c, exact, p, min_budget - 1, &opts, &other, &again, &ignored,
                                        &err) == CK_ERR_INFEASIBLE,
                      "%s: a plan one byte below its minimum %llu", p->name, (unsigned long long)min_budget);
    }
    ck_planner_result_free(&res);
}

/* Partitioned checkpoints (planner/action.h): planners plan whole ones, and the search
 * around them holds its schedules to their replay with the shards. Random chains, random
 * shards of random stages' inputs. */
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
            for (uint64_t budget = 0; budget <= top; budget++)
                search_holds(&c, NULL, *p, budget);
        ck_chain_free(&c);
    }
}
END_TEST

/* An exact replay of which the chain's is a bound, as a model's program is: the chain's,
 * but a saving forward's peak is what it leaves held, without its transient. */
static int without_saving_transients(const void *ctx, const ck_schedule *s, ck_replay *out, ck_err *err)
{
    const ck_chain *c = ctx;
    uint64_t *live = malloc((s->n + 1) * sizeof *live), *peak = malloc((s->n + 1) * sizeof *peak);
    ck_assert(live && peak);
    int rc = ck_schedule_replay(c, s, out, live, peak, err);
    out->peak_bytes = c->input_bytes;
    for (size_t k = 0; k < s->n && rc == CK_OK; k++) {
        uint64_t at = s->actions[k].kind == CK_F_ALL ? live[k] : peak[k];
        if (at > out->peak_bytes) {
            out->peak_bytes = at;
            out->peak_op = k;
        }
    }
    free(live);
    free(peak);
    return rc;
}

/* Planning on the chain's bound and holding plans to an exact replay: every planner's plan
 * at every budget fits by the exact replay and is no slower than the bound's, and the
 * minimum is exact (random chains, with and without variants). */
START_TEST(searched_plans_fit_their_exact_replay)
{
    ck_rng rng;
    ck_rng_seed(&rng, 23);
    for (int trial = 0; trial < 30; trial++) {
        ck_chain c;
        ck_assert_int_eq(ck_chaingen_random(&c, 2 + (size_t)(trial % 8), 9, 10, &rng, NULL), CK_OK);
        if (trial % 2)
            ck_assert_int_eq(ck_chaingen_variants(&c, 9, 10, &rng, NULL), CK_OK);
        ck_schedule_replayer exact = {without_saving_transients, &c};
        uint64_t top = ck_test_baseline(&c).peak_bytes;
        for (const ck_planner *const *p = ck_planners; *p; p++)
            for (uint64_t budget = 0; budget <= top; budget++)
                search_holds(&c, &exact, *p, budget);
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
    tcase_add_test(tc, searched_plans_fit_their_exact_replay);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(planners_suite)
