/* program: the lower-level schedule of a model's training step, in instructions on its
 * nodes and tensors: the forward of node n keeping or dropping what it saves, the backward
 * of node n, the loss, a gradient made ready, a buffer freed. Chain schedules compile to it
 * (planner/lower); the replay (ck_program_replay) and the executor (sim/exec) run it
 * through the same ck_program_run, which says once what each instruction allocates, holds
 * while it runs and frees. That is what keeps predicted and measured memory equal to the
 * byte, and what a planner for general graphs or per-op recompute would emit directly.
 *
 * Lifetimes follow PyTorch autograd: a forward's intermediate is freed by the
 * instruction after its last reader; a saved tensor by the instruction after the last
 * backward that reads it; static inputs (token ids, targets) are not activations. */
#ifndef CK_PROGRAM_H
#define CK_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/err.h"
#include "planner/model.h"

/* A tensor's two storage copies: the plain one (an intermediate of a forward, or x_i held
 * as a checkpoint) and the kept one (part of what a saving forward keeps, x̄). Both may be
 * live at once: the chain model lets x_{i+1} and x̄_{i+1} coexist. */
typedef enum { CK_COPY_PLAIN, CK_COPY_KEPT } ck_copy;

typedef enum {
    CK_BUF_VALUE, /* tensor `id`, in copy `copy` */
    CK_BUF_SAVED, /* the internal saved tensors of node `id` (op table slots), in `copy` */
    CK_BUF_GRAD,  /* the gradient of tensor `id` (one copy) */
    CK_BUF_PARAMS, /* under CK_GRADS_AUTOGRAD, the gradients of node `id`'s own trainable
                      parameters (a tied one's are its owner's), made by the first backward
                      that computes one of them and held to the end of the step */
    CK_BUF_STEP,   /* the model's step tensor `id` (a ck_step: the masks, the position ids,
                      the rotary tables), which its forward makes once for every layer */
    CK_BUF_CHECKPOINT, /* what torch.utils.checkpoint keeps for the checkpointed layer holding
                          node `id` beside its arguments (ck_op_info.checkpoint_bytes) */
    CK_BUF_TEMP /* the gradients passing between the phases of node `id`'s backward (op table
                   temps, by slot): made and freed within that instruction, in events only */
} ck_buf_kind;

typedef struct {
    ck_buf_kind kind;
    size_t id;
    ck_copy copy;
} ck_buf;

typedef enum {
    CK_INSTR_FORWARD,  /* node's forward: allocates its output in buf and its internal saved
                          tensors (kept when keep, plain and freed when it returns
                          otherwise); holds its forward workspace while it runs */
    CK_INSTR_BACKWARD, /* node's backward (a node whose output requires a gradient):
                          allocates zeroed gradients of its inputs that require one and have
                          none yet, and under CK_GRADS_AUTOGRAD its parameters' gradients
                          that do not exist yet; holds its backward workspace while it runs,
                          and beside it a new gradient for each parameter or input gradient
                          that exists already (PyTorch computes one and adds it in), and
                          a second for their sum when the existing one is a view, which
                          PyTorch adds out of place (ck_op_info.grad_view); with pass,
                          an add's, its inputs take its output's gradient instead; a
                          phased one (ck_phase) does this phase by phase and frees its
                          node's saved set as it goes */
    CK_INSTR_LOSS,     /* the loss node, forward then backward: its output and internals
                          live while it runs, each pass with its workspace; between them,
                          with frees_input, it frees the copy of its input it read (PyTorch
                          drops the logits once log_softmax has kept its output); then it
                          allocates its input's gradient, unless live, and adds into it */
    CK_INSTR_GRAD,     /* allocates buf, a zeroed gradient (y_i when B i starts) */
    CK_INSTR_ALLOC,    /* allocates buf, a step tensor or a checkpoint's state: no kernel
                          reads them (ckplan's make their own masks and tables), so they are
                          held for their bytes */
    CK_INSTR_FREE      /* frees buf */
} ck_instr_kind;

typedef struct {
    ck_instr_kind kind;
    size_t node; /* FORWARD, BACKWARD, LOSS */
    bool keep;   /* FORWARD */
    ck_buf buf;  /* FORWARD (its output), GRAD, ALLOC, FREE */
    bool pass;   /* BACKWARD of an add, as PyTorch's: the output's gradient is handed to
                    both inputs as one tensor (ck_program_pass_inputs), nothing allocated:
                    the owner takes its buffer, the sharer reads the same memory until its
                    producer's backward, and freeing the sharer frees nothing; of a lora,
                    whose output is its base output plus the adapter's, the base output
                    takes it once the rest of the backward has run */
    bool frees_input; /* LOSS: its backward does not read its input, nor does any other
                         backward (ck_lower decides), so it frees it after its forward */
    bool if_live;     /* FREE: nothing to do when buf is not live (the loss's input, which
                         a loss that read that copy has freed) */
} ck_instr;

typedef struct {
    ck_instr *instrs;
    size_t n, cap;
} ck_program;

/* Appends; false when out of memory (the program is left as it was). */
bool ck_program_push(ck_program *p, ck_instr in);
void ck_program_free(ck_program *p);

/* What is live while a program runs. A flag is set when it equals gen, so that a reset
 * (ck_program_state_reset) takes constant time: sizing a model's stages one by one resets
 * a state per stage, and clearing the model's every flag each time would be quadratic. */
typedef struct {
    const ck_model *m;
    uint32_t *live;   /* per buffer: live when gen */
    uint32_t *shared; /* per tensor, when gen: its gradient is live on another's memory (a pass) */
    uint32_t *viewed; /* per tensor, when gen: its gradient is a view (ck_op_info.grad_view) */
    uint32_t gen;
    uint64_t held;
    uint64_t params_held; /* of held, the parameter gradients' (CK_BUF_PARAMS) */
} ck_program_state;

/* The start of a step: x_0 live (plain) when it is an activation; static inputs are not
 * buffers of the program. */
int ck_program_state_init(ck_program_state *st, const ck_model *m, ck_err *err);
/* Back to what ck_program_state_init leaves, in constant time (but once in 2^32 calls). */
void ck_program_state_reset(ck_program_state *st);
void ck_program_state_free(ck_program_state *st);
bool ck_program_state_has(const ck_program_state *st, ck_buf b);
/* Whether tensor t's gradient is live on another's memory (a pass: CK_EVENT_SHARE). */
bool ck_program_state_shares(const ck_program_state *st, size_t t);
/* Marks b live or not, as if allocated or freed outside the program (for sizing one stage
 * on its own). */
void ck_program_state_set(ck_program_state *st, ck_buf b, bool live);
/* The buffers: tensor t's value in a copy, its gradient, node n's saved set in a copy,
 * node n's parameter gradients. */
ck_buf ck_program_value(size_t t, ck_copy copy);
ck_buf ck_program_grad(size_t t);
ck_buf ck_program_saved(size_t node, ck_copy copy);
ck_buf ck_program_params(size_t node);
/* The model's step tensor s; the checkpoint state of the layer holding node n. */
ck_buf ck_program_step(ck_step s);
ck_buf ck_program_checkpoint(size_t node);
/* Marks every parameter gradient of the model live: a later micro-step of gradient
 * accumulation starts holding them (CK_GRADS_AUTOGRAD; nothing otherwise). */
void ck_program_state_hold_params(ck_program_state *st);
/* The same for the parameter gradients the backwards of nodes [first, end) add into
 * (theirs and their tied parameters' owners'): all a stage's B reads of them. */
void ck_program_state_hold_params_of(ck_program_state *st, size_t first, size_t end);
/* The parameter gradients of the model that are live, as the bytes held by them. */
uint64_t ck_program_state_params_bytes(const ck_program_state *st);
/* What the optimizer step after the program holds beyond the static memory: its
 * temporaries (ck_training_step_temp_bytes), and under CK_GRADS_AUTOGRAD every parameter
 * gradient (static otherwise). UINT64_MAX when that overflows. */
uint64_t ck_program_step_bytes(const ck_model *m);
/* Whether the loss of m frees its input between its passes (CK_INSTR_LOSS's frees_input)
 * as far as the loss itself goes: its backward reads only what it saved. */
bool ck_program_loss_frees_input(const ck_model *m);
/* Whether node n has internal saved tensors, hence a saved set. */
bool ck_program_has_saved(const ck_node *n);
/* Bytes of buffer b. */
uint64_t ck_program_buf_bytes(const ck_model *m, ck_buf b);
/* Of node k's parameter gradients (CK_BUF_PARAMS), parameter i's bytes: 0 when the program
 * makes none (held gradients, a frozen node, an absent or tied parameter). */
uint64_t ck_program_param_grad_bytes(const ck_model *m, size_t k, size_t i);
/* Whether tensor t has a gradient buffer: whether it requires a gradient (planner/model). */
bool ck_program_has_grad(const ck_model *m, size_t t);
/* For an add node n with two distinct inputs: *sharer is the one made later (its
 * producer's backward comes first), *owner the other; for a lora node, *owner its base
 * output (input 1) and *sharer SIZE_MAX; false for other nodes. Whether a pass is safe is
 * ck_lower's to decide. */
bool ck_program_pass_inputs(const ck_model *m, const ck_node *n, size_t *owner, size_t *sharer);

typedef enum {
    CK_EVENT_ALLOC,     /* buf's allocation number `slot` (its bytes, zeroed) */
    CK_EVENT_FREE,      /* the same, freed */
    CK_EVENT_WORKSPACE, /* `bytes` of workspace while the node runs */
    CK_EVENT_RUN,       /* run the instruction's node: the moment of its peak; a loss runs
                           twice, its forward (slot 0) and its backward (slot 1), a phased
                           backward once a phase (slot: the phase) */
    CK_EVENT_WORKSPACE_FREE,
    CK_EVENT_MOVE,      /* gradient buf takes the memory of gradient `from`, no longer live */
    CK_EVENT_SHARE,     /* gradient buf is live on the memory of gradient `from` */
    CK_EVENT_UNSHARE    /* shared gradient buf is freed: its memory is not */
} ck_event_kind;

/* Which tracker category an allocation belongs to. */
typedef enum { CK_HOLD_ACTIVATION, CK_HOLD_GRADIENT, CK_HOLD_WORKSPACE } ck_hold;

typedef struct {
    ck_event_kind kind;
    ck_buf buf;
    size_t slot; /* 0 for values and gradients; the op's saved index for CK_BUF_SAVED, its
                  * parameter index for CK_BUF_PARAMS, its temp for CK_BUF_TEMP */
    uint64_t bytes;
    ck_hold hold;
    ck_buf from; /* MOVE, SHARE */
} ck_event;

typedef int (*ck_event_cb)(void *ctx, const ck_instr *in, const ck_event *ev, ck_err *err);

/* Checks that instruction number k finds what it reads and does not allocate what is
 * live (CK_ERR_INPUT naming it otherwise, the state unchanged), then calls cb for each of
 * its events in order and updates st. *peak (or NULL) receives the most bytes held while
 * it ran. */
int ck_program_run(ck_program_state *st, size_t k, const ck_instr *in, ck_event_cb cb, void *ctx,
                   uint64_t *peak, ck_err *err);

/* Runs p on a fresh state counting bytes only: live_after[k] and peak[k] (each NULL or p->n
 * entries) receive the bytes held after and the most held during instruction k. Under
 * CK_GRADS_AUTOGRAD with gradient accumulation, the state is that of a later micro-step
 * (every parameter gradient live from the start), whose figures are each at least the
 * first's. */
int ck_program_replay(const ck_model *m, const ck_program *p, uint64_t *live_after,
                      uint64_t *peak, ck_err *err);

#endif
