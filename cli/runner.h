/* runner: what `ckplan plan` and `ckplan run` do to one plan, for them and for `ckplan
 * sweep`, which does the same at many points in one process: plan a workload at a budget
 * into a plan document, and execute a plan into a ckplan-run/1 record. */
#ifndef CK_RUNNER_H
#define CK_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "cli/files.h"
#include "planner/err.h"
#include "planner/plan_check.h"
#include "planner/plan.h"
#include "planner/planner.h"
#include "planner/workload.h"

/* A plan at one budget. */
typedef struct {
    ck_plan_result result;
    ck_replay predicted, baseline;
    ck_plan_doc doc;  /* refers to result and to the workload */
    char *text;       /* the plan file's JSON text, NUL-terminated */
    uint64_t activation_budget; /* what the budget leaves beside the static memory */
    /* When infeasible: the planner's smallest activation budget, and whether the budget
     * does not even hold the static memory. */
    uint64_t min_activation_bytes;
    bool static_too_large;
    ck_warnings warnings; /* of planning w for training, whatever the status */
    /* Every-layer checkpointing (ck_layers_every) replayed on w's chain, as the plan is,
     * for users to compare the plan with (doc.every_layer points here); not with a
     * pipeline layout, nor for a model whose layers are unknown. */
    bool have_every;
    ck_plan_every every;
    /* A pipeline layout: its ranks, planned (doc.pipeline points here); then result and
     * the replays are the worst rank's first chunk's, and when infeasible the ranks say
     * which do not fit. */
    bool pipelined;
    ck_pipeline pipeline;
} ck_planned;

/* Plans w at the whole-step `budget` (per GPU); a pipeline layout rank by rank
 * (planner/pipeline). CK_OK with out->doc and out->text filled;
 * CK_ERR_INFEASIBLE with out->min_activation_bytes (also when the static memory alone is
 * over budget, then out->static_too_large); other statuses with err. Free with
 * ck_runner_planned_free whatever the status. */
int ck_runner_plan(const ck_workload *w, const ck_planner *planner, uint64_t budget,
                   const ck_planner_opts *popts, const ck_workload_opts *wopts, ck_planned *out,
                   ck_err *err);
void ck_runner_planned_free(ck_planned *p);

/* Of a plan that was CK_ERR_INFEASIBLE: the smallest whole-step budget (per GPU) at which
 * the planner fits w, and the static memory of the rank that needs it (a pipeline's worst,
 * the rank that needs the most) into *static_bytes unless it is NULL. */
uint64_t ck_runner_min_budget(const ck_workload *w, const ck_planned *p, uint64_t *static_bytes);

/* Reads the plan file at path into *out (free it with ck_plan_file_free on CK_OK) and,
 * when sha256 is non-NULL (65 bytes), the SHA-256 of its bytes in hexadecimal. */
int ck_runner_read_plan(const char *path, ck_plan_file *out, char *sha256, ck_err *err);

/* The file a plan names at `path`: a relative path is relative to the plan's directory,
 * unless no such file is there and one is here. NULL when out of memory; caller frees. */
char *ck_runner_plan_relative(const char *plan_path, const char *path);

/* Loads the model plan p names into *w, derived as the plan says (granularity; times from
 * its roofline rates, the default ones when it does not say, or from its costs file; a
 * relative path is looked for beside plan_path first), and checks that it is the one
 * planned (model.sha256, stages, stage_info). Errors name label (the plan as the user
 * named it), since the user gave only the plan. Free *w with ck_workload_free on CK_OK. */
int ck_runner_load_plan_model(const char *plan_path, const char *label, const ck_plan_file *p,
                              ck_workload *w, ck_err *err);

/* How `run` executes a plan. plan_path names the plan in the record, and the plan's
 * relative paths are relative to its directory; label names the plan in messages (NULL:
 * plan_path). */
typedef struct {
    const char *plan_path, *label, *runs_path;
    const char *svg_path, *trace_path; /* or NULL: the measured timeline, the trace */
    bool verify, quiet, stateful_rng;
    uint64_t steps, threads, seed;
    uint64_t ranks; /* 0: one process; else the ranks of `run --ranks` that share this
                       machine (ck_runner_fits_here) */
} ck_run_settings;

/* ck_files_check_apart for the files a run writes (--runs, --svg, --trace) against
 * inputs: `run` checks its PLAN, ck_runner_run the plan's files (ck_runner_plan_files_apart). */
int ck_runner_outputs_apart(const ck_run_settings *s, const ck_named_file *inputs, size_t n_inputs,
                            ck_err *err);

/* ck_files_check_apart for outputs against the files plan p (read from plan_path) makes a
 * command read besides the plan: its model (w, loaded from it) and its costs file. */
int ck_runner_plan_files_apart(const char *cmd, const char *plan_path, const ck_plan_file *p,
                               const ck_workload *w, const ck_named_file *outputs, size_t n_outputs,
                               ck_err *err);

/* The memory a run may use: the size in CKPLAN_RUN_MEMORY when set, otherwise
 * MemAvailable (bytes 0 when unknown: then nothing is refused). CK_ERR_INPUT when
 * CKPLAN_RUN_MEMORY is set to anything but a positive size. */
typedef struct {
    uint64_t bytes;
    const char *source; /* completes "more than the 8 GiB ...": where bytes came from */
} ck_run_memory;
int ck_runner_memory(ck_run_memory *out, ck_err *err);

/* CK_OK when what runs a plan with these (replayed) figures fits in m: with ranks 0 one
 * process, the plan beside its baseline (`run`, `sweep --run`); else that many processes
 * on this machine, each holding one rank's step of the plan and no baseline (`run
 * --ranks`: the ranks share the machine's memory). CK_ERR_INPUT saying how much it needs
 * otherwise (for the caller to say of what). */
int ck_runner_fits_here(const ck_run_memory *m, const ck_plan_figures *f, uint64_t ranks,
                        ck_err *err);

/* What a plan runs on: its model's workload (loaded here, or the caller's) and the replay
 * of its schedule there. */
typedef struct {
    ck_workload loaded;
    bool have_loaded;
    const ck_workload *w;
    ck_schedule schedule; /* the plan's, its variants bound to w's chain */
    ck_plan_check check;  /* check.replayed: the figures the run predicts, exact (for a
                             model, its compiled program's activation peaks) */
} ck_runner_basis;

/* Loads what plan p runs on (the model unless `given`), binds and replays its schedule,
 * checks the plan file's figures against the replay (differences in b->check) and that
 * running it fits here. s->label must be set. Free *b with ck_runner_basis_free whatever
 * the status. */
int ck_runner_prepare(const ck_run_settings *s, const ck_plan_file *p, const ck_workload *given,
                      ck_runner_basis *b, ck_err *err);
void ck_runner_basis_free(ck_runner_basis *b);

/* Runs the plan and its baseline, appends the ckplan-run/1 record to s->runs_path and,
 * unless quiet, prints the summary. plan_sha is the SHA-256 of the plan's bytes. w is the
 * plan's workload when the caller has it loaded (sweep), or NULL: then the model the plan
 * names is loaded, and must be the one planned. The plan's figures are checked against
 * the replay of its schedule (planner/plan_check.h) and only the replayed ones are used;
 * differences are recorded, and warned about without --verify. *passed (may be NULL) is
 * the verification's outcome. Returns CK_ERR_RUNTIME when --verify was asked for and
 * failed (the record is written all the same), and CK_INTERRUPTED when SIGINT arrived
 * (polled between operations; then no record is written). */
int ck_runner_run(const ck_run_settings *s, const ck_plan_file *plan, const char *plan_sha,
                  const ck_workload *w, bool *passed, ck_err *err);

#endif
