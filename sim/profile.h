/* profile: each stage's forward and backward time measured with the executor, as
 * `ckplan profile` writes them into a costs file (planner/costs.h). */
#ifndef CK_PROFILE_H
#define CK_PROFILE_H

#include <stdint.h>

#include "planner/chain.h"
#include "planner/err.h"
#include "planner/workload.h"
#include "sim/exec.h"

typedef struct {
    ck_chain chain;      /* the workload's chain with the measured times (stages owned) */
    double *keep_all;    /* per stage: the measured forward that keeps what backward needs */
    double outside_ops;  /* median time of a step outside its operations (in the loss's) */
    uint64_t peak_bytes; /* tracked activation peak of a store-everything step */
} ck_profile;

/* Runs one store-everything step of model workload w for the peak, then one warm-up and
 * `steps` measured steps of a schedule that checkpoints every stage, and turns the median
 * times into chain times (ck_costs_from_profile). opts->stop can interrupt it
 * (CK_INTERRUPTED). Free with ck_profile_free whatever the status. */
int ck_profile_run(const ck_workload *w, uint64_t steps, const ck_exec_opts *opts,
                   ck_profile *out, ck_err *err);
void ck_profile_free(ck_profile *p);

#endif
