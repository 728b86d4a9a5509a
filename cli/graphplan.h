/* graphplan: `ckplan plan` and `ckplan run` on Checkmate training graphs (planner/graph.h):
 * plan a graph node by node into a graph plan ("kind": "graph"), and replay a graph plan to
 * check its figures. Graph plans are replayed, never executed: a graph has no kernels. */
#ifndef CK_GRAPHPLAN_H
#define CK_GRAPHPLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "planner/err.h"
#include "planner/graph.h"

typedef struct {
    const char *graph_path, *output;
    const char *planner; /* a name from ck_graph_planners, or NULL: the default */
    uint64_t budget;
    bool json;
    bool min_budget;     /* print the planner's smallest feasible budget instead of planning */
    double time_limit_s; /* --time-limit, for planners that take one; 0: none */
} ck_graphplan_args;

/* Whether the file at path is meant as a Checkmate graph (ck_graph_is_checkmate). A file
 * that cannot be read or parsed is not one (whoever loads it next says why). */
bool ck_graphplan_is_graph_file(const char *path);
/* Whether the file at path is a graph plan ("kind": "graph"), in the same way. */
bool ck_graphplan_is_graph_plan(const char *path);

/* Reads the graph at path, and the SHA-256 of its bytes into sha256 (65 bytes). */
int ck_graphplan_load(const char *path, ck_graph *g, char *sha256, ck_err *err);

/* ckplan plan GRAPH: plans, writes the plan atomically, prints it (--json) or a summary;
 * prints its own messages and returns the exit code. */
int ck_graphplan_plan(const ck_graphplan_args *a);

/* ckplan run PLAN for a graph plan: loads the graph it names (beside the plan first),
 * checks its sha256, replays the schedule and the baseline and compares them with the
 * plan file's figures; prints the result and returns the exit code (0 confirmed, 1 a
 * schedule that is invalid or figures that differ, 2 input errors). */
int ck_graphplan_run(const char *plan_path, bool quiet);

#endif
