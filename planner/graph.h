/* graph: training graphs planned node by node (docs/plan-format.md, "Graph plans"), their
 * schedules of compute and free operations, and the replay that every figure of a graph
 * plan comes from.
 *
 * A graph is a DAG of n nodes in topological order (every input of node v is below v).
 * Each node makes one output of `bytes` bytes at a cost of `cost`. Forward nodes come
 * first; the first backward node is the loss. Replay rules (issue 13, item 2): memory
 * starts empty; `compute v` needs every input of v resident and v itself not resident,
 * makes v resident and costs v's cost; the peak is the largest resident total right after
 * a compute, plus that node's transient bytes (none in Checkmate's graphs); `free v`
 * drops a resident v; a valid schedule computes every node at least once and ends with
 * every backward node computed. */
#ifndef CK_GRAPH_H
#define CK_GRAPH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "planner/err.h"

/* Graphs with more nodes than this are refused: planning time grows faster than the graph.
 * The environment variable CKPLAN_MAX_GRAPH_NODES changes it. */
#define CK_GRAPH_MAX_NODES 100000

typedef struct {
    char *name;
    bool backward;
    double cost;     /* Checkmate's cost_cpu: compute cost, in the graph's own unit */
    uint64_t bytes;  /* Checkmate's cost_ram: bytes of the node's output */
    uint64_t transient_bytes; /* held only while it computes (a kernel's workspace);
                                 0 in Checkmate's graphs */
    size_t n_inputs;
    size_t *inputs;  /* node ids this node reads, each below its own id, no repeats */
    size_t n_users;
    size_t *users;   /* node ids that read this node, ascending */
} ck_graph_node;

typedef struct {
    char *name;           /* graph.name, or "" */
    size_t n_nodes;
    ck_graph_node *nodes; /* id = index */
    size_t loss;          /* the first backward node (n_nodes when there is none) */
} ck_graph;

/* Reads a Checkmate node-link document (networkx node-link JSON: nodes[] with id, name,
 * backward, cost_cpu, cost_ram; links[] with source, target); `file` names it in messages,
 * with the JSON path of what is wrong. Ids must be 0 .. n-1 and every link go from a lower
 * id to a higher one. */
int ck_graph_from_checkmate(const cJSON *root, const char *file, ck_graph *out, ck_err *err);
/* Whether a parsed document is meant as a Checkmate graph: an object with no `format`
 * (every ckplan format has one) and a `nodes` or `links` member; whether it is a valid one
 * is ck_graph_from_checkmate's to say. */
bool ck_graph_is_checkmate(const cJSON *root);
/* Completes a graph built node by node (name, backward, cost, bytes, inputs; each array
 * malloc'ed, the graph's own): checks what the loader checks with JSON paths (inputs below
 * the node's id, ascending, no repeats; forward nodes before backward ones; costs finite and
 * non-negative; the bytes of all nodes together below 2^53, so that no resident total can
 * overflow or leave what JSON keeps exact), and fills users[] and loss. */
int ck_graph_finish(ck_graph *g, ck_err *err);
/* g as a Checkmate node-link document that ck_graph_from_checkmate reads back (with
 * ckplan's optional node field transient_bytes where it is not 0); NULL when out of
 * memory. Sizes below 2^53 (ck_graph_finish) are exact as JSON numbers. */
cJSON *ck_graph_to_checkmate(const ck_graph *g);
/* No schedule peaks below any node's compute: the node, its inputs and its transient bytes
 * together. The largest such total (below 2^53: ck_graph_finish), and in *node (when not
 * NULL) the first node that needs it. */
uint64_t ck_graph_least_peak(const ck_graph *g, size_t *node);
/* Frees every node's name, inputs and users, the nodes and the name; g is zeroed. */
void ck_graph_free(ck_graph *g);

typedef enum { CK_GRAPH_COMPUTE, CK_GRAPH_FREE } ck_graph_op_kind;

typedef struct {
    ck_graph_op_kind kind;
    size_t node;
} ck_graph_op;

typedef struct {
    ck_graph_op *ops;
    size_t n, cap;
} ck_graph_schedule;

/* Appends an operation; false when out of memory (the schedule is left as it was). */
bool ck_graph_schedule_push(ck_graph_schedule *s, ck_graph_op_kind kind, size_t node);
void ck_graph_schedule_free(ck_graph_schedule *s);

typedef struct {
    uint64_t peak_bytes; /* largest resident total right after a compute */
    double time;         /* sum of the computes' costs */
    size_t computes;     /* compute operations (n_nodes when nothing is recomputed) */
    size_t peak_op;      /* index of the first operation that reaches the peak */
} ck_graph_replay;

/* Replays s on g under the rules above. An invalid schedule returns CK_ERR_INPUT with a
 * message naming the first operation at fault ("schedule[7] (compute 5): needs node 3,
 * which is not resident"). */
int ck_graph_replay_schedule(const ck_graph *g, const ck_graph_schedule *s,
                             ck_graph_replay *out, ck_err *err);

/* The no-rematerialization baseline: every node computed once in id order, each output
 * freed right after its last user is computed (outputs of backward nodes that no node
 * reads stay to the end). */
int ck_graph_schedule_baseline(const ck_graph *g, ck_graph_schedule *out, ck_err *err);

/* What a graph planner may be given. */
typedef struct {
    double time_limit_s;                 /* milp: CBC's time limit; <= 0: none */
    const ck_graph_schedule *warm_start; /* milp: a valid schedule to start from, or NULL */
    const atomic_int *stop;              /* polled by long searches, or NULL */
} ck_graph_planner_opts;

/* What a graph planner returns besides its schedule. */
typedef struct {
    ck_graph_schedule schedule;
    const char *status; /* milp: "optimal" (proven by CBC), "feasible", ...; else NULL */
    double bound;       /* milp: CBC's proven lower bound on the time; NAN when none */
    double gap;         /* milp: (time - bound) / time; NAN when none */
} ck_graph_plan_result;

/* Empties r: no schedule, status NULL, bound and gap NAN. */
void ck_graph_plan_result_init(ck_graph_plan_result *r);
void ck_graph_plan_result_free(ck_graph_plan_result *r);

typedef struct {
    const char *name;
    const char *summary; /* one line for --help */
    /* On success result->schedule is valid and replays to a peak <= budget. When none of
     * this planner's schedules fits, returns CK_ERR_INFEASIBLE (*min_budget: the smallest
     * budget at which it finds one, or 0 when unknown). */
    int (*plan)(const ck_graph *g, uint64_t budget, const ck_graph_planner_opts *opts,
                ck_graph_plan_result *result, uint64_t *min_budget, ck_err *err);
    bool tells_min_budget; /* whether that smallest budget is always known (--min-budget) */
} ck_graph_planner;

#endif
