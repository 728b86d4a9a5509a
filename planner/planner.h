/* planner: the registry of checkpointing planners and the one entry point that runs them.
 *
 * A planner turns a chain and an activation budget into a schedule. It may replay
 * candidate schedules to choose among them, but the figures ckplan reports are always
 * the exact replay of the schedule it returns (ck_planner_run_by does that replay). */
#ifndef CK_PLANNERS_H
#define CK_PLANNERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "planner/chain.h"
#include "planner/err.h"
#include "planner/schedule.h"

#define CK_DEFAULT_SLOTS 500

typedef struct {
    uint32_t slots; /* dp: the budget is divided into this many memory units (>= 1) */
    bool exact;     /* dp: 1-byte units whatever the budget (--slots exact), slots unused */
    bool variants;  /* dp: choose each saving forward's variant among its stage's (selective
                       recompute); false: every F_all keeps everything ("all"), which is
                       checkpointing whole stages only */
    uint32_t threads;       /* dp: workers filling its tables; 0: one per online processor
                               (planner/dp_rows.h); the schedule is the same for any */
    const atomic_int *stop; /* or NULL: planners whose work can take long (dp's tables)
                               poll it and return CK_INTERRUPTED once it is non-zero */
} ck_planner_opts;

/* What a planner returns besides its schedule; -1 / 0 where a field does not apply. */
typedef struct {
    ck_schedule schedule;
    long snapshots;       /* revolve: snapshots, counting the one holding x_0 */
    long segments;        /* sqrt, chen: number of segments; every: of layers */
    uint64_t memory_unit; /* dp: bytes per memory slot */
} ck_plan_result;

typedef struct {
    const char *name;
    const char *summary; /* one line for --help */
    /* On success, result->schedule is valid and replays to a peak <= budget (bytes of
     * activation memory). When no schedule of this planner fits, returns
     * CK_ERR_INFEASIBLE and sets *min_budget to the smallest budget at which this planner
     * finds one (a replayed peak). Any other status is an error described in err. */
    int (*plan)(const ck_chain *c, uint64_t budget, const ck_planner_opts *opts,
                ck_plan_result *result, uint64_t *min_budget, ck_err *err);
    /* CK_OK when the planner can plan c at all, whatever the budget, else CK_ERR_INPUT
     * saying why (every needs c's layers); NULL: any chain. Checked before the baseline
     * shortcut of ck_planner_run, so that a budget large enough does not hide it. */
    int (*accepts)(const ck_chain *c, ck_err *err);
    /* The planner is a practice users compare against, not a search (every): its schedule
     * is planned whatever the budget, even where storing everything fits. */
    bool whatever_the_budget;
} ck_planner;

extern const ck_planner ck_planner_none, ck_planner_every, ck_planner_sqrt, ck_planner_chen,
    ck_planner_revolve, ck_planner_dp;

/* All planners in the order --help lists them, NULL-terminated. */
extern const ck_planner *const ck_planners[];

/* The planner called name, or NULL. */
const ck_planner *ck_planner_find(const char *name);

/* The planners' names for messages, in registry order: "dp, revolve, ..., sqrt or none"
 * (truncated to fit len). */
void ck_planner_names(char *buf, size_t len);

/* For planners whose schedule does not depend on the budget: replays s and returns CK_OK
 * when it fits, else CK_ERR_INFEASIBLE with *min_budget set to its peak. */
int ck_planner_check_fit(const ck_chain *c, const ck_schedule *s, uint64_t budget,
                         uint64_t *min_budget, ck_err *err);

/* Sets the result's fields to "not applicable" and its schedule to empty. */
void ck_planner_result_init(ck_plan_result *r);
void ck_planner_result_free(ck_plan_result *r);

/* A whole-step budget holds the static memory (parameters, gradients, optimizer state,
 * inputs) beside the activations that planners plan: these two say how they add up. */
/* The activation budget that `budget` leaves beside static_bytes: false, with
 * *activation 0, when the static memory alone is over budget. */
bool ck_planner_activation_budget(uint64_t budget, uint64_t static_bytes, uint64_t *activation);
/* The whole-step budget that holds static_bytes and activation_bytes, UINT64_MAX when
 * that is over 64 bits. */
uint64_t ck_planner_step_budget(uint64_t static_bytes, uint64_t activation_bytes);

/* Plans c under budget with planner p and replays the result into *replay by `exact`
 * (NULL: the chain's own replay of c), which is also what the budget holds: a schedule
 * fits iff its exact peak is at most budget. When the store-everything schedule fits,
 * that is the plan, whatever p (that accepts c), unless p plans
 * whatever the budget (every). Where the chain's replay is exact (a chain file, exact
 * NULL, no partitioned checkpoints) p plans c at budget and, when it cannot,
 * *min_budget is p's smallest budget. Otherwise (a model's program, of whose peaks the
 * chain's are bounds; partitioned checkpoints, which planners do not see) p plans at the
 * chain budget found by a search (planner.c, plan_searched): the largest whose schedule's
 * exact peak fits; on CK_ERR_INFEASIBLE *min_budget is the smaller exact peak of p's
 * schedules at its smallest chain budget and at the baseline's chain peak less one byte:
 * a plan is found at that budget and not one byte below. Either way *min_budget is the
 * baseline's exact peak when that is lower. */
int ck_planner_run_by(const ck_chain *c, const ck_schedule_replayer *exact, const ck_planner *p,
                      uint64_t budget, const ck_planner_opts *opts, ck_plan_result *result,
                      ck_replay *replay, uint64_t *min_budget, ck_err *err);
/* ck_planner_run_by with the chain's own replay. */
int ck_planner_run(const ck_chain *c, const ck_planner *p, uint64_t budget,
                  const ck_planner_opts *opts, ck_plan_result *result, ck_replay *replay,
                  uint64_t *min_budget, ck_err *err);

#endif
