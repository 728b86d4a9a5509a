/* graph_plan: plan files of graphs, `ckplan-plan/1` with "kind": "graph"
 * (docs/plan-format.md, "Graph plans"): written from a schedule and its replays, read back
 * for `ckplan run` to replay. */
#ifndef CK_GRAPH_PLAN_H
#define CK_GRAPH_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "planner/err.h"
#include "planner/graph.h"
#include "planner/plan.h"

#define CK_GRAPH_PLAN_KIND "graph"

/* Everything a graph plan records; every figure comes from the two replays. */
typedef struct {
    const char *planner;
    const char *model_path, *model_sha256;
    uint64_t budget_bytes;
    const ck_graph *graph;
    const ck_graph_plan_result *result; /* its schedule, and details.status, bound, gap */
    ck_graph_replay predicted, baseline;
    double time_limit_s; /* details.time_limit_seconds when > 0 */
} ck_graph_plan_doc;

/* The `predicted` figures of a graph plan: no static memory, the peaks are the replays'. */
void ck_graph_plan_figures(const ck_graph_replay *plan, const ck_graph_replay *baseline,
                           ck_plan_figures *out);

/* The plan as a JSON document; NULL when out of memory. */
cJSON *ck_graph_plan_to_json(const ck_graph_plan_doc *d);

/* A graph plan as read back; its figures are the file's claims, to be replayed. */
typedef struct {
    char *planner, *model_path, *model_sha256;
    uint64_t budget_bytes;
    size_t nodes;
    ck_plan_figures predicted;
    ck_graph_schedule schedule;
} ck_graph_plan_file;

/* Whether a plan document is a graph plan ("kind": "graph"). */
bool ck_graph_plan_is_graph(const cJSON *root);

/* Reads a graph plan; `file` names it in messages. The schedule is checked for form
 * (operations compute and free, nodes below `nodes`), not replayed: that needs the graph. */
int ck_graph_plan_from_json(const cJSON *root, const char *file, ck_graph_plan_file *out,
                            ck_err *err);
void ck_graph_plan_file_free(ck_graph_plan_file *p);

#endif
