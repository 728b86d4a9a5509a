/* stage: the liveness rules of one stage, as a walk of allocation events (docs/model-format.md
 * section 4). Chain derivation (planner/derive) tallies the events to size a stage's saved and
 * transient bytes; the executor (sim/exec) allocates and frees real buffers on the same
 * events. One walk serving both is what keeps predicted and measured memory from drifting
 * apart. */
#ifndef CK_STAGE_H
#define CK_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/err.h"
#include "planner/model.h"

/* last_use[t] (n_tensors entries) receives the last node reading tensor t (0 if none). */
void ck_model_last_uses(const ck_model *m, size_t *last_use);

/* Whether tensor t is a held input: an input other than x_0, static for the whole step. */
bool ck_model_is_held(const ck_model *m, size_t t);

/* Marks (mark[t] = stamp) the tensors nodes [first, end) save and sums their bytes once
 * each (internal tensors included, held inputs excluded); false on overflow. */
bool ck_stage_mark_saved(const ck_model *m, size_t first, size_t end, size_t *mark, size_t stamp,
                         uint64_t *bytes);

/* One stage: nodes [first, end), its input tensor `in` (x_i) and output `out` (x_{i+1}); the
 * tensors its nodes save are marked with `stamp` in `mark` (ck_stage_mark_saved). */
typedef struct {
    const ck_model *m;
    const size_t *last_use;
    const size_t *mark;
    size_t stamp;
    size_t first, end, in, out;
} ck_stage_rules;

/* The rules of stage i of the stages given by first[] (stage i is nodes [first[i],
 * first[i+1]), as ck_derive_chain returns them), marking what it saves in mark
 * (n_tensors entries, shared by all stages: each uses its own stamp, i + 1); false when the
 * saved bytes overflow. */
bool ck_stage_rules_init(ck_stage_rules *r, const ck_model *m, const size_t *first, size_t i,
                         const size_t *last_use, size_t *mark);

/* Whether tensor t is made by one of the stage's nodes. */
bool ck_stage_made_here(const ck_stage_rules *r, size_t t);
/* Whether tensor t, made here, belongs to x̄_{i+1}: saved by a node of the stage, or x_{i+1}. */
bool ck_stage_keeps(const ck_stage_rules *r, size_t t);

typedef enum {
    CK_EV_ALLOC,          /* node's output tensor */
    CK_EV_ALLOC_INTERNAL, /* node's internal saved tensor number `saved` */
    CK_EV_ALLOC_WS,       /* node's workspace for this pass */
    CK_EV_RUN,            /* run node's forward or backward: the moment of its peak */
    CK_EV_FREE_WS,
    CK_EV_FREE_INTERNAL,
    CK_EV_FREE,           /* tensor `tensor` after its last reader in the stage (the loss: its
                             output, when it finishes) */
    CK_EV_ALLOC_GRAD,     /* zeroed gradient of `tensor`, by the backward of its last reader */
    CK_EV_FREE_GRAD       /* gradient of `tensor`, after the backward of its producer */
} ck_stage_ev_kind;

typedef struct {
    ck_stage_ev_kind kind;
    size_t node;
    size_t tensor; /* CK_EV_ALLOC, CK_EV_FREE, CK_EV_*_GRAD */
    size_t saved;  /* CK_EV_*_INTERNAL: index in the node's info.saved */
    uint64_t bytes;
    /* Forward: the allocation is part of the operation's result (x̄_{i+1} saving, x_{i+1}
     * not saving), so it outlives the walk and no CK_EV_FREE follows for it. */
    bool kept;
} ck_stage_ev;

/* Called for every event in order; a status other than CK_OK stops the walk and is returned. */
typedef int (*ck_stage_cb)(void *ctx, const ck_stage_ev *ev, ck_err *err);

/* The forward of the stage, saving (F_all: x̄_{i+1} is kept) or not (F_ck, F_none: only
 * x_{i+1} is kept; internal tensors are freed when their node finishes). */
int ck_stage_forward(const ck_stage_rules *r, bool saving, ck_stage_cb cb, void *ctx, ck_err *err);
/* The backward: nodes in reverse. y_{i+1}, y_i, x̄_{i+1} and the input are the caller's. */
int ck_stage_backward(const ck_stage_rules *r, ck_stage_cb cb, void *ctx, ck_err *err);
/* The loss node's forward and backward together: its output, internal tensors and the larger
 * of its two workspaces, all freed when it finishes. y_L is the caller's. */
int ck_stage_loss(const ck_model *m, ck_stage_cb cb, void *ctx, ck_err *err);

#endif
