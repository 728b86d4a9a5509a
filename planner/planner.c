#include "planner/planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


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

/* A search for the chain budget to plan at: planners plan `plain` (c itself, or c without
 * its partitioned checkpoints), and `exact` (NULL: the chain's replay of c) judges their
 * schedules against `budget`. */
typedef struct {
    const ck_chain *plain, *c;
    const ck_schedule_replayer *exact;
    const ck_planner *p;
    const ck_planner_opts *opts;
    uint64_t budget;
} search;

/* Plans s->plain at chain budget b and replays the schedule by s->exact into *replay. The
 * planner's replay on plain must fit b: anything else is a planner's bug. */
static int plan_at(const search *s, uint64_t b, ck_plan_result *result, ck_replay *replay,
                   uint64_t *min_budget, ck_err *err)
{
    ck_planner_result_free(result);
    int rc = s->p->plan(s->plain, b, s->opts, result, min_budget, err);
    if (rc != CK_OK)
        return rc;
    ck_err why;
    if (ck_schedule_replay(s->plain, &result->schedule, replay, NULL, NULL, &why) != CK_OK)
        return ck_err_fail(err, CK_ERR_RUNTIME, "internal error: planner %s produced an invalid "
                                                "schedule (%s)", s->p->name, why.msg);
    if (replay->peak_bytes > b)
        return ck_err_fail(err, CK_ERR_RUNTIME, "internal error: planner %s produced a schedule "
                           "whose peak %llu exceeds the budget %llu", s->p->name,
                           (unsigned long long)replay->peak_bytes, (unsigned long long)b);
    bool same = s->c == s->plain && !(s->exact && s->exact->fn);
    return same ? CK_OK : ck_schedule_replay_by(s->exact, s->c, &result->schedule, replay, err);
}

/* The search is this fine: it stops once the chain budgets it brackets are within
 * budget / SEARCH_STEPS of each other. */
#define SEARCH_STEPS 4096

/* c without its shards, into *plain, whose stages the caller frees (the rest is c's). */
static int plain_view(const ck_chain *c, ck_chain *plain, ck_err *err)
{
    *plain = *c;
    if (!(plain->stages = malloc(c->n_stages * sizeof *plain->stages)))
        return ck_err_oom(err);
    memcpy(plain->stages, c->stages, c->n_stages * sizeof *plain->stages);
    for (size_t i = 0; i < c->n_stages; i++)
        plain->stages[i].shard_bytes = 0;
    return CK_OK;
}

/* plan_at at chain budget b: CK_OK when its exact replay fits s->budget; CK_ERR_INFEASIBLE
 * with *planned false when p has no schedule under b (*min_budget: p's smallest chain
 * budget), with *planned true when its exact replay is over budget. */
static int fits_at(const search *s, uint64_t b, ck_plan_result *result, ck_replay *replay,
                   uint64_t *min_budget, bool *planned, ck_err *err)
{
    int rc = plan_at(s, b, result, replay, min_budget, err);
    *planned = rc == CK_OK;
    return rc == CK_OK && replay->peak_bytes > s->budget ? CK_ERR_INFEASIBLE : rc;
}

/* The smallest chain budget from lo up at which p plans (a planner that rounds, as dp's
 * memory units do, may put its smallest a little higher at a higher budget), and that
 * plan's status as fits_at gives it; when infeasible, *min_budget is that plan's exact
 * peak (p's smallest chain budget when it never planned). */
static int smallest_plan(const search *s, uint64_t *lo, ck_plan_result *result, ck_replay *replay,
                         uint64_t *min_budget, ck_err *err)
{
    bool planned = false;
    uint64_t least = *lo;
    int rc = CK_ERR_INFEASIBLE;
    for (int tries = 0; rc == CK_ERR_INFEASIBLE && !planned && tries < 16; tries++) {
        *lo = least > *lo ? least : *lo + (tries > 0);
        rc = fits_at(s, *lo, result, replay, &least, &planned, err);
    }
    if (rc == CK_ERR_INFEASIBLE)
        *min_budget = planned ? replay->peak_bytes : least;
    return rc;
}

/* Bisection between chain budgets lo, whose plan fits, and hi, whose plan does not, for
 * the largest that fits (to within the search's step); the result is that plan. */
static int bisect(const search *s, uint64_t lo, uint64_t hi, ck_plan_result *result,
                  ck_replay *replay, ck_err *err)
{
    uint64_t step = s->budget / SEARCH_STEPS > 1 ? s->budget / SEARCH_STEPS : 1, least;
    bool moved = false, planned;
    int rc = CK_OK;
    while (rc == CK_OK && hi > lo && hi - lo > step) {
        uint64_t mid = lo + (hi - lo) / 2;
        int at = fits_at(s, mid, result, replay, &least, &planned, err);
        rc = at == CK_ERR_INFEASIBLE ? CK_OK : at;
        *(at == CK_OK ? &lo : &hi) = mid;
        moved = true;
    }
    if (rc == CK_OK && moved) /* the result is lo's: the last plan made may be another's */
        rc = fits_at(s, lo, result, replay, &least, &planned, err);
    return rc;
}

/* The bisection assumes that a larger chain budget gives a larger exact peak, which
 * holds only roughly; the plan at chain budget `budget` itself (what planning on the
 * chain's bound alone gives, and fits when that bound holds) replaces its result when it
 * fits and is faster, or as fast in less memory, so that the search never does worse than
 * no search. */
static int no_slower_than_at_budget(const search *s, ck_plan_result *result, ck_replay *replay,
                                    ck_err *err)
{
    ck_plan_result other;
    ck_replay other_replay;
    uint64_t least;
    bool planned;
    ck_planner_result_init(&other);
    int rc = fits_at(s, s->budget, &other, &other_replay, &least, &planned, err);
    if (rc == CK_OK && (other_replay.time < replay->time ||
                        (other_replay.time == replay->time && other_replay.peak_bytes < replay->peak_bytes))) {
        ck_plan_result swap = *result;
        *result = other;
        other = swap;
        *replay = other_replay;
    }
    ck_planner_result_free(&other);
    return rc == CK_ERR_INFEASIBLE ? CK_OK : rc;
}

/* Planners plan the chain (whole checkpoints, their peaks bounds where the exact replay
 * knows better), so the chain budget B' to plan at is searched for: the largest, by
 * bisection, whose schedule's exact replay fits the budget, so that memory the chain's
 * bound would leave unused buys speed (a search, not an optimum over exact schedules).
 * Its first probes do not depend on the budget: the top chain budget below `top` (the
 * chain's baseline peak, from which on nothing changes), then p's smallest. The budget is
 * infeasible iff neither fits; *min_budget is then the smaller of their exact peaks: at
 * that budget one of them fits, one byte below neither does. */
static int plan_searched(const search *s, uint64_t top, ck_plan_result *result, ck_replay *replay,
                         uint64_t *min_budget, ck_err *err)
{
    uint64_t least = 0, hi = top ? top - 1 : 0, lo;
    bool planned;
    int rc = fits_at(s, hi, result, replay, &least, &planned, err);
    if (rc != CK_ERR_INFEASIBLE)
        return rc;
    uint64_t top_peak = planned ? replay->peak_bytes : UINT64_MAX;
    lo = planned ? 0 : least;
    rc = smallest_plan(s, &lo, result, replay, min_budget, err);
    if (rc == CK_ERR_INFEASIBLE && top_peak < *min_budget)
        *min_budget = top_peak;
    if (rc == CK_OK)
        rc = bisect(s, lo, hi, result, replay, err);
    return rc == CK_OK ? no_slower_than_at_budget(s, result, replay, err) : rc;
}

/* The chain's baseline peak: where the search's chain budgets end. */
static int chain_top(const ck_chain *c, const ck_schedule *baseline, uint64_t *top, ck_err *err)
{
    ck_replay r;
    int rc = ck_schedule_replay(c, baseline, &r, NULL, NULL, err);
    *top = r.peak_bytes;
    return rc;
}

/* Plans c at budget once the baseline does not fit (its exact peak: baseline_peak). */
static int plan_below_baseline(const ck_chain *c, const ck_schedule_replayer *exact, const ck_planner *p,
                               uint64_t budget, const ck_planner_opts *opts, const ck_schedule *baseline,
                               ck_plan_result *result, ck_replay *replay, uint64_t *min_budget,
                               ck_err *err)
{
    search s = {c, c, exact, p, opts, budget};
    if (!ck_chain_partitioned(c) && !(exact && exact->fn)) /* the chain's replay is exact */
        return plan_at(&s, budget, result, replay, min_budget, err);
    ck_chain plain = *c;
    uint64_t top = 0;
    int rc = ck_chain_partitioned(c) ? plain_view(c, &plain, err) : CK_OK;
    s.plain = &plain;
    if (rc == CK_OK)
        rc = chain_top(&plain, baseline, &top, err);
    if (rc == CK_OK)
        rc = plan_searched(&s, top, result, replay, min_budget, err);
    if (plain.stages != c->stages)
        free(plain.stages);
    return rc;
}

int ck_planner_run_by(const ck_chain *c, const ck_schedule_replayer *exact, const ck_planner *p,
                      uint64_t budget, const ck_planner_opts *opts, ck_plan_result *result,
                      ck_replay *replay, uint64_t *min_budget, ck_err *err)
{
    ck_planner_result_init(result);
    int rc = p->accepts ? p->accepts(c, err) : CK_OK;
    if (rc != CK_OK)
        return rc;
    rc = ck_schedule_baseline(c, &result->schedule, err);
    if (rc == CK_OK)
        rc = ck_schedule_replay_by(exact, c, &result->schedule, replay, err);
    if (rc == CK_OK && replay->peak_bytes <= budget && !p->whatever_the_budget)
        return check_length("the store-everything schedule", result, err);
    ck_schedule baseline = result->schedule;
    ck_planner_result_init(result);
    uint64_t baseline_peak = replay->peak_bytes;
    if (rc == CK_OK)
        rc = plan_below_baseline(c, exact, p, budget, opts, &baseline, result, replay, min_budget, err);
    ck_schedule_free(&baseline);
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

int ck_planner_run(const ck_chain *c, const ck_planner *p, uint64_t budget,
                  const ck_planner_opts *opts, ck_plan_result *result, ck_replay *replay,
                  uint64_t *min_budget, ck_err *err)
{
    return ck_planner_run_by(c, NULL, p, budget, opts, result, replay, min_budget, err);
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
