/* workload: what is planned, loaded from one file: a chain with the static memory beside
 * it, either read from a chain file (`ckplan-chain/1`, static memory 0) or derived from an
 * op-graph model (`ckplan-model/1`), plus the file's identity for the plan. */
#ifndef CK_WORKLOAD_H
#define CK_WORKLOAD_H

#include <stdbool.h>

#include "planner/chain.h"
#include "planner/derive.h"
#include "planner/device.h"
#include "planner/err.h"
#include "planner/graph.h"
#include "planner/lower.h"
#include "planner/model.h"
#include "planner/schedule.h"

typedef struct {
    ck_granularity granularity;
    ck_cost_model cost;
    const char *costs_path; /* measured stage times replacing the cost model, or NULL */
    ck_model_opts model;    /* model files: what the command line changes in the model */
    const ck_device *device; /* --device: its budget and rates, or NULL */
    bool gemm_flops_given, mem_bandwidth_given; /* explicit rates, which the device's yield to */
    bool graphs; /* the caller plans models as graphs: only then is CK_GRAN_NODE taken */
    bool pipelines; /* the caller plans pipeline layouts (planner/pipeline): only then is
                       one taken */
} ck_workload_opts;

typedef struct {
    char *path;
    char sha256[65];   /* of the file's bytes */
    ck_model *model;   /* NULL for a chain file */
    ck_chain chain;
    size_t *stage_first;   /* model: stage i is nodes [stage_first[i], stage_first[i+1]); NULL
                              for a chain file */
    ck_static_mem statics; /* all zero for a chain file */
    ck_lower *lower;       /* model: its chain actions compiled; NULL for a chain file */
    ck_graph *graph;       /* CK_GRAN_NODE: the model's training step as a graph (its chain
                              is the op-granularity one); else NULL */
    uint64_t graph_static_bytes; /* CK_GRAN_NODE: what the graph leaves out and the step
                                    holds throughout: statics.total and a float x_0 */
} ck_workload;

/* Defaults: block granularity, the default cost model. */
void ck_workload_opts_default(ck_workload_opts *o);

/* Loads path, detecting its format from the "format" field, or a Hugging Face config.json
 * (planner/hf: an object with "model_type" and no "format"); a directory stands for its
 * config.json, whose bytes the sha256 is of. */
int ck_workload_load(const char *path, const ck_workload_opts *opts, ck_workload *out, ck_err *err);
void ck_workload_free(ck_workload *w);

/* Replaces the stage times of a model's chain with those of opts->costs_path (checked
 * against the model's sha256 and opts->granularity), as loading with that option does:
 * for a caller that must tell the model's errors from the costs file's. */
int ck_workload_apply_costs(ck_workload *w, const ck_workload_opts *opts, ck_err *err);

/* What a step of schedule s holds, exactly: for a model the replay of its compiled program
 * (ck_lower_replay: F_all's own transient, below the chain's bound), for a chain file the
 * chain's replay. Times and counts are the chain's either way. A model with partitioned
 * checkpoints (--partition-activations) is the exception: the program does not model
 * shards, so its figures are the chain's replay with them (docs/parallel.md). */
int ck_workload_replay(const ck_workload *w, const ck_schedule *s, ck_replay *out,
                       uint64_t *live_after, uint64_t *op_peak, ck_err *err);

/* ck_workload_replay as a replayer for ck_planner_run_by and ck_plan_check_replay: what
 * plan files report and budgets are held to. Its fn is NULL where that is the chain's own
 * replay (chain files, partitioned checkpoints). w must outlive it. */
ck_schedule_replayer ck_workload_replayer(const ck_workload *w);

/* The stage of w's chain (a model's) that begins at node `node`; SIZE_MAX when none does. */
size_t ck_workload_stage_at(const ck_workload *w, size_t node);

const char *ck_workload_granularity_name(ck_granularity g);
/* Parses "op", "block" or "node"; false otherwise. */
bool ck_workload_granularity_parse(const char *name, ck_granularity *out);

#endif
