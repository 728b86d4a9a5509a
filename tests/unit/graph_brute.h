/* graph_brute: the exact optimum of a small graph by exhaustive search over schedules under
 * graph.h's replay rules (a shortest path over states, time as the cost), knowing nothing
 * of any planner, so that the planners can be checked against it. Up to 10 nodes.
 *
 * Two sets of schedules: every schedule (states: which nodes are resident, which have been
 * computed), and Checkmate's class, the one planner/graph_milp.h solves exactly over
 * (states: the stage t, the next id k the stage may compute, which nodes are resident:
 * stage t computes some of 0 .. t-1 in ascending order, each at most once, then t). */
#ifndef CK_GRAPH_BRUTE_H
#define CK_GRAPH_BRUTE_H

#include <stdbool.h>
#include <stdint.h>

#include "planner/err.h"
#include "planner/graph.h"

typedef enum { CK_GRAPH_BRUTE_ALL, CK_GRAPH_BRUTE_STAGED } ck_graph_brute_space;

/* The least time of a schedule of `space` whose peak is at most budget, in *time;
 * CK_ERR_INFEASIBLE when there is none. */
int ck_graph_brute_best(const ck_graph *g, ck_graph_brute_space space, uint64_t budget,
                        double *time, ck_err *err);
/* The least peak of a schedule of `space`. */
int ck_graph_brute_min_peak(const ck_graph *g, ck_graph_brute_space space, uint64_t *peak,
                            ck_err *err);

#endif
