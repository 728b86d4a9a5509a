/* none: store everything. The fastest schedule, with the largest peak. */
#include "planner/planner.h"

static int plan_none(const ck_chain *c, uint64_t budget, const ck_planner_opts *opts,
                     ck_plan_result *result, uint64_t *min_budget, ck_err *err)
{
    (void)opts;
    int rc = ck_schedule_baseline(c, &result->schedule, err);
    return rc == CK_OK ? ck_planner_check_fit(c, &result->schedule, budget, min_budget, err) : rc;
}

const ck_planner ck_planner_none = {
    "none", "store every activation (the baseline: fastest, largest peak)", plan_none, NULL, false};
