#include <math.h>
#include <string.h>

#include "planner/plan_dp.h"
#include "planner/planner.h"
#include "tests/unit/brute.h"
#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"
#include "tests/unit/plan_run.h"

static bool same_time(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(1, fmax(fabs(a), fabs(b)));
}

/* Checks dp against the brute force on c at every budget from 0 to a little above the
 * store-everything peak, with enough slots for 1-byte units. */
static void check_exact(const ck_chain *c, unsigned chain_no)
{
    ck_err err = {{0}};
    ck_brute_set all;
    ck_assert_msg(ck_brute_enumerate(c, &all, &err) == CK_OK, "%s", err.msg);
    uint64_t least = ck_brute_min_peak(&all);
    uint64_t top = ck_test_baseline(c).peak_bytes + 3;
    for (uint64_t budget = 0; budget <= top; budget++) {
        ck_plan_result r;
        ck_replay replay;
        uint64_t min_budget = 0;
        double best = 0;
        bool feasible = ck_brute_best(&all, budget, &best);
        int rc = ck_test_plan(&ck_planner_dp, c, budget, (uint32_t)budget + 1, &r, &replay,
                              &min_budget, &err);
        if (feasible) {
            ck_assert_msg(rc == CK_OK, "chain %u budget %llu: %s", chain_no,
                          (unsigned long long)budget, err.msg);
            ck_assert_msg(replay.peak_bytes <= budget, "chain %u budget %llu: peak %llu", chain_no,
                          (unsigned long long)budget, (unsigned long long)replay.peak_bytes);
            ck_assert_msg(same_time(replay.time, best), "chain %u budget %llu: dp %.17g, brute %.17g",
                          chain_no, (unsigned long long)budget, replay.time, best);
            ck_assert_uint_eq(r.memory_unit, 1);
        } else {
            ck_assert_msg(rc == CK_ERR_INFEASIBLE, "chain %u budget %llu: status %d", chain_no,
                          (unsigned long long)budget, rc);
            ck_assert_uint_eq(min_budget, least);
            ck_assert_uint_eq(r.schedule.n, 0);
        }
        ck_schedule_free(&r.schedule);
    }
    ck_brute_free(&all);
}

START_TEST(matches_brute_force_on_random_chains)
{
    ck_rng rng;
    ck_rng_seed(&rng, 2019);
    for (unsigned k = 0; k < 360; k++) {
        ck_chain c;
        ck_err err = {{0}};
        ck_assert_int_eq(ck_chaingen_random(&c, 1 + k % 6, 10, 10, &rng, &err), CK_OK);
        check_exact(&c, k);
        ck_chain_free(&c);
    }
}
END_TEST

/* Stages with variants (selective recompute): dp's joint choice of variant and checkpoints
 * is the brute force's optimum over every persistent schedule with every variant, at every
 * budget. The variants matter: on some chains they reach a time or a peak that no schedule
 * of the same chain without them reaches, so a dp or brute force that ignored them would
 * disagree. */
START_TEST(matches_brute_force_with_variants)
{
    ck_rng rng;
    ck_rng_seed(&rng, 2023);
    unsigned better = 0;
    for (unsigned k = 0; k < 200; k++) {
        ck_chain c;
        ck_err err = {{0}};
        ck_assert_int_eq(ck_chaingen_random(&c, 1 + k % 4, 10, 10, &rng, &err), CK_OK);
        ck_assert_msg(ck_chaingen_variants(&c, 10, 10, &rng, &err) == CK_OK, "%s", err.msg);
        check_exact(&c, k);
        ck_brute_set with, without;
        ck_assert_int_eq(ck_brute_enumerate(&c, &with, &err), CK_OK);
        for (size_t i = 0; i < c.n_stages; i++)
            ck_assert_int_eq(ck_chain_set_variants(&c, i, NULL, 0, &err), CK_OK);
        ck_assert_int_eq(ck_brute_enumerate(&c, &without, &err), CK_OK);
        uint64_t top = ck_test_baseline(&c).peak_bytes;
        for (uint64_t budget = 0; budget <= top; budget++) {
            double a = INFINITY, b = INFINITY;
            ck_brute_best(&with, budget, &a);
            ck_brute_best(&without, budget, &b);
            ck_assert(a <= b);
            better += a < b;
        }
        ck_brute_free(&with);
        ck_brute_free(&without);
        ck_chain_free(&c);
    }
    ck_assert_uint_gt(better, 100);
}
END_TEST

/* dp never replays while it fills its tables: its peaks are closed forms of the sizes. Each
 * must be what applying the actions one by one (planner/action, through the replay) gives,
 * whatever the chain: the smallest peak it claims is the replayed peak of the schedule it
 * builds for it. Short chains reach every shape; tall temporaries and zero sizes are in the
 * generator's mix. */
START_TEST(closed_form_peaks_match_the_actions)
{
    ck_rng rng;
    ck_rng_seed(&rng, 20261201);
    for (unsigned n = 0; n < 400; n++) {
        ck_chain c;
        ck_err err = {{0}};
        size_t L = 1 + (size_t)ck_rng_below(&rng, 14);
        ck_assert_msg(ck_chaingen_random(&c, L, 1 + ck_rng_below(&rng, 40), 5, &rng, &err) == CK_OK,
                      "%s", err.msg);
        if (n % 2) /* and with variants, whose sizes enter the same closed forms */
            ck_assert_msg(ck_chaingen_variants(&c, 40, 5, &rng, &err) == CK_OK, "%s", err.msg);
        ck_schedule s = {0};
        uint64_t claimed = 0;
        ck_replay replay;
        ck_assert_msg(ck_plan_dp_min_peak(&c, &claimed, &s, &err) == CK_OK, "%s", err.msg);
        ck_assert_msg(ck_schedule_replay(&c, &s, &replay, NULL, NULL, &err) == CK_OK, "chain %u: %s",
                      n, err.msg);
        ck_assert_msg(replay.peak_bytes == claimed, "chain %u (L %zu): dp claims %llu, the actions give %llu",
                      n, L, (unsigned long long)claimed, (unsigned long long)replay.peak_bytes);
        ck_schedule_free(&s);
        ck_chain_free(&c);
    }
}
END_TEST

static void expect_plan(const ck_chain *c, uint64_t budget, double time)
{
    ck_plan_result r;
    ck_replay replay;
    uint64_t min_budget = 0;
    ck_err err = {{0}};
    ck_assert_msg(ck_test_plan(&ck_planner_dp, c, budget, 500, &r, &replay, &min_budget, &err) ==
                      CK_OK, "%s", err.msg);
    ck_assert(replay.peak_bytes <= budget);
    ck_assert_double_eq(replay.time, time);
    ck_schedule_free(&r.schedule);
}

static void expect_infeasible(const ck_chain *c, uint64_t budget, uint64_t least)
{
    ck_plan_result r;
    ck_replay replay;
    uint64_t min_budget = 0;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_test_plan(&ck_planner_dp, c, budget, 500, &r, &replay, &min_budget, &err),
                     CK_ERR_INFEASIBLE);
    ck_assert_uint_eq(min_budget, least);
    ck_assert_msg(strstr(err.msg, "smallest peak"), "%s", err.msg);
}

/* hetero-3 by hand. B 0 always holds x_0 (1), x̄_1 (5), y_1 (2) and the new y_0 (1) plus its
 * 5-byte temporary: 14 bytes in every schedule, as much as the store-everything peak
 * (F_all: 7, 9, 10; loss 11; B 2: 12; B 1: 12; B 0: 14). So dp is infeasible below 14 and
 * returns the store-everything time 1+5+3 + 0 + 2+2+2 = 15 from 14 up.
 *
 * Without that temporary the store-everything peak is 12 (B 2 and B 1) and B 0 needs 9.
 * Checkpointing x_1 instead of x̄_1 (leaf 1: F_ck 0; chain F_all 1, F_all 2, loss, B 2, B 1;
 * then F_all 0, B 0) peaks at 9 (loss: 1+2+3+1+1 = 8, B 2: 9, B 1: 1+2+3+1+2 = 9,
 * F_all 0: 1+2+5+1 = 9, B 0: 9) and costs one more forward of stage 0: time 16. Any
 * schedule but store-everything recomputes some forward, and stage 0's is the cheapest. */
START_TEST(hetero3_by_hand)
{
    ck_chain c;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chaingen_hetero3(&c, &err), CK_OK);
    expect_infeasible(&c, 0, 14);
    expect_infeasible(&c, 13, 14);
    expect_plan(&c, 14, 15);
    expect_plan(&c, 1000, 15);
    c.stages[0].bwd_tmp_bytes = 0;
    expect_infeasible(&c, 8, 9);
    expect_plan(&c, 9, 16);
    expect_plan(&c, 11, 16);
    expect_plan(&c, 12, 15);
    ck_chain_free(&c);
}
END_TEST

/* With few slots every size is rounded up to units of several bytes: the schedule still
 * fits in bytes and is never faster than the exact optimum; and since the minimum-peak
 * schedule is the fallback, dp never fails where a schedule exists. */
START_TEST(coarse_slots_fit_and_are_not_faster)
{
    ck_rng rng;
    ck_rng_seed(&rng, 1992);
    unsigned coarse = 0;
    for (unsigned k = 0; k < 200; k++) {
        ck_chain c;
        ck_err err = {{0}};
        ck_assert_int_eq(ck_chaingen_random(&c, 1 + k % 6, 1000, 10, &rng, &err), CK_OK);
        ck_brute_set all;
        ck_assert_msg(ck_brute_enumerate(&c, &all, &err) == CK_OK, "%s", err.msg);
        uint64_t least = ck_brute_min_peak(&all), top = ck_test_baseline(&c).peak_bytes;
        for (unsigned trial = 0; trial < 10; trial++) {
            uint64_t budget = least + ck_rng_below(&rng, top - least + 2);
            uint32_t slots = 8 + (uint32_t)ck_rng_below(&rng, 93);
            double best = 0;
            ck_assert(ck_brute_best(&all, budget, &best));
            ck_plan_result r;
            ck_replay replay;
            uint64_t min_budget = 0;
            ck_assert_msg(ck_test_plan(&ck_planner_dp, &c, budget, slots, &r, &replay, &min_budget,
                                       &err) == CK_OK, "chain %u: %s", k, err.msg);
            ck_assert(replay.peak_bytes <= budget);
            ck_assert(replay.time >= best - 1e-9 * fmax(1, best));
            ck_assert_uint_ge(r.memory_unit, 1);
            coarse += r.memory_unit > 1;
            ck_schedule_free(&r.schedule);
        }
        ck_brute_free(&all);
        ck_chain_free(&c);
    }
    /* Many trials must have planned in coarse units rather than fallen back to the
     * minimum-peak schedule (951 of the 2000 with these seeds). */
    ck_assert_uint_gt(coarse, 800);
}
END_TEST

START_TEST(more_budget_is_never_slower)
{
    ck_rng rng;
    ck_rng_seed(&rng, 2000);
    for (unsigned k = 0; k < 40; k++) {
        ck_chain c;
        ck_err err = {{0}};
        ck_assert_int_eq(ck_chaingen_random(&c, 1 + k % 12, 10, 10, &rng, &err), CK_OK);
        uint64_t top = ck_test_baseline(&c).peak_bytes;
        double previous = INFINITY;
        for (uint64_t budget = 0; budget <= top; budget++) {
            ck_plan_result r;
            ck_replay replay;
            uint64_t min_budget = 0;
            int rc = ck_test_plan(&ck_planner_dp, &c, budget, 1000, &r, &replay, &min_budget, &err);
            if (rc == CK_OK) {
                /* Equal times summed in another order may differ in the last bit. */
                ck_assert(replay.time <= previous + 1e-9 * replay.time);
                previous = replay.time;
            } else {
                ck_assert_int_eq(rc, CK_ERR_INFEASIBLE);
                ck_assert(isinf(previous));
            }
            ck_schedule_free(&r.schedule);
        }
        ck_assert_double_eq(previous, ck_test_baseline(&c).time);
        ck_chain_free(&c);
    }
}
END_TEST

START_TEST(hundred_stages_with_500_slots)
{
    ck_rng rng;
    ck_rng_seed(&rng, 100);
    ck_chain c;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chaingen_random(&c, 100, 1000, 10, &rng, &err), CK_OK);
    ck_replay base = ck_test_baseline(&c);
    ck_plan_result r;
    ck_replay replay;
    uint64_t least = 0, budget = base.peak_bytes / 2;
    int rc = ck_test_plan(&ck_planner_dp, &c, budget, 500, &r, &replay, &least, &err);
    ck_assert_msg(rc == CK_OK, "%s", err.msg);
    ck_assert(replay.peak_bytes <= budget);
    ck_assert(replay.time >= base.time);
    ck_assert_uint_eq(replay.count[CK_F_ALL], 100);
    ck_assert_uint_gt(r.memory_unit, 1);
    ck_schedule_free(&r.schedule);
    ck_chain_free(&c);
}
END_TEST

/* Called directly with a budget far above everything, the unit is huge and every size
 * rounds up to one unit; the store-everything schedule must still come out. */
START_TEST(huge_budget_gives_store_everything)
{
    ck_rng rng;
    ck_rng_seed(&rng, 7);
    ck_chain c;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chaingen_random(&c, 6, 10, 10, &rng, &err), CK_OK);
    ck_plan_result r;
    ck_replay replay;
    uint64_t least = 0;
    ck_assert_int_eq(ck_test_plan(&ck_planner_dp, &c, UINT64_MAX, 500, &r, &replay, &least, &err),
                     CK_OK);
    ck_assert(same_time(replay.time, ck_test_baseline(&c).time));
    ck_schedule_free(&r.schedule);
    ck_chain_free(&c);
}
END_TEST

START_TEST(refuses_oversized_tables_and_zero_slots)
{
    ck_chain c;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chaingen_uniform(&c, 2000, 1, &err), CK_OK);
    ck_plan_result r;
    ck_replay replay;
    uint64_t least = 0;
    ck_assert_int_eq(ck_test_plan(&ck_planner_dp, &c, 1000000, 500, &r, &replay, &least, &err),
                     CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "--slots") && strstr(err.msg, "1 GiB"), "%s", err.msg);
    ck_assert_int_eq(ck_test_plan(&ck_planner_dp, &c, 1000000, 0, &r, &replay, &least, &err),
                     CK_ERR_INPUT);
    ck_chain_free(&c);
}
END_TEST

/* A signal handler sets ckplan's stop flag (cli/interrupt.c): dp polls it while it fills
 * its tables, which can take minutes, and gives up with nothing planned. */
START_TEST(stops_when_the_stop_flag_is_set)
{
    ck_chain c;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chaingen_uniform(&c, 60, 1, &err), CK_OK);
    uint64_t budget = ck_test_baseline(&c).peak_bytes / 2, least = 0;
    atomic_int stop = 15; /* the number of the signal that arrived */
    ck_planner_opts opts = {.slots = CK_DEFAULT_SLOTS, .stop = &stop};
    ck_plan_result r;
    ck_planner_result_init(&r);
    ck_assert_int_eq(ck_planner_dp.plan(&c, budget, &opts, &r, &least, &err), CK_INTERRUPTED);
    ck_assert_uint_eq(r.schedule.n, 0);
    atomic_store(&stop, 0);
    ck_assert_msg(ck_planner_dp.plan(&c, budget, &opts, &r, &least, &err) == CK_OK, "%s", err.msg);
    ck_assert_uint_gt(r.schedule.n, 0);
    ck_planner_result_free(&r);
    ck_chain_free(&c);
}
END_TEST

static Suite *dp_suite(void)
{
    Suite *s = suite_create("dp");
    TCase *tc = tcase_create("dp");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, matches_brute_force_on_random_chains);
    tcase_add_test(tc, matches_brute_force_with_variants);
    tcase_add_test(tc, closed_form_peaks_match_the_actions);
    tcase_add_test(tc, hetero3_by_hand);
    tcase_add_test(tc, coarse_slots_fit_and_are_not_faster);
    tcase_add_test(tc, more_budget_is_never_slower);
    tcase_add_test(tc, hundred_stages_with_500_slots);
    tcase_add_test(tc, huge_budget_gives_store_everything);
    tcase_add_test(tc, refuses_oversized_tables_and_zero_slots);
    tcase_add_test(tc, stops_when_the_stop_flag_is_set);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(dp_suite)
