#include "planner/planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/size.h"

const ck_planner *const ck_planners[] = {&ck_planner_dp,    &ck_planner_revolve, &ck_planner_chen,
                                         &ck_planner_sqrt,  &ck_planner_every,   &ck_planner_none,
                                         NULL};

const ck_planner *ck_planner_find(const char *name)
{
    for (const ck_planner *const *p = ck_planners; *p; p++)
        if (strcmp((*p)->name, name) == 0)
            return *p;
    return NULL;
}

void ck_planner_names(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (const ck_planner *const *p = ck_planners; *p && used < len; p++) {
        const char *sep = p == ck_planners ? "" : p[1] ? ", " : " or ";
        int n = snprintf(buf + used, len - used, "%s%s", sep, (*p)->name);
        used += n > 0 ? (size_t)n : 0;
    }
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

/* Plans `plain` at chain budget b and replays the schedule on `real` (the same chain, or
 * the one with partitioned checkpoints that plain is the view of). The planner's replay on
 * plain must fit b: anything else is a planner's bug. */
static int plan_at(const ck_chain *plain, const ck_chain *real, const ck_planner *p, uint64_t b,
                   const ck_planner_opts *opts, ck_plan_result *result, ck_replay *replay,
                   uint64_t *min_budget, ck_err *err)
{
    ck_planner_result_free(result);
    int rc = p->plan(plain, b, opts, result, min_budget, err);
    if (rc != CK_OK)
        return rc;
    ck_err why;
    if (ck_schedule_replay(plain, &result->schedule, replay, NULL, NULL, &why) != CK_OK)
        return ck_err_fail(err, CK_ERR_RUNTIME, "internal error: planner %s produced an invalid "
                                                "schedule (%s)", p->name, why.msg);
    if (replay->peak_bytes > b)
        return ck_err_fail(err, CK_ERR_RUNTIME, "internal error: planner %s produced a schedule "
                           "whose peak %llu exceeds the budget %llu", p->name,
                           (unsigned long long)replay->peak_bytes, (unsigned long long)b);
    return real == plain ? CK_OK : ck_schedule_replay(real, &result->schedule, replay, NULL, NULL, err);
}

/* The partitioned search is this fine: it stops once the chain budgets it brackets are
 * within budget / PARTITION_STEPS of each other. */
#define PARTITION_STEPS 4096

/* c without its shards, into *plain, whose stages the caller frees (the rest is c's); the
 * bytes its partitioned checkpoints can hold less than whole ones, all held at once, into
 * *saving (UINT64_MAX past 64 bits). */
static int plain_view(const ck_chain *c, ck_chain *plain, uint64_t *saving, ck_err *err)
{
    *plain = *c;
    if (!(plain->stages = malloc(c->n_stages * sizeof *plain->stages)))
        return ck_err_oom(err);
    memcpy(plain->stages, c->stages, c->n_stages * sizeof *plain->stages);
    *saving = 0;
    for (size_t i = 0; i < c->n_stages; i++) {
        uint64_t shard = c->stages[i].shard_bytes;
        plain->stages[i].shard_bytes = 0;
        if (shard && *saving != UINT64_MAX && !ck_size_add(*saving, ck_chain_x_bytes(c, i) - shard, saving))
            *saving = UINT64_MAX;
    }
    return CK_OK;
}

/* plan_at on c's plain view at chain budget b: CK_OK when its replay on c fits budget;
 * CK_ERR_INFEASIBLE with *planned false when p has no schedule under b (*min_budget: p's
 * smallest chain budget), with *planned true when its replay on c is over budget. */
static int partitioned_at(const ck_chain *plain, const ck_chain *c, const ck_planner *p, uint64_t b,
                          uint64_t budget, const ck_planner_opts *opts, ck_plan_result *result,
                          ck_replay *replay, uint64_t *min_budget, bool *planned, ck_err *err)
{
    int rc = plan_at(plain, c, p, b, opts, result, replay, min_budget, err);
    *planned = rc == CK_OK;
    return rc == CK_OK && replay->peak_bytes > budget ? CK_ERR_INFEASIBLE : rc;
}

/* The smallest chain budget from lo up at which p plans (a planner that rounds, as dp's
 * memory units do, may put its smallest a little higher at a higher budget), and that
 * plan's status as partitioned_at gives it; *min_budget as plan_partitioned says. */
static int smallest_plan(const ck_chain *plain, const ck_chain *c, const ck_planner *p, uint64_t *lo,
                         uint64_t budget, const ck_planner_opts *opts, ck_plan_result *result,
                         ck_replay *replay, uint64_t *min_budget, ck_err *err)
{
    bool planned = false;
    uint64_t least = *lo;
    int rc = CK_ERR_INFEASIBLE;
    for (int tries = 0; rc == CK_ERR_INFEASIBLE && !planned && tries < 16; tries++) {
        *lo = least > *lo ? least : *lo + (tries > 0);
        rc = partitioned_at(plain, c, p, *lo, budget, opts, result, replay, &least, &planned, err);
    }
    if (rc == CK_ERR_INFEASIBLE)
        *min_budget = planned ? replay->peak_bytes : least;
    return rc;
}

/* Planners plan whole checkpoints: with partitioned ones (planner/action.h) p plans c's plain
 * view at a chain budget B', found by bisection, whose replay on c fits budget (a search, as
 * for pipeline ranks, not an optimum over partitioned schedules). Infeasible: *min_budget is
 * the replayed peak at p's smallest chain budget, a budget at which this finds a plan. */
static int plan_partitioned(const ck_chain *c, const ck_planner *p, uint64_t budget, uint64_t baseline_peak,
                            const ck_planner_opts *opts, ck_plan_result *result, ck_replay *replay,
                            uint64_t *min_budget, ck_err *err)
{
    ck_chain plain;
    uint64_t saving, least = 0, lo = 0;
    bool planned;
    int rc = plain_view(c, &plain, &saving, err);
    if (rc != CK_OK)
        return rc;
    /* from the baseline's peak on, nothing changes; what partitioning saves bounds the rest */
    uint64_t hi = saving < baseline_peak - 1 && budget < baseline_peak - 1 - saving ? budget + saving
                                                                                   : baseline_peak - 1;
    rc = partitioned_at(&plain, c, p, hi, budget, opts, result, replay, &least, &planned, err);
    if (rc == CK_ERR_INFEASIBLE) { /* then between p's smallest, if it fits, and hi */
        lo = planned ? 0 : least;
        rc = smallest_plan(&plain, c, p, &lo, budget, opts, result, replay, min_budget, err);
        uint64_t step = budget / PARTITION_STEPS > 1 ? budget / PARTITION_STEPS : 1;
        bool moved = false;
        while (rc == CK_OK && hi > lo && hi - lo > step) { /* lo fits, hi does not */
            uint64_t mid = lo + (hi - lo) / 2;
            int at = partitioned_at(&plain, c, p, mid, budget, opts, result, replay, &least, &planned, err);
            rc = at == CK_ERR_INFEASIBLE ? CK_OK : at;
            *(at == CK_OK ? &lo : &hi) = mid;
            moved = true;
        }
        if (rc == CK_OK && moved) /* the result is lo's: the last plan made may be another's */
            rc = partitioned_at(&plain, c, p, lo, budget, opts, result, replay, &least, &planned, err);
    }
    free(plain.stages);
    return rc;
}

int ck_planner_run(const ck_chain *c, const ck_planner *p, uint64_t budget,
                  const ck_planner_opts *opts, ck_plan_result *result, ck_replay *replay,
                  uint64_t *min_budget, ck_err *err)
{
    ck_planner_result_init(result);
    int rc = p->accepts ? p->accepts(c, err) : CK_OK;
    if (rc != CK_OK)
        return rc;
    rc = ck_schedule_baseline(c, &result->schedule, err);
    if (rc == CK_OK)
        rc = ck_schedule_replay(c, &result->schedule, replay, NULL, NULL, err);
    if (rc == CK_OK && replay->peak_bytes <= budget && !p->whatever_the_budget)
        return check_length("the store-everything schedule", result, err);
    ck_planner_result_free(result);
    if (rc != CK_OK)
        return rc;
    uint64_t baseline_peak = replay->peak_bytes;
    rc = ck_chain_partitioned(c)
             ? plan_partitioned(c, p, budget, baseline_peak, opts, result, replay, min_budget, err)
             : plan_at(c, c, p, budget, opts, result, replay, min_budget, err);
    if (rc == CK_ERR_INFEASIBLE && *min_budget > baseline_peak && !p->whatever_the_budget)
        *min_budget = baseline_peak; /* where the baseline fits, it is the plan */
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
