/* plan: plan files, `ckplan-plan/1` (docs/plan-format.md). */
#ifndef CK_PLAN_IO_H
#define CK_PLAN_IO_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "planner/derive.h"
#include "planner/model.h"
#include "planner/pipeline.h"
#include "planner/planner.h"
#include "planner/schedule.h"
#include "planner/warning.h"

#define CK_PLAN_FORMAT "ckplan-plan/1"

/* Which stage is which (a plan's `stage_info`): the chain's stage names and, for a model,
 * the nodes each stage covers: stage i is nodes [stage_first[i], stage_first[i+1]). */
typedef struct {
    const ck_chain *chain;
    const ck_model *model;     /* NULL for a chain file */
    const size_t *stage_first; /* model only, chain->n_stages + 1 entries (ck_derive_chain) */
} ck_plan_stage_map;

/* Every-layer checkpointing's figures (planner/layers.h, ck_layers_every) beside a plan's,
 * from the replay of its schedule on the plan's chain. */
typedef struct {
    ck_replay replay;
    size_t layers; /* how many it checkpoints: a chain file's stages */
} ck_plan_every;

/* Everything a plan file records. The replays are of the plan's schedule and of the
 * store-everything baseline; every predicted figure in the file is computed from them. */
typedef struct {
    const char *planner;
    const char *model_path, *model_sha256;
    const ck_model_opts *model_opts; /* model.options; NULL or empty: none written */
    uint64_t budget_bytes; /* the whole step's budget, as given */
    uint64_t static_bytes;
    const ck_static_mem *statics; /* model files: model.parameters and predicted.static; else NULL */
    size_t stages;
    ck_replay predicted, baseline;
    const ck_plan_every *every_layer; /* predicted.every_layer; NULL: none written */
    const ck_plan_result *result;
    bool baseline_fits;      /* the budget holds the baseline, so it is the plan */
    const char *granularity; /* NULL for a chain file */
    const char *time_unit;   /* "s" for models; NULL when the chain's own unit */
    uint32_t slots;          /* dp only; 0 for --slots exact */
    const char *costs_path;  /* the profiled costs the times came from, or NULL */
    const ck_cost_model *cost_model; /* the roofline rates they came from, or NULL */
    ck_plan_stage_map stage_map;     /* chain NULL: no stage_info is written; its chain
                                        names F_all variants, so a schedule with any needs it */
    const char *device;              /* details.device: --device's name, or NULL */
    const ck_warnings *warnings;     /* `warnings`; NULL or empty: none written */
    const ck_pipeline *pipeline;     /* a pipeline layout's ranks, planned; else NULL. Then
                                        the figures, statics and schedule are its worst
                                        rank's (its first chunk's schedule) */
} ck_plan_doc;

/* predicted.static: static_bytes by part, in bytes: parameters, gradients,
 * optimizer_state, master_weights, inputs, gather_buffers, reduce_scatter_buffers, in this
 * order (one rank's under a layout; the last two 0 when a plan written before them lacks
 * them). */
#define CK_PLAN_STATIC_PARTS 7
typedef struct {
    uint64_t bytes[CK_PLAN_STATIC_PARTS];
} ck_plan_static;

/* The `predicted` object of a plan file (spec section 4, and ckplan's predicted.static). */
typedef struct {
    uint64_t peak_bytes, activation_peak_bytes, static_bytes;
    uint64_t baseline_peak_bytes, baseline_activation_peak_bytes;
    double time, baseline_time, overhead;
    bool has_static; /* false when the file has no predicted.static (chain files, older plans) */
    ck_plan_static statics;
    bool has_every; /* predicted.every_layer given: its figures follow */
    uint64_t every_layers, every_peak_bytes, every_activation_peak_bytes;
    double every_time, every_overhead;
} ck_plan_figures;

/* A pipeline plan's `pipeline` object as read back (docs/plan-format.md). */
typedef struct {
    uint64_t first_stage, end_stage, layers, in_flight, checkpoint_bytes, microbatch_peak_bytes;
} ck_plan_pipeline_chunk;
typedef struct {
    uint64_t in_flight, static_bytes, activation_bytes, total_bytes, chain_budget_bytes;
    size_t n_chunks;
    ck_plan_pipeline_chunk *chunks;
} ck_plan_pipeline_rank;
typedef struct {
    bool given; /* false: no pipeline layout, nothing else set */
    uint64_t stages, microbatches, virtual_stages, worst_rank;
    size_t n_ranks;
    ck_plan_pipeline_rank *ranks;
} ck_plan_pipeline;

/* One entry of stage_info as read back. */
typedef struct {
    char *name;
    bool has_nodes; /* false when the entry lists none (plans of chain files) */
    size_t n_nodes;
    char **nodes;
} ck_plan_stage;

/* An F_all of a plan's schedule that names a variant other than "all" ("variant": NAME);
 * the name is the chain's, bound to a number by ck_plan_bind_variants. */
typedef struct {
    size_t op; /* its index in the schedule */
    char *name;
} ck_plan_variant;

/* A plan file as read back: what `ckplan run` needs to execute and check it. The figures
 * are the file's claims; planner/plan_check replays the schedule to check them. */
typedef struct {
    char *planner, *model_path, *model_sha256;
    ck_model_opts model_opts; /* model.options; its strings point into model_opts_json */
    cJSON *model_opts_json;   /* owned copy of model.options, or NULL */
    bool has_parameters;      /* model.parameters given (model files, from this version on) */
    uint64_t parameters;
    char *granularity; /* NULL when the plan was made from a chain file */
    char *costs_path;  /* details.costs: the profiled costs the times came from, or NULL */
    bool has_cost_model;
    ck_cost_model cost_model; /* details.cost_model, when has_cost_model */
    char *device;             /* details.device, or NULL */
    uint64_t budget_bytes;
    ck_plan_figures predicted;
    size_t stages;
    ck_plan_stage *stage_info; /* `stages` entries, or NULL when the file has none (older plans) */
    ck_schedule schedule;      /* every F_all as "all" until bound */
    ck_plan_variant *variants; /* n_variants entries, in schedule order */
    size_t n_variants, variants_cap;
    ck_plan_pipeline pipeline;
} ck_plan_file;

/* s's parts as predicted.static records them. */
void ck_plan_static_of(const ck_static_mem *s, ck_plan_static *out);
/* The JSON path of part i (below CK_PLAN_STATIC_PARTS): "predicted.static.gradients". */
const char *ck_plan_static_path(size_t i);

/* time / baseline_time - 1, and 0 when the baseline takes no time. */
double ck_plan_overhead(double time, double baseline_time);

/* The plan as a JSON document; NULL when out of memory. */
cJSON *ck_plan_to_json(const ck_plan_doc *d);

/* Reads a `ckplan-plan/1` document; `file` names it in messages. The schedule is checked
 * for form (known operations, stages below `stages`), not replayed: that needs the chain
 * (planner/plan_check.h). model.sha256 must be 64 hexadecimal digits, in either case.
 * stage_info, when present, must have `stages` entries of the form ckplan writes; whether
 * they are the model's stages is planner/plan_check's question too. */
int ck_plan_from_json(const cJSON *root, const char *file, ck_plan_file *out, ck_err *err);
void ck_plan_file_free(ck_plan_file *p);

/* The `predicted` object of root into *f, every field checked (graph plans have the same). */
int ck_plan_predicted_from_json(const cJSON *root, const char *file, ck_plan_figures *f, ck_err *err);
/* CK_OK when sha (model.sha256) is 64 hexadecimal digits. */
int ck_plan_check_sha256(const char *sha, const char *file, ck_err *err);

/* model.options: what the command line changed in the model, so that `run` loads it again
 * the same way; nothing when o is NULL or changes nothing. False when out of memory. */
bool ck_plan_add_model_opts(cJSON *model, const ck_model_opts *o);
/* Reads model.options as ck_plan_add_model_opts writes it into *o, whose strings point into
 * *json, an owned copy of it (NULL when absent); its values are checked when the model is
 * loaded with them. */
int ck_plan_read_model_opts(const cJSON *model, const char *file, ck_model_opts *o, cJSON **json,
                            ck_err *err);
/* The bubble of a pipeline step under (interleaved) 1F1B, as a fraction of its ideal time:
 * (n - 1) / (m v) (Narayanan et al. 2021). */
double ck_plan_pipeline_bubble(uint64_t n, uint64_t m, uint64_t v);
/* Adds `pipeline` for p (nothing when p is NULL); false when out of memory. */
bool ck_plan_pipeline_add_json(cJSON *root, const ck_pipeline *p);
/* Reads root's `pipeline` (present exactly when l is a pipeline layout), checking it
 * against l and f (the plan's predicted figures are its worst rank's). Free with
 * ck_plan_pipeline_free whatever the status. */
int ck_plan_pipeline_read(const cJSON *root, const char *file, const ck_layout *l,
                          const ck_plan_figures *f, ck_plan_pipeline *out, ck_err *err);
void ck_plan_pipeline_free(ck_plan_pipeline *p);

/* p's schedule with each F_all's variant named in the file bound to stage's number in c
 * (the chain of the plan's model), appended to *out. CK_ERR_INPUT naming the operation
 * ("label: schedule[4].variant: stage 2 has no variant \"attn\" (it has all, none)") when
 * the chain lacks one. */
int ck_plan_bind_variants(const ck_plan_file *p, const ck_chain *c, const char *label,
                          ck_schedule *out, ck_err *err);

#endif
