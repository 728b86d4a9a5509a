/* graph_milp: the exact planner of training graphs, Checkmate's mixed-integer program
 * (Jain et al. 2020, "Checkmate: Breaking the Memory Wall with Optimal Tensor
 * Rematerialization", MLSys 2020, its frontier-advancing partitioned form) solved with
 * COIN-OR CBC (docs/planners.md, "milp").
 *
 * Exact over Checkmate's class of schedules: cut at the first computation of each node,
 * a schedule falls into n stages; stage t ends with node t's first computation (so nodes
 * are first computed in id order) and before it recomputes any nodes below t, each at
 * most once and in ascending id order, freeing whatever it likes. "optimal" means that CBC
 * proved no schedule of that class faster (within a relative 1e-6); schedules outside it
 * (another first-computation order, a node twice in one stage) can be faster still. */
#ifndef CK_GRAPH_MILP_H
#define CK_GRAPH_MILP_H

#include "planner/graph.h"

extern const ck_graph_planner ck_graph_planner_milp;

#endif
