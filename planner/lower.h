/* lower: chain actions compiled to the program of a model's training step
 * (planner/program). Stage i is the model's nodes [first[i], first[i+1]); its input x_i is
 * one tensor, its output x_{i+1} another, and x̄_{i+1} is the kept copies of the tensors
 * the stage makes that a backward of the stage reads, x_{i+1} itself, and the internal
 * saved tensors of its nodes. The compiled instructions have, action by action, exactly
 * the net effect planner/action gives the chain: derive sizes the chain from them, so the
 * chain's replay and the program's agree (docs/internals.md). */
#ifndef CK_LOWER_H
#define CK_LOWER_H

#include <stddef.h>

#include "planner/action.h"
#include "planner/err.h"
#include "planner/model.h"
#include "planner/program.h"
#include "planner/schedule.h"

typedef struct ck_lower ck_lower;

/* What a stage's saving forward keeps, as the variants of a derived chain's stages
 * (planner/chain.h) name them. Whatever it does not keep, B recomputes first (the forwards
 * of the nodes that made it, from x_i and what was kept), which restores what "all" keeps;
 * the stage's output is always kept.
 *   all:    everything the stage's backward reads (x̄ of the chain model);
 *   matmul: the outputs and internals of matrix products (linear, lora, attention, moe) and
 *           what recomputing the others reads; the pointwise ops are recomputed (PyTorch's
 *           selective checkpointing's usual policy);
 *   attn:   all but attention's internal tensors (the s^2-sized probabilities, their
 *           dropout and mask): Megatron's selective recompute;
 *   none:   the stage's output only: the whole stage is recomputed in B. */
typedef enum { CK_KEEP_ALL, CK_KEEP_MATMUL, CK_KEEP_ATTN, CK_KEEP_NONE, CK_N_KEEPS } ck_keep;

/* "all", "matmul", "attn", "none". */
const char *ck_lower_keep_name(ck_keep k);
/* Stage i's variants: "all" first, then those of matmul, attn and none that differ from
 * it and from each other in what they keep (attn only where the stage has attention with
 * internal tensors, matmul only where it has a matrix product and something else to
 * drop). The number of them, at most CK_N_KEEPS, into out. */
size_t ck_lower_variants(const ck_lower *l, size_t i, ck_keep out[CK_N_KEEPS]);

/* The stages of m given by first[] (n_stages + 1 entries; first[n_stages] is the loss). */
int ck_lower_create(const ck_model *m, const size_t *first, size_t n_stages, ck_lower **out,
                    ck_err *err);
void ck_lower_free(ck_lower *l);

/* What an action does beside its stage's nodes, from its place in its schedule. */
typedef struct {
    /* Its stage's only forward before its backward (ck_schedule_sole_forwards): an F_all
     * of a stage whose input no backward reads then frees that input's kept copy after its
     * last reader, as PyTorch does, and B i-1 finds it gone (the chain holds it in x̄_i to
     * B i-1: its figures are then a bound). Where an earlier forward read x_i, x_i is a
     * checkpoint, which PyTorch holds for the recomputation. */
    bool sole_forward;
    unsigned makes_steps;  /* before it, bit s for step tensor s (CK_BUF_STEP) */
    bool checkpoints;      /* its stage's checkpoint state (CK_BUF_CHECKPOINT) before it */
    bool frees_checkpoint; /* and after it */
    unsigned frees_steps;  /* after it, bit s for step tensor s */
} ck_lower_context;

/* The contexts of schedule s's actions (s->n entries). A stage whose nodes read step
 * tensors is a layer (transformers hands them to every decoder layer); a layer is
 * checkpointed when its first forward is not F_all and its B follows, and
 * torch.utils.checkpoint then keeps the layer's arguments, the step tensors with them, to
 * the end of that B. So the step tensors are made before the first forward of the first
 * layer; the masks and position ids are freed after the B of the earliest checkpointed
 * layer, or with none when the model's forward ends, after the first forward of the last
 * layer; the rotary tables, which every layer's products keep, after the B of the earliest
 * layer that reads them or is checkpointed (with no B, as the masks). A checkpointed
 * layer's state lives from its first forward to the end of its B. The leaf (a frozen
 * table's lookup that enable_input_require_grads() makes require grad) lives from its
 * stage's first saving pass (F_all, or the recomputation in its B: a forward that keeps
 * nothing leaves it to no graph) to the schedule's end: autograd's graph holds it. */
int ck_lower_contexts(const ck_lower *l, const ck_schedule *s, ck_lower_context *out, ck_err *err);

/* Appends the instructions of action a, whose effect e ck_action_describe gave: an F_all
 * in a->variant's policy (a number of ck_lower_variants), a B in that of the x̄ it frees
 * (e's frees), an F_none from x̄_i freeing what that x̄'s variant kept; with ctx (or NULL:
 * a stage on its own, as the chain has it), what its place in a schedule adds. */
int ck_lower_action(const ck_lower *l, const ck_action *a, const ck_action_effect *e,
                    const ck_lower_context *ctx, ck_program *out, ck_err *err);

/* The program of a whole valid schedule of chain c; action_end (s->n entries, or NULL)
 * receives, per action, the number of instructions up to the end of it. */
int ck_lower_schedule(const ck_lower *l, const ck_chain *c, const ck_schedule *s,
                      ck_program *out, size_t *action_end, ck_err *err);

/* The replay of schedule s of chain c by its compiled program: the same figures as
 * ck_schedule_replay, per action (live_after and op_peak, each NULL or s->n entries), but
 * from the program's buffers, so exact where the chain is a bound: a saving forward's
 * transient is its own there, while the chain's one fwd_tmp serves F_all and F_ck. Under
 * CK_GRADS_AUTOGRAD the program's parameter gradients count (those of a later micro-step
 * with gradient accumulation), and the last action's peak includes the optimizer step
 * that follows it (ck_program_step_bytes). */
int ck_lower_replay(const ck_lower *l, const ck_chain *c, const ck_schedule *s, ck_replay *out,
                    uint64_t *live_after, uint64_t *op_peak, ck_err *err);

/* Whether the loss frees x_L between its passes (CK_INSTR_LOSS's frees_input): neither its
 * backward nor any other reads it. */
bool ck_lower_loss_frees_input(const ck_lower *l);
/* Stage i's nodes, [*first, *end). */
void ck_lower_stage_nodes(const ck_lower *l, size_t i, size_t *first, size_t *end);
/* Stage i's node whose checkpoint state a checkpointed stage keeps (CK_BUF_CHECKPOINT's
 * id), or SIZE_MAX when it keeps none. */
size_t ck_lower_stage_checkpointer(const ck_lower *l, size_t i);
/* Stage i's input and output tensors (x_i, x_{i+1}). */
size_t ck_lower_stage_input(const ck_lower *l, size_t i);
size_t ck_lower_stage_output(const ck_lower *l, size_t i);

#endif
