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

typedef struct {
    ck_recipe recipe;
    ck_optimizer optimizer;
    ck_dtype param_dtype, grad_dtype;
    bool master_weights;  /* an f32 copy of 16-bit parameters */
    ck_dtype state_dtype; /* of state kept like the parameters (momentum, Adam's moments) */
} ck_training;

/* What a recipe sets. */
typedef struct {
    const char *name;
    ck_dtype activations, params, grads, state;
    bool master_weights;
} ck_recipe_def;

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

/* Bytes of optimizer state that t keeps for parameter tensor p (its numel elements and
 * shape); false when they overflow 64 bits. */
bool ck_training_state_bytes(const ck_training *t, const ck_param *p, uint64_t *out);

#endif
