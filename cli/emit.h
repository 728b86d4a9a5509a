/* emit: the plan-based targets of `ckplan emit` (docs/emit.md): a plan as the training
 * stacks users run apply it, printed by target. cli/cmd_emit.c reads the plan, loads its
 * model, sees the schedule per layer (planner/layers.h) and replays what each target
 * expresses; the writers here only print. */
#ifndef CK_EMIT_H
#define CK_EMIT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "planner/err.h"
#include "planner/layers.h"
#include "planner/plan.h"
#include "planner/workload.h"

/* A schedule's figures from its exact replay (ck_workload_replay: the model's program). */
typedef struct {
    uint64_t activation_peak_bytes, peak_bytes; /* peak_bytes adds the static memory */
    double time, overhead;                      /* overhead over storing everything */
    bool fits;                                  /* peak_bytes within the plan's budget */
} ck_emit_figures;

/* What a target prints from. */
typedef struct {
    const char *label;        /* the plan as the user named it */
    const ck_plan_file *plan;
    const ck_workload *w;     /* the plan's model, checked to be the one planned */
    const ck_layers *layers;
    const ck_layers_view *view;   /* the plan's schedule per layer */
    ck_emit_figures planned;      /* the plan's own schedule, replayed */
    ck_emit_figures expressed;    /* view->expressed, replayed */
    ck_emit_figures baseline;     /* storing everything */
} ck_emit_input;

/* CK_OK when plan p runs every F_all as "all"; otherwise CK_ERR_INPUT naming (with label,
 * the plan's file) its first variant: the emitted forms checkpoint whole layers or stages
 * and cannot recompute inside one. */
int ck_emit_check_no_variants(const ck_plan_file *p, const char *label, ck_err *err);

/* The figures of schedule s by in's exact replay, in->baseline's time being the baseline's. */
int ck_emit_replay(const ck_emit_input *in, const ck_schedule *s, ck_emit_figures *out, ck_err *err);

/* "# " comment lines: the plan's origin, what the output expresses, what it cannot, and
 * the figures of f (what it expresses) next to the plan's own. Text from the input (names,
 * paths) goes through ck_human_put_terminal_text, which escapes control characters and
 * bytes that are not UTF-8: no name can end a comment line or break the file's encoding. */
void ck_emit_comment_header(FILE *out, const ck_emit_input *in, const char *what);
void ck_emit_comment_limits(FILE *out, const ck_emit_input *in);
/* The limits alone, one "#   - " line each (ck_layers_describe). */
void ck_emit_comment_limit_list(FILE *out, const ck_emit_input *in);
void ck_emit_comment_figures(FILE *out, const ck_emit_input *in, const char *what,
                             const ck_emit_figures *f);

/* The indices of the checkpointed layers as a Python list: "[1, 2]". */
void ck_emit_put_layer_list(FILE *out, const ck_emit_input *in);

/* The targets: each writes its output for in to out. */
int ck_emit_hf(FILE *out, const ck_emit_input *in, ck_err *err);
int ck_emit_fsdp(FILE *out, const ck_emit_input *in, ck_err *err);
int ck_emit_megatron(FILE *out, const ck_emit_input *in, ck_err *err);
int ck_emit_deepspeed(FILE *out, const ck_emit_input *in, ck_err *err);

#endif
