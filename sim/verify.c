/* verify: the verdict of `run --verify` (see verify.h). */
#include "sim/verify.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

ck_verdict ck_verify_run(uint64_t predicted_peak, const ck_plan_check *check,
                         const ck_run_measure *base, const ck_run_measure *plan, uint64_t steps)
{
    ck_verdict v = {.loss_identical = true, .gradients_identical = true,
                    .plan_file_matches = check->n_differences == 0};
    for (uint64_t k = 0; k < steps; k++) {
        v.loss_identical &= memcmp(&base->losses[k], &plan->losses[k], sizeof(double)) == 0;
        v.gradients_identical &= strcmp(base->grad_sha[k], plan->grad_sha[k]) == 0;
    }
    for (size_t i = 0; i < base->n_grads && i < plan->n_grads; i++)
        v.max_abs_diff = fmax(v.max_abs_diff, fabs((double)base->last_grads[i] - plan->last_grads[i]));
    v.peak_ratio = predicted_peak ? (double)plan->activation_peak / (double)predicted_peak : 1;
    v.peak_within = plan->activation_peak == predicted_peak;
    v.passed = v.loss_identical && v.gradients_identical && v.peak_within && v.plan_file_matches;
    return v;
}

void ck_verify_reasons(const ck_verdict *v, const ck_plan_check *check, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "verification failed:%s%s%s%s",
                                   v->loss_identical ? "" : " the loss differs from the baseline's;",
                                   v->gradients_identical ? "" : " gradients differ from the baseline's;",
                                   v->peak_within ? "" : " the tracked activation peak is not the prediction, to the byte;",
                                   v->plan_file_matches ? "" : " the plan file's figures differ from the replay of its schedule:");
    for (size_t k = 0; k < check->n_differences && used < len; k++) {
        char what[256];
        ck_plan_check_describe(&check->differences[k], what, sizeof what);
        used += (size_t)snprintf(buf + used, len - used, " %s;", what);
    }
}
