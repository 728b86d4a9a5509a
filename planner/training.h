/* training: how a step trains its parameters. A recipe names the element types of
 * activations, parameters, gradients, master weights and optimizer state, as the common
 * training setups use them; an optimizer says what state each parameter tensor keeps.
 * The rules and their sources are in docs/model-format.md, section 5. */
#ifndef CK_TRAINING_H
#define CK_TRAINING_H

#include <stdbool.h>
#include <stdint.h>

#include "planner/dtype.h"
#include "planner/op.h"

typedef enum {
    CK_OPT_NONE, CK_OPT_SGD, CK_OPT_MOMENTUM, CK_OPT_ADAM, CK_OPT_ADAMW, CK_OPT_ADAFACTOR,
    CK_OPT_ADAM8BIT
} ck_optimizer;

typedef enum {
    CK_RECIPE_CUSTOM, /* no recipe: the model file's own fields */
    CK_RECIPE_FP32, CK_RECIPE_AMP_BF16, CK_RECIPE_BF16_MASTER, CK_RECIPE_BF16
} ck_recipe;

/* When parameter gradients exist (docs/model-format.md, section 5). */
typedef enum {
    CK_GRADS_HELD,    /* for the whole step: zero_grad(set_to_none=False), or the contiguous
                         gradient buffers of Megatron and DeepSpeed */
    CK_GRADS_AUTOGRAD /* as PyTorch 2 makes them: each by the first backward that computes
                         it, held to the optimizer step, freed by zero_grad() (set_to_none,
                         the default); later micro-steps of gradient accumulation hold them
                         throughout and make each new gradient beside the one it is added
                         to */
} ck_grads;

/* How the optimizer's step is computed, which decides its temporaries (Adam and AdamW;
 * the others update in place): torch.optim's three implementations. */
typedef enum {
    CK_OPTSTEP_FUSED,   /* one kernel, no temporaries: fused=True, Hugging Face Trainer's
                           default (adamw_torch_fused) since PyTorch 2.8, DeepSpeed's and
                           Megatron's FusedAdam */
    CK_OPTSTEP_FOREACH, /* torch.optim's default on CUDA: exp_avg_sq.sqrt() for every
                           trainable tensor at once, one copy of them in the state's dtype */
    CK_OPTSTEP_FOR_LOOP /* torch.optim's default on the CPU, one tensor at a time:
                           (exp_avg_sq.sqrt() / bias_correction2_sqrt) holds two tensors of
                           one parameter's size in the state's dtype */
} ck_optstep;

typedef struct {
    ck_recipe recipe;
    ck_optimizer optimizer;
    ck_dtype param_dtype, grad_dtype;
    bool master_weights;  /* an f32 copy of 16-bit parameters */
    ck_dtype state_dtype; /* of state kept like the parameters (momentum, Adam's moments) */
    ck_grads grads;
    ck_optstep optimizer_step;
    uint64_t grad_accum;  /* micro-steps whose gradients one optimizer step applies, >= 1 */
} ck_training;

/* What a recipe sets. */
typedef struct {
    const char *name;
    ck_dtype activations, params, grads, state;
    bool master_weights;
} ck_recipe_def;

/* The most micro-steps gradient accumulation may run per optimizer step. */
#define CK_TRAINING_MAX_GRAD_ACCUM 4096

/* bitsandbytes' 8-bit optimizers: tensors of fewer elements keep 32-bit state, and each
 * 8-bit state has one f32 absmax per block of this many elements. */
#define CK_ADAM8BIT_MIN_SIZE 4096
#define CK_ADAM8BIT_BLOCK 256

/* The recipe r (not CK_RECIPE_CUSTOM). */
const ck_recipe_def *ck_training_recipe(ck_recipe r);
/* "fp32", "amp-bf16", "bf16-master", "bf16"; false for anything else. */
bool ck_training_recipe_parse(const char *name, ck_recipe *out);
/* The recipes' names, comma separated, for messages. */
const char *ck_training_recipe_names(void);

/* "none", "sgd", "momentum", "adam", "adamw", "adafactor", "adam8bit". */
const char *ck_training_optimizer_name(ck_optimizer o);
bool ck_training_optimizer_parse(const char *name, ck_optimizer *out);
const char *ck_training_optimizer_names(void);

/* "held", "autograd"; false for anything else. */
const char *ck_training_grads_name(ck_grads g);
bool ck_training_grads_parse(const char *name, ck_grads *out);
const char *ck_training_grads_names(void);

/* "fused", "foreach", "for-loop"; false for anything else. */
const char *ck_training_optstep_name(ck_optstep s);
bool ck_training_optstep_parse(const char *name, ck_optstep *out);
const char *ck_training_optstep_names(void);

/* The most bytes of temporaries t's optimizer step holds at once beside the parameters,
 * gradients and state (ck_optstep), given the element counts of the largest trainable
 * parameter tensor and of all of them. False on overflow. */
bool ck_training_step_temp_bytes(const ck_training *t, uint64_t largest_numel, uint64_t all_numel,
                                 uint64_t *out);

/* Bytes of optimizer state that t keeps for parameter tensor p (its numel elements and
 * shape); false when they overflow 64 bits. */
bool ck_training_state_bytes(const ck_training *t, const ck_param *p, uint64_t *out);

#endif
