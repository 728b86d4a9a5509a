/* plan_dp: what the dp planner computes beyond its schedules, for the tests that hold its
 * closed-form accounting to the one definition of the actions (planner/action). The
 * planner itself is ck_planner_dp in planner/planner.h. */
#ifndef CK_PLAN_DP_H
#define CK_PLAN_DP_H

#include <stdint.h>

#include "planner/chain.h"
#include "planner/err.h"
#include "planner/schedule.h"

/* dp's closed-form smallest peak over persistent schedules of c, in bytes (x_0 included),
 * as its tables compute it without replaying anything, and in *out (appended) the
 * schedule its table says reaches that peak. */
int ck_plan_dp_min_peak(const ck_chain *c, uint64_t *peak, ck_schedule *out, ck_err *err);

#endif
