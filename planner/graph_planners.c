#include "planner/graph_planners.h"

#include <string.h>

#include "planner/graph_milp.h"

const ck_graph_planner *const ck_graph_planners[] = {&ck_graph_planner_fast, &ck_graph_planner_milp,
                                                     &ck_graph_planner_none, NULL};

const ck_graph_planner *ck_graph_planners_find(const char *name)
{
    for (const ck_graph_planner *const *p = ck_graph_planners; *p; p++)
        if (strcmp((*p)->name, name) == 0)
            return *p;
    return NULL;
}

/* none: the baseline, which fits or not. */
static int plan_none(const ck_graph *g, uint64_t budget, const ck_graph_planner_opts *opts,
                     ck_graph_plan_result *result, uint64_t *min_budget, ck_err *err)
{
    (void)opts;
    ck_graph_replay r;
    int rc = ck_graph_schedule_baseline(g, &result->schedule, err);
    if (rc == CK_OK) rc = ck_graph_replay_schedule(g, &result->schedule, &r, err);
    if (rc == CK_OK && r.peak_bytes > budget) {
        *min_budget = r.peak_bytes;
        return CK_ERR_INFEASIBLE;
    }
    return rc;
}

const ck_graph_planner ck_graph_planner_none = {
    "none", "keep every output to its last use (the baseline: fastest, largest peak)", plan_none,
    true};

int ck_graph_planners_run(const ck_graph *g, const ck_graph_planner *p, uint64_t budget,
                          const ck_graph_planner_opts *opts, ck_graph_plan_result *result,
                          ck_graph_replay *replay, uint64_t *min_budget, ck_err *err)
{
    ck_graph_plan_result_init(result);
    *min_budget = 0;
    int rc = p->plan(g, budget, opts, result, min_budget, err);
    if (rc != CK_OK)
        return rc;
    ck_err why;
    if (ck_graph_replay_schedule(g, &result->schedule, replay, &why) != CK_OK)
        return ck_err_fail(err, CK_ERR_RUNTIME, "planner %s returned an invalid schedule: %s",
                           p->name, why.msg);
    if (replay->peak_bytes > budget)
        return ck_err_fail(err, CK_ERR_RUNTIME, "planner %s returned a schedule whose replayed "
                           "peak (%llu bytes) is over the budget (%llu bytes)", p->name,
                           (unsigned long long)replay->peak_bytes, (unsigned long long)budget);
    return CK_OK;
}
