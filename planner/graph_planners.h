/* graph_planners: the registry of graph planners (planner/graph.h's ck_graph_planner) and
 * the one entry point that runs them: it replays the schedule a planner returns, and every
 * figure reported comes from that replay. */
#ifndef CK_GRAPH_PLANNERS_H
#define CK_GRAPH_PLANNERS_H

#include <stdint.h>

#include "planner/err.h"
#include "planner/graph.h"

/* none: the no-rematerialization baseline. fast: the default (planner/graph_fast.c). */
extern const ck_graph_planner ck_graph_planner_none, ck_graph_planner_fast;

/* All graph planners in the order --help lists them, NULL-terminated; the first is the
 * default. */
extern const ck_graph_planner *const ck_graph_planners[];

/* The graph planner called name, or NULL. */
const ck_graph_planner *ck_graph_planners_find(const char *name);

/* Runs p on g at budget and replays its schedule into *replay. CK_OK: result holds a valid
 * schedule whose replayed peak is <= budget (a planner that breaks its promise is a
 * CK_ERR_RUNTIME naming it). CK_ERR_INFEASIBLE: *min_budget as the planner says. Free
 * result with ck_graph_plan_result_free whatever the status. */
int ck_graph_planners_run(const ck_graph *g, const ck_graph_planner *p, uint64_t budget,
                          const ck_graph_planner_opts *opts, ck_graph_plan_result *result,
                          ck_graph_replay *replay, uint64_t *min_budget, ck_err *err);

#endif
