/* exec: runs training steps of a model, or of a chain file's synthetic stages, under any
 * valid schedule of the five actions (planner/action).
 *
 * Each action is guarded by planner/action. A model's actions are compiled to program
 * instructions (planner/lower) and every tensor is allocated through sim/mem on the
 * events planner/program defines, the ones chain derivation sized the stages with: the
 * tracked activation memory of each action equals ck_lower_replay's to the byte, and the
 * chain's (ck_schedule_replay) except that F_all may stay under it. A chain file's stages
 * run as synthetic work of their declared sizes, exactly as the chain replays. */
#ifndef CK_EXEC_H
#define CK_EXEC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/chain.h"
#include "planner/err.h"
#include "planner/model.h"
#include "planner/schedule.h"
#include "sim/mem.h"
#include "sim/shard.h"

typedef struct ck_exec ck_exec;

/* The optimizers' hyperparameters (torch.optim's names; the emitted PyTorch module uses the
 * same). */
#define CK_EXEC_ADAM_LR 1e-3f
#define CK_EXEC_SGD_LR 1e-2f
#define CK_EXEC_MOMENTUM 0.9f
#define CK_EXEC_ADAMW_WEIGHT_DECAY 0.01f /* torch.optim.AdamW's default */

/* One rank of a data-parallel step (docs/parallel.md, "Running it"): the layout, which rank
 * this is, and the collectives between the ranks. */
typedef struct {
    ck_layout layout;
    uint64_t rank;
    ck_shard_comm comm;
} ck_exec_dp;

typedef struct {
    uint64_t seed;      /* parameters, inputs, targets and dropout all derive from it */
    bool stateful_rng;  /* demonstrates the bug --verify exists for: dropout draws from one
                           sequential generator that recomputation does not rewind */
    bool skip_chain_work; /* chain files: no GEMMs giving operations their declared time
                             (tests that check memory and gradients only) */
    const atomic_int *stop; /* or NULL: when it becomes non-zero (a signal handler sets
                             it), a step stops before its next operation with
                             CK_INTERRUPTED, the step abandoned and its memory released */
    const ck_exec_dp *dp; /* or NULL: one process. Then each step holds what the layout's
                             ZeRO stage keeps (planner/derive's shares and buffers),
                             all-gathers and reduce-scatters with the other ranks, and
                             applies the optimizer to the gradients averaged over the ranks
                             in rank order (sim/shard) */
} ck_exec_opts;

/* What one training step measured. */
typedef struct {
    double loss;
    double seconds;                 /* wall time of the schedule and the optimizer step */
    uint64_t activation_peak_bytes; /* tracked: activations + gradients + workspace */
    uint64_t static_bytes;          /* tracked static memory */
    uint64_t peak_bytes;            /* tracked, every kind: static and activation at once */
} ck_step_stats;

/* Prepares to run model m (or, with m NULL, the synthetic stages of chain c) whose chain is
 * c and whose stage i is nodes [stage_first[i], stage_first[i+1]) (NULL for a chain file).
 * Allocates and initialises parameters, optimizer state and inputs from opts->seed.
 * Tensors, parameters and gradients are stored in their model dtypes (f32, bf16, f16) and
 * computed on in f32 (sim/widen). Refuses (CK_ERR_INPUT) models it cannot execute, such
 * as inputs of a dtype it cannot draw. */
int ck_exec_create(const ck_model *m, const ck_chain *c, const size_t *stage_first,
                   const ck_exec_opts *opts, ck_exec **out, ck_err *err);
void ck_exec_free(ck_exec *e);

/* Puts parameters and optimizer state back to their initial values, so that runs of
 * different schedules start from the same state. */
void ck_exec_reset(ck_exec *e);

/* What each operation of a step measured: every pointer is the caller's array of s->n
 * entries, or NULL when that figure is not wanted. Memory is the tracked activation total
 * (activations + gradients + workspace), the same figure as activation_peak_bytes, so that
 * it compares with the replay's live_after[] and op_peak[]: both equal ck_lower_replay's to
 * the byte for a model and ck_schedule_replay's for a chain file; a model's also equal the
 * chain's, except that an F_all's peak may stay under it (the chain's one fwd_tmp_bytes
 * bounds both forwards). */
typedef struct {
    double *seconds;      /* wall time of the operation */
    double *start;        /* when it started, in seconds since the step started */
    uint64_t *live_after; /* bytes held right after the operation */
    uint64_t *peak;       /* the largest number of bytes held while it ran */
} ck_exec_trace;

/* One training step number `step` (>= 0): zeroes parameter gradients, executes s, applies
 * the optimizer. A schedule that asks for a tensor that is not live returns CK_ERR_INPUT
 * naming the operation; nothing crashes. When trace is non-NULL its non-NULL arrays receive
 * each operation's figures (entries after a failing operation are left as they were). */
int ck_exec_step(ck_exec *e, const ck_schedule *s, uint64_t step, ck_step_stats *stats,
                 const ck_exec_trace *trace, ck_err *err);

/* The one-process reference of a data-parallel step over n ranks (e made without dp):
 * the n microbatches that ranks 0..n-1 run at their step `step` (steps step·n + r, see
 * ck_exec_step_rank) each through s from zeroed gradients, the gradients averaged in rank
 * order as the ranks average them (ck_shard_average), then one optimizer step. */
int ck_exec_step_reference(ck_exec *e, const ck_schedule *s, uint64_t step, uint64_t n, ck_err *err);

/* The step number rank r of n runs its microbatch of data-parallel step `step` as: its
 * inputs and dropout differ from every other rank's. */
uint64_t ck_exec_step_rank(uint64_t step, uint64_t rank, uint64_t n);

/* How many floats ck_exec_parameters and ck_exec_whole_parameters give. */
size_t ck_exec_n_parameters(const ck_exec *e);

/* A model's whole parameters as ck_exec_parameters gives them; under ZeRO-3 gathered from
 * every rank, so all ranks call it together. */
int ck_exec_whole_parameters(ck_exec *e, float *out, ck_err *err);

/* The gradients of the last step (a data-parallel rank's averaged ones: from ZeRO-2 its
 * shard of them): every parameter gradient, concatenated in node order
 * (for a chain file: y_0, each 4 bytes as a float in [0, 1), then the loss). Owned by e; n
 * receives the count. */
const float *ck_exec_gradients(const ck_exec *e, size_t *n);

/* A model's parameters now, as its kernels read them (widened to f32, exactly, from
 * training.param_dtype), into out: ck_exec_n_parameters floats. Not for a ZeRO-3 rank,
 * which holds a shard of them (ck_exec_whole_parameters gathers them). */
void ck_exec_parameters(const ck_exec *e, float *out);

/* The tracker (for its per-kind peaks). */
const ck_mem *ck_exec_memory(const ck_exec *e);

#endif
