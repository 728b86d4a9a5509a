/* Profiled medians into chain times (ck_costs_from_profile), on hand-made medians. */
#include "planner/costs.h"

#include <math.h>
#include <stdlib.h>

#include "planner/segments.h"
#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"

enum { L = 4 };

/* The medians an action gets in these tests: distinct for every kind and stage. */
static double median_of(const ck_action *a)
{
    double s = (double)(a->stage + 1);
    switch (a->kind) {
    case CK_F_CK: return 0.1 * s;
    case CK_F_ALL: return 0.3 * s;
    case CK_B: return 0.5 * s;
    case CK_LOSS: return 0.7;
    case CK_F_NONE: return 100; /* never in a profile */
    case CK_N_ACTIONS: break;
    }
    return NAN;
}

typedef struct {
    ck_chain c;
    ck_schedule every;
    double *median;
} profile;

static void profile_make(profile *p)
{
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chaingen_uniform(&p->c, L, 1000, &err), CK_OK);
    size_t starts[L];
    for (size_t i = 0; i < L; i++)
        starts[i] = i;
    p->every = (ck_schedule){0};
    ck_assert_int_eq(ck_segments_of(&p->c, starts, L, &p->every, &err), CK_OK);
    p->median = calloc(p->every.n, sizeof *p->median);
    ck_assert_ptr_nonnull(p->median);
    for (size_t k = 0; k < p->every.n; k++)
        p->median[k] = median_of(&p->every.actions[k]);
}

static void profile_free(profile *p)
{
    free(p->median);
    ck_schedule_free(&p->every);
    ck_chain_free(&p->c);
}

/* ck_costs_from_profile of p's medians, which must succeed. */
static void convert(const profile *p, double outside_ops, ck_chain *m, double *keep_all)
{
    ck_err err = {{0}};
    ck_assert_msg(ck_costs_from_profile(&p->c, &p->every, p->median, outside_ops, m, keep_all, &err) ==
                      CK_OK, "%s", err.msg);
}

START_TEST(forward_keeps_nothing_backward_pays_for_keeping)
{
    profile p;
    profile_make(&p);
    ck_chain m;
    double keep_all[L];
    convert(&p, 0.25, &m, keep_all);
    ck_assert_ptr_ne(m.stages, p.c.stages);
    for (size_t i = 0; i < L; i++) {
        double s = (double)(i + 1);
        ck_assert_double_eq_tol(keep_all[i], 0.3 * s, 1e-12);
        if (i + 1 < L) {
            ck_assert_double_eq_tol(m.stages[i].fwd_time, 0.1 * s, 1e-12);
            ck_assert_double_eq_tol(m.stages[i].bwd_time, 0.5 * s + 0.3 * s - 0.1 * s, 1e-12);
        } else { /* never checkpointed: its one forward keeps everything */
            ck_assert_double_eq_tol(m.stages[i].fwd_time, 0.3 * s, 1e-12);
            ck_assert_double_eq_tol(m.stages[i].bwd_time, 0.5 * s, 1e-12);
        }
        ck_assert_uint_eq(m.stages[i].saved_bytes, p.c.stages[i].saved_bytes);
        ck_assert_double_eq(p.c.stages[i].fwd_time, 1); /* the input is left as it was */
    }
    ck_assert_double_eq_tol(m.loss_bwd_time, 0.7 + 0.25, 1e-12);
    free(m.stages);
    profile_free(&p);
}
END_TEST

/* The chain's times add up to what was measured, on the profiled schedule and on the
 * store-everything one (each stage's F_all and B once). */
START_TEST(chain_times_add_up_to_the_measured_ones)
{
    profile p;
    profile_make(&p);
    ck_chain m;
    double keep_all[L];
    convert(&p, 0.25, &m, keep_all);
    double sum = 0.25, baseline = 0.25 + 0.7;
    for (size_t k = 0; k < p.every.n; k++)
        sum += p.median[k];
    for (size_t i = 0; i < L; i++)
        baseline += 0.3 * (double)(i + 1) + 0.5 * (double)(i + 1);
    ck_err err = {{0}};
    ck_replay r;
    ck_assert_int_eq(ck_schedule_replay(&m, &p.every, &r, NULL, NULL, &err), CK_OK);
    ck_assert_double_eq_tol(r.time, sum, 1e-9);
    ck_schedule base = {0};
    ck_assert_int_eq(ck_schedule_baseline(&m, &base, &err), CK_OK);
    ck_assert_int_eq(ck_schedule_replay(&m, &base, &r, NULL, NULL, &err), CK_OK);
    ck_assert_double_eq_tol(r.time, baseline, 1e-9);
    ck_schedule_free(&base);
    free(m.stages);
    profile_free(&p);
}
END_TEST

/* A forward that keeps nothing measured slower than keeping and backward together (noise)
 * leaves a backward time of 0, never a negative one. */
START_TEST(backward_time_is_never_negative)
{
    profile p;
    profile_make(&p);
    for (size_t k = 0; k < p.every.n; k++)
        if (p.every.actions[k].kind == CK_F_CK && p.every.actions[k].stage == 1)
            p.median[k] = 5;
    ck_chain m;
    double keep_all[L];
    convert(&p, 0, &m, keep_all);
    ck_assert_double_eq(m.stages[1].fwd_time, 5);
    ck_assert_double_eq(m.stages[1].bwd_time, 0);
    ck_assert_double_eq_tol(m.stages[0].bwd_time, 0.7, 1e-12);
    free(m.stages);
    profile_free(&p);
}
END_TEST

static Suite *costs_profile_suite(void)
{
    Suite *s = suite_create("costs_profile");
    TCase *tc = tcase_create("costs_profile");
    tcase_add_test(tc, forward_keeps_nothing_backward_pays_for_keeping);
    tcase_add_test(tc, chain_times_add_up_to_the_measured_ones);
    tcase_add_test(tc, backward_time_is_never_negative);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(costs_profile_suite)
