/* verify: what `ckplan run --verify` requires of a plan's execution, judged from what the
 * plan and its baseline measured and from the plan's replayed prediction: the same losses
 * and gradients as the baseline, bit for bit; a tracked activation peak equal to the
 * prediction, to the byte (the replay follows the rules the executor allocates by, so any
 * difference is a fault of one of them); and a plan file whose figures
 * are the replay's. The executions themselves are the caller's (sim/exec.h). */
#ifndef CK_VERIFY_H
#define CK_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/plan_check.h"

/* What one execution (the baseline or the plan) measured over its measured steps. */
typedef struct {
    uint64_t activation_peak, static_bytes, rss_peak;
    double median_seconds; /* of its steps in the interleaved timing rounds */
    double *losses;        /* per measured step */
    char (*grad_sha)[65];  /* per measured step, SHA-256 (hex) of the gradients' bits */
    float *last_grads;     /* the last measured step's gradients */
    size_t n_grads;
} ck_run_measure;

/* Each check's outcome; passed is all four. */
typedef struct {
    bool loss_identical, gradients_identical, peak_within, plan_file_matches, passed;
    double max_abs_diff; /* largest difference of the last step's gradients */
    double peak_ratio;   /* the plan's tracked peak over predicted_peak (1 when that is 0) */
} ck_verdict;

/* Judges `steps` measured steps of plan against base. predicted_peak is the replayed
 * activation peak of the plan's schedule; check says how the plan file's figures differ
 * from the replay. */
ck_verdict ck_verify_run(uint64_t predicted_peak, const ck_plan_check *check,
                         const ck_run_measure *base, const ck_run_measure *plan, uint64_t steps);

/* "verification failed: " and the reason for every failed check, the plan file's
 * differing figures named, into buf (len >= 1). */
void ck_verify_reasons(const ck_verdict *v, const ck_plan_check *check, char *buf, size_t len);

#endif
