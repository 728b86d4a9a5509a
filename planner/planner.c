#include "planner/planner.h"

#include <stdio.h>
#include <string.h>

const ck_planner *const ck_planners[] = {&ck_planner_dp, &ck_planner_revolve, &ck_planner_chen,
                                         &ck_planner_sqrt, &ck_planner_none, NULL};

const ck_planner *ck_planner_find(const char *name)
{
    for (const ck_planner *const *p = ck_planners; *p; p++)
        if (strcmp((*p)->name, name) == 0)
            return *p;
    return NULL;
}

int ck_planner_check_fit(const ck_chain *c, const ck_schedule *s, uint64_t budget,
                         uint64_t *min_budget, ck_err *err)
{
    ck_replay r;
    int rc = ck_schedule_replay(c, s, &r, NULL, NULL, err);
    if (rc == CK_OK && r.peak_bytes > budget) {
        *min_budget = r.peak_bytes;
        rc = CK_ERR_INFEASIBLE;
    }
    return rc;
}

void ck_planner_result_init(ck_plan_result *r)
{
    memset(r, 0, sizeof *r);
    r->snapshots = -1;
    r->segments = -1;
}

void ck_planner_result_free(ck_plan_result *r)
{
    ck_schedule_free(&r->schedule);
    ck_planner_result_init(r);
}

/* Every plan within CKPLAN_MAX_SCHEDULE_OPS, whichever planner made it (revolve checks
 * before building; the others' schedules are short by construction, see docs/planners.md). */
static int check_length(const char *what, ck_plan_result *result, ck_err *err)
{
    int rc = ck_schedule_check_length(what, result->schedule.n, err);
    if (rc != CK_OK)
        ck_planner_result_free(result);
    return rc;
}

int ck_planner_run(const ck_chain *c, const ck_planner *p, uint64_t budget,
                  const ck_planner_opts *opts, ck_plan_result *result, ck_replay *replay,
                  uint64_t *min_budget, ck_err *err)
{
    ck_planner_result_init(result);
    int rc = ck_schedule_baseline(c, &result->schedule, err);
    if (rc == CK_OK)
        rc = ck_schedule_replay(c, &result->schedule, replay, NULL, NULL, err);
    if (rc == CK_OK && replay->peak_bytes <= budget)
        return check_length("the store-everything schedule", result, err);
    ck_planner_result_free(result);
    if (rc != CK_OK)
        return rc;
    uint64_t baseline_peak = replay->peak_bytes;
    rc = p->plan(c, budget, opts, result, min_budget, err);
    if (rc == CK_ERR_INFEASIBLE && *min_budget > baseline_peak)
        *min_budget = baseline_peak; /* where the baseline fits, it is the plan */
    if (rc == CK_OK) {
        ck_err why;
        if (ck_schedule_replay(c, &result->schedule, replay, NULL, NULL, &why) != CK_OK)
            rc = ck_err_fail(err, CK_ERR_RUNTIME, "internal error: planner %s produced an invalid "
                                              "schedule (%s)", p->name, why.msg);
        else if (replay->peak_bytes > budget)
            rc = ck_err_fail(err, CK_ERR_RUNTIME, "internal error: planner %s produced a schedule "
                         "whose peak %llu exceeds the budget %llu", p->name,
                         (unsigned long long)replay->peak_bytes, (unsigned long long)budget);
    }
    if (rc == CK_OK) {
        char what[64];
        snprintf(what, sizeof what, "planner %s: its schedule", p->name);
        return check_length(what, result, err);
    }
    ck_planner_result_free(result);
    return rc;
}

bool ck_planner_activation_budget(uint64_t budget, uint64_t static_bytes, uint64_t *activation)
{
    *activation = budget >= static_bytes ? budget - static_bytes : 0;
    return budget >= static_bytes;
}

uint64_t ck_planner_step_budget(uint64_t static_bytes, uint64_t activation_bytes)
{
    return activation_bytes > UINT64_MAX - static_bytes ? UINT64_MAX : static_bytes + activation_bytes;
}
