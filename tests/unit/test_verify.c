/* The verdict of run --verify (sim/verify.h) on hand-built measurements: each check on its
 * own, at its boundary, and the reasons it gives. */
#include "sim/verify.h"

#include <math.h>
#include <string.h>

#include "tests/unit/check_main.h"

enum { STEPS = 3, GRADS = 4 };

/* One execution's figures, in storage the test owns. */
typedef struct {
    double losses[STEPS];
    char sha[STEPS][65];
    float grads[GRADS];
    ck_run_measure m;
} execution;

static void execution_init(execution *x, uint64_t peak)
{
    for (int k = 0; k < STEPS; k++) {
        x->losses[k] = 4.5 - 0.25 * k;
        memset(x->sha[k], 'a' + k, 64);
        x->sha[k][64] = '\0';
    }
    for (int i = 0; i < GRADS; i++)
        x->grads[i] = 0.125f * (float)i;
    x->m = (ck_run_measure){.activation_peak = peak, .static_bytes = 1000, .losses = x->losses,
                            .grad_sha = x->sha, .last_grads = x->grads, .n_grads = GRADS};
}

static const ck_plan_check matching; /* no differences */

static ck_verdict judge(uint64_t predicted, uint64_t measured)
{
    execution base, plan;
    execution_init(&base, 2 * predicted);
    execution_init(&plan, measured);
    return ck_verify_run(predicted, &matching, &base.m, &plan.m, STEPS);
}

START_TEST(identical_runs_at_the_prediction_pass)
{
    ck_verdict v = judge(1000000, 1000000);
    ck_assert(v.loss_identical && v.gradients_identical && v.peak_within && v.plan_file_matches);
    ck_assert(v.passed);
    ck_assert_double_eq(v.peak_ratio, 1);
    ck_assert_double_eq(v.max_abs_diff, 0);
}
END_TEST

/* The prediction to the byte: one byte below or above fails. */
START_TEST(peak_tolerance_boundaries)
{
    ck_assert(judge(1000000, 1000000).peak_within);
    ck_assert(!judge(1000000, 999999).peak_within);
    ck_assert(!judge(1000000, 999999).passed);
    ck_assert(!judge(1000000, 1000001).peak_within);
    ck_assert(!judge(1000000, 1000001).passed);
    ck_assert(!judge(20, 19).peak_within);
    ck_assert_double_eq_tol(judge(1000000, 949999).peak_ratio, 0.949999, 1e-12);
    ck_assert(judge(0, 0).peak_within); /* nothing predicted, nothing used */
    ck_assert(!judge(0, 1).peak_within);
}
END_TEST

START_TEST(one_step_gradients_differing_fails)
{
    execution base, plan;
    execution_init(&base, 100);
    execution_init(&plan, 100);
    plan.sha[1][63] = 'z'; /* the middle step's gradients */
    plan.grads[2] += 0.5f;
    ck_verdict v = ck_verify_run(100, &matching, &base.m, &plan.m, STEPS);
    ck_assert(!v.gradients_identical);
    ck_assert(v.loss_identical && v.peak_within && v.plan_file_matches);
    ck_assert(!v.passed);
    ck_assert_double_eq(v.max_abs_diff, 0.5);
    char why[1024];
    ck_verify_reasons(&v, &matching, why, sizeof why);
    ck_assert_str_eq(why, "verification failed: gradients differ from the baseline's;");
}
END_TEST

/* Losses are compared bit for bit: 0 and -0 are equal numbers, not identical losses; a
 * NaN in both is identical. */
START_TEST(losses_compare_bits)
{
    execution base, plan;
    execution_init(&base, 100);
    execution_init(&plan, 100);
    base.losses[0] = plan.losses[0] = NAN;
    ck_assert(ck_verify_run(100, &matching, &base.m, &plan.m, STEPS).loss_identical);
    base.losses[2] = 0.0;
    plan.losses[2] = -0.0;
    ck_verdict v = ck_verify_run(100, &matching, &base.m, &plan.m, STEPS);
    ck_assert(!v.loss_identical && !v.passed);
    ck_assert(v.gradients_identical);
    /* steps past `steps` are not judged */
    ck_assert(ck_verify_run(100, &matching, &base.m, &plan.m, 2).loss_identical);
}
END_TEST

START_TEST(a_plan_figure_differing_fails_and_is_named)
{
    execution base, plan;
    execution_init(&base, 100);
    execution_init(&plan, 100);
    ck_plan_check check = {.n_differences = 1};
    check.differences[0] = (ck_plan_difference){.field = "predicted.activation_peak_bytes",
                                                .plan_bytes = 90, .replayed_bytes = 100};
    ck_verdict v = ck_verify_run(100, &check, &base.m, &plan.m, STEPS);
    ck_assert(!v.plan_file_matches && !v.passed);
    ck_assert(v.loss_identical && v.gradients_identical && v.peak_within);
    char why[1024], what[256];
    ck_verify_reasons(&v, &check, why, sizeof why);
    ck_plan_check_describe(&check.differences[0], what, sizeof what);
    ck_assert_msg(strstr(why, "the plan file's figures differ from the replay of its schedule: ") &&
                      strstr(why, what),
                  "%s", why);
    ck_assert_msg(!strstr(why, "loss") && !strstr(why, "gradients") && !strstr(why, "peak is"),
                  "%s", why);
}
END_TEST

START_TEST(reasons_name_every_failed_check)
{
    ck_verdict v = judge(1000000, 2000000);
    char why[1024];
    ck_verify_reasons(&v, &matching, why, sizeof why);
    ck_assert_str_eq(why, "verification failed: the tracked activation peak is not the "
                          "prediction, to the byte;");
    v.loss_identical = v.gradients_identical = false;
    ck_verify_reasons(&v, &matching, why, sizeof why);
    ck_assert_str_eq(why, "verification failed: the loss differs from the baseline's; gradients "
                          "differ from the baseline's; the tracked activation peak is not the "
                          "prediction, to the byte;");
    char small[24];
    ck_verify_reasons(&v, &matching, small, sizeof small); /* cut short, still a string */
    ck_assert_str_eq(small, "verification failed: th");
}
END_TEST

static Suite *verify_suite(void)
{
    Suite *s = suite_create("verify");
    TCase *tc = tcase_create("verify");
    tcase_add_test(tc, identical_runs_at_the_prediction_pass);
    tcase_add_test(tc, peak_tolerance_boundaries);
    tcase_add_test(tc, one_step_gradients_differing_fails);
    tcase_add_test(tc, losses_compare_bits);
    tcase_add_test(tc, a_plan_figure_differing_fails_and_is_named);
    tcase_add_test(tc, reasons_name_every_failed_check);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(verify_suite)
