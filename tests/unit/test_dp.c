#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "planner/plan_dp.h"
#include "planner/planner.h"
#include "planner/size.h"
#include "tests/unit/brute.h"
#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"
#include "tests/unit/plan_run.h"

static bool same_time(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(1, fmax(fabs(a), fabs(b)));
}

/* Checks dp against the brute force on c at every budget from 0 to a little above the
 * store-everything peak, with enough slots for 1-byte units. Returns the number of those
 * budgets at which the usual schedules alone (the loss reading x̄_L) are slower than the
 * best, or fit nowhere while another schedule fits. */
static unsigned check_exact(const ck_chain *c, unsigned chain_no)
{
    ck_err err = {{0}};
    ck_brute_set all, usual;
    ck_assert_msg(ck_brute_enumerate(c, true, &all, &err) == CK_OK, "%s", err.msg);
    ck_assert_msg(ck_brute_enumerate(c, false, &usual, &err) == CK_OK, "%s", err.msg);
    unsigned usual_loses = 0;
    uint64_t least = ck_brute_min_peak(&all);
    uint64_t top = ck_test_baseline(c).peak_bytes + 3;
    for (uint64_t budget = 0; budget <= top; budget++) {
        ck_plan_result r;
        ck_replay replay;
        uint64_t min_budget = 0;
        double best = 0;
        bool feasible = ck_brute_best(&all, budget, &best);
        double best_usual = 0;
        if (feasible && (!ck_brute_best(&usual, budget, &best_usual) || !same_time(best_usual, best)))
            usual_loses++;
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
    ck_brute_free(&usual);
    return usual_loses;
}

/* A loss that holds 10 to 40 bytes (more than the generator's activations) and takes up to
 * 2.9 time units. */
static void heavy_loss(ck_chain *c, ck_rng *rng)
{
    c->loss_bwd_tmp_bytes = 10 + ck_rng_below(rng, 31);
    c->loss_bwd_time = (double)ck_rng_below(rng, 30) / 10;
}

/* PyTorch's cross-entropy holds three logits-sized tensors: with a loss that holds much
 * memory, computing it from the plain x_L and recomputing the last stage afterwards is
 * often the only way to fit, or the fastest. dp must find those schedules: it matches the
 * brute force at every budget, and the usual schedules alone lose at many of them. */
START_TEST(heavy_losses_take_the_plain_output)
{
    ck_rng rng;
    ck_rng_seed(&rng, 1311);
    unsigned points = 0, usual_loses = 0;
    for (unsigned k = 0; k < 240; k++) {
        ck_chain c;
        ck_err err = {{0}};
        ck_assert_int_eq(ck_chaingen_random(&c, 1 + k % 6, 10, 10, &rng, &err), CK_OK);
        heavy_loss(&c, &rng);
        points += (unsigned)ck_test_baseline(&c).peak_bytes + 4;
        usual_loses += check_exact(&c, k);
        ck_chain_free(&c);
    }
    fprintf(stderr, "heavy losses: the usual schedules lose at %u of %u budgets\n", usual_loses,
            points);
    ck_assert_uint_gt(usual_loses, points / 20);
}
END_TEST

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
 * is the brute force's optimum over every persistent schedule with every variant, the
 * plain-loss kinds included (half the chains have a heavy loss, so that those win often),
 * at every budget. The variants matter: on some chains they reach a time or a peak that no
 * schedule of the same chain without them reaches, so a dp or brute force that ignored
 * them would disagree; so does the plain loss with them. */
START_TEST(matches_brute_force_with_variants)
{
    ck_rng rng;
    ck_rng_seed(&rng, 2023);
    unsigned better = 0, usual_loses = 0;
    for (unsigned k = 0; k < 200; k++) {
        ck_chain c;
        ck_err err = {{0}};
        ck_assert_int_eq(ck_chaingen_random(&c, 1 + k % 4, 10, 10, &rng, &err), CK_OK);
        ck_assert_msg(ck_chaingen_variants(&c, 10, 10, &rng, &err) == CK_OK, "%s", err.msg);
        for (size_t i = 0; k % 3 == 2 && i < c.n_stages; i++) /* "all" not the fastest */
            c.stages[i].bwd_time += c.stages[i].n_variants ? (double)ck_rng_below(&rng, 8) : 0;
        if (k % 2)
            heavy_loss(&c, &rng);
        usual_loses += check_exact(&c, k);
        ck_brute_set with, without;
        ck_assert_int_eq(ck_brute_enumerate(&c, true, &with, &err), CK_OK);
        for (size_t i = 0; i < c.n_stages; i++)
            ck_assert_int_eq(ck_chain_set_variants(&c, i, NULL, 0, &err), CK_OK);
        ck_assert_int_eq(ck_brute_enumerate(&c, true, &without, &err), CK_OK);
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
    fprintf(stderr, "variants: better than without at %u budgets; the usual schedules lose at %u\n",
            better, usual_loses);
    ck_assert_uint_gt(better, 100);
    ck_assert_uint_gt(usual_loses, 50);
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
        ck_assert_msg(ck_brute_enumerate(&c, true, &all, &err) == CK_OK, "%s", err.msg);
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

/* c with every size in units of u bytes, rounded up, as dp counts them. */
static void round_to_units(ck_chain *c, uint64_t u)
{
    c->input_bytes = ck_size_ceil_div(c->input_bytes, u);
    c->loss_bwd_tmp_bytes = ck_size_ceil_div(c->loss_bwd_tmp_bytes, u);
    for (size_t i = 0; i < c->n_stages; i++) {
        ck_stage *st = &c->stages[i];
        st->out_bytes = ck_size_ceil_div(st->out_bytes, u);
        st->saved_bytes = ck_size_ceil_div(st->saved_bytes, u);
        st->fwd_tmp_bytes = ck_size_ceil_div(st->fwd_tmp_bytes, u);
        st->bwd_tmp_bytes = ck_size_ceil_div(st->bwd_tmp_bytes, u);
    }
}

/* dp on c at budget and slots against the brute force on c rounded to dp's unit; true when
 * some schedule fits in units (else dp must fail or fall back to 1-byte units). */
static bool check_in_units(const ck_chain *c, uint64_t budget, uint32_t slots, unsigned k)
{
    ck_err err = {{0}};
    uint64_t avail = budget > c->input_bytes ? budget - c->input_bytes : 0;
    uint64_t u = avail > slots ? ck_size_ceil_div(avail, slots) : 1;
    ck_chain rounded = *c; /* sharing c's names; only its stages are its own */
    rounded.stages = malloc(c->n_stages * sizeof *rounded.stages);
    ck_assert(rounded.stages);
    memcpy(rounded.stages, c->stages, c->n_stages * sizeof *rounded.stages);
    round_to_units(&rounded, u);
    ck_brute_set all;
    ck_assert_msg(ck_brute_enumerate(&rounded, true, &all, &err) == CK_OK, "%s", err.msg);
    double best = 0;
    bool fits = ck_brute_best(&all, rounded.input_bytes + avail / u, &best);
    ck_plan_result r;
    ck_replay replay;
    uint64_t min_budget = 0;
    int rc = ck_test_plan(&ck_planner_dp, c, budget, slots, &r, &replay, &min_budget, &err);
    if (fits) {
        ck_assert_msg(rc == CK_OK && r.memory_unit == u, "chain %u: %s", k, err.msg);
        ck_assert_msg(same_time(replay.time, best), "chain %u budget %llu slots %u: dp %.17g, units %.17g",
                      k, (unsigned long long)budget, slots, replay.time, best);
    } else {
        ck_assert(rc == CK_ERR_INFEASIBLE || r.memory_unit == 1);
    }
    ck_schedule_free(&r.schedule);
    ck_brute_free(&all);
    free(rounded.stages);
    return fits;
}

/* In units, dp is exact: its time at a coarse budget is the brute force's best on the chain
 * whose sizes are rounded up to units, within the budget's whole units above x_0 (and
 * when none fits there, dp falls back to its minimum-peak schedule in bytes). This holds
 * the fill's shortcuts (rows kept only where reachable and until they stop improving,
 * shapes skipped once they cannot gain) to the plain recurrence, heavy losses included. */
START_TEST(coarse_slots_are_exact_in_units)
{
    ck_rng rng;
    ck_rng_seed(&rng, 1913);
    unsigned in_units = 0;
    for (unsigned k = 0; k < 150; k++) {
        ck_chain c;
        ck_err err = {{0}};
        ck_assert_int_eq(ck_chaingen_random(&c, 1 + k % 6, 1000, 10, &rng, &err), CK_OK);
        if (k % 2)
            c.loss_bwd_tmp_bytes = 1000 + ck_rng_below(&rng, 3000);
        uint64_t top = ck_test_baseline(&c).peak_bytes;
        for (unsigned trial = 0; trial < 8; trial++) {
            uint64_t budget = top / 2 + ck_rng_below(&rng, top - top / 2 + 2);
            uint32_t slots = 16 + (uint32_t)ck_rng_below(&rng, 100);
            in_units += check_in_units(&c, budget, slots, k);
        }
        ck_chain_free(&c);
    }
    fprintf(stderr, "coarse slots: %u of 1200 plans in units\n", in_units);
    ck_assert_uint_gt(in_units, 300);
}
END_TEST

/* --slots exact plans in bytes whatever the budget: on chains of sizes up to 1000, where
 * 500 slots would be units of several bytes, it matches the brute force (in bytes) at
 * every sampled budget, heavy losses and (on chains of up to 3 stages) variants included. */
START_TEST(exact_bytes_match_the_brute_force)
{
    ck_rng rng;
    ck_rng_seed(&rng, 1314);
    for (unsigned k = 0; k < 120; k++) {
        ck_chain c;
        ck_err err = {{0}};
        ck_assert_int_eq(ck_chaingen_random(&c, 1 + k % 6, 1000, 10, &rng, &err), CK_OK);
        if (k % 2)
            c.loss_bwd_tmp_bytes = 1000 + ck_rng_below(&rng, 3000);
        if (k % 6 < 3)
            ck_assert_msg(ck_chaingen_variants(&c, 1000, 10, &rng, &err) == CK_OK, "%s", err.msg);
        ck_brute_set all;
        ck_assert_msg(ck_brute_enumerate(&c, true, &all, &err) == CK_OK, "%s", err.msg);
        uint64_t top = ck_test_baseline(&c).peak_bytes;
        for (unsigned trial = 0; trial < 6; trial++) {
            uint64_t budget = ck_rng_below(&rng, top + 2), least = 0;
            double best = 0;
            bool fits = ck_brute_best(&all, budget, &best);
            ck_planner_opts opts = {.slots = CK_DEFAULT_SLOTS, .exact = true, .variants = true};
            ck_plan_result r;
            ck_planner_result_init(&r);
            int rc = ck_planner_dp.plan(&c, budget, &opts, &r, &least, &err);
            ck_replay replay;
            if (fits) {
                ck_assert_msg(rc == CK_OK, "chain %u budget %llu: %s", k, (unsigned long long)budget, err.msg);
                ck_assert_int_eq(ck_schedule_replay(&c, &r.schedule, &replay, NULL, NULL, &err), CK_OK);
                ck_assert(replay.peak_bytes <= budget);
                ck_assert_msg(same_time(replay.time, best), "chain %u budget %llu: dp %.17g, brute %.17g",
                              k, (unsigned long long)budget, replay.time, best);
                ck_assert_uint_eq(r.memory_unit, 1);
            } else {
                ck_assert_int_eq(rc, CK_ERR_INFEASIBLE);
                ck_assert_uint_eq(least, ck_brute_min_peak(&all));
            }
            ck_planner_result_free(&r);
        }
        ck_brute_free(&all);
        ck_chain_free(&c);
    }
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
    tcase_add_test(tc, heavy_losses_take_the_plain_output);
    tcase_add_test(tc, matches_brute_force_with_variants);
    tcase_add_test(tc, closed_form_peaks_match_the_actions);
    tcase_add_test(tc, hetero3_by_hand);
    tcase_add_test(tc, coarse_slots_fit_and_are_not_faster);
    tcase_add_test(tc, coarse_slots_are_exact_in_units);
    tcase_add_test(tc, exact_bytes_match_the_brute_force);
    tcase_add_test(tc, more_budget_is_never_slower);
    tcase_add_test(tc, hundred_stages_with_500_slots);
    tcase_add_test(tc, huge_budget_gives_store_everything);
    tcase_add_test(tc, refuses_oversized_tables_and_zero_slots);
    tcase_add_test(tc, stops_when_the_stop_flag_is_set);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(dp_suite)
