#include "planner/training.h"

#include <string.h>

#include "planner/size.h"

static const ck_recipe_def recipes[] = {
    [CK_RECIPE_FP32] = {"fp32", CK_F32, CK_F32, CK_F32, CK_F32, false},
    /* torch.autocast: the parameters, their gradients and the optimizer stay f32, the
     * ops' outputs are bf16 */
    [CK_RECIPE_AMP_BF16] = {"amp-bf16", CK_BF16, CK_F32, CK_F32, CK_F32, false},
    /* Megatron-LM and DeepSpeed's mixed precision: 16-bit model, f32 master copy and state */
    [CK_RECIPE_BF16_MASTER] = {"bf16-master", CK_BF16, CK_BF16, CK_BF16, CK_F32, true},
    [CK_RECIPE_BF16] = {"bf16", CK_BF16, CK_BF16, CK_BF16, CK_BF16, false},
};
#define N_RECIPES (sizeof recipes / sizeof recipes[0])

static const char *const optimizers[] = {
    [CK_OPT_NONE] = "none", [CK_OPT_SGD] = "sgd", [CK_OPT_MOMENTUM] = "momentum",
    [CK_OPT_ADAM] = "adam", [CK_OPT_ADAMW] = "adamw", [CK_OPT_ADAFACTOR] = "adafactor",
    [CK_OPT_ADAM8BIT] = "adam8bit",
};
#define N_OPTIMIZERS (sizeof optimizers / sizeof optimizers[0])

const ck_recipe_def *ck_training_recipe(ck_recipe r)
{
    return &recipes[r];
}

bool ck_training_recipe_parse(const char *name, ck_recipe *out)
{
    for (size_t i = CK_RECIPE_FP32; i < N_RECIPES; i++)
        if (strcmp(name, recipes[i].name) == 0) {
            *out = (ck_recipe)i;
            return true;
        }
    return false;
}

const char *ck_training_recipe_names(void)
{
    return "fp32, amp-bf16, bf16-master, bf16";
}

const char *ck_training_optimizer_name(ck_optimizer o)
{
    return optimizers[o];
}

/* The index of name in names[0, n); false when it is none of them. */
static bool index_of(const char *const *names, size_t n, const char *name, size_t *at)
{
    for (*at = 0; *at < n; (*at)++)
        if (strcmp(name, names[*at]) == 0)
            return true;
    return false;
}

bool ck_training_optimizer_parse(const char *name, ck_optimizer *out)
{
    size_t at;
    bool found = index_of(optimizers, N_OPTIMIZERS, name, &at);
    if (found)
        *out = (ck_optimizer)at;
    return found;
}

const char *ck_training_optimizer_names(void)
{
    return "none, sgd, momentum, adam, adamw, adafactor, adam8bit";
}

static const char *const grads_names[] = {[CK_GRADS_HELD] = "held", [CK_GRADS_AUTOGRAD] = "autograd"};

const char *ck_training_grads_name(ck_grads g)
{
    return grads_names[g];
}

bool ck_training_grads_parse(const char *name, ck_grads *out)
{
    size_t at;
    bool found = index_of(grads_names, sizeof grads_names / sizeof grads_names[0], name, &at);
    if (found)
        *out = (ck_grads)at;
    return found;
}

const char *ck_training_grads_names(void)
{
    return "held, autograd";
}

static const char *const optstep_names[] = {[CK_OPTSTEP_FUSED] = "fused",
                                            [CK_OPTSTEP_FOREACH] = "foreach",
                                            [CK_OPTSTEP_FOR_LOOP] = "for-loop"};

const char *ck_training_optstep_name(ck_optstep s)
{
    return optstep_names[s];
}

bool ck_training_optstep_parse(const char *name, ck_optstep *out)
{
    size_t at;
    bool found = index_of(optstep_names, sizeof optstep_names / sizeof optstep_names[0], name, &at);
    if (found)
        *out = (ck_optstep)at;
    return found;
}

const char *ck_training_optstep_names(void)
{
    return "fused, foreach, for-loop";
}

bool ck_training_step_temp_bytes(const ck_training *t, uint64_t largest_numel, uint64_t all_numel,
                                 uint64_t *out)
{
    *out = 0;
    if (t->optimizer != CK_OPT_ADAM && t->optimizer != CK_OPT_ADAMW)
        return true;
    uint64_t state = ck_dtype_bytes(t->state_dtype);
    switch (t->optimizer_step) {
    case CK_OPTSTEP_FUSED:
        return true;
    case CK_OPTSTEP_FOREACH:
        return ck_size_mul(all_numel, state, out);
    case CK_OPTSTEP_FOR_LOOP:
        break;
    }
    return ck_size_mul(largest_numel, 2 * state, out);
}

/* transformers' Adafactor (beta1 None: no first moment) keeps, in f32 whatever the
 * parameters' dtype, a row and a column mean of the squared gradient for a matrix and the
 * full second moment for a vector. */
static bool adafactor_bytes(const ck_param *p, uint64_t *out)
{
    uint64_t n = p->numel;
    return (p->rank < 2 || ck_size_add(p->dim[0], p->dim[1], &n)) && ck_size_mul(n, 4, out);
}

/* bitsandbytes' Adam8bit: two u8 states, each with an f32 absmax per block, or two f32
 * states for a small tensor. */
static bool adam8bit_bytes(const ck_param *p, uint64_t *out)
{
    uint64_t n = p->numel;
    if (n < CK_ADAM8BIT_MIN_SIZE)
        return ck_size_mul(n, 2 * 4, out);
    uint64_t blocks = n / CK_ADAM8BIT_BLOCK + (n % CK_ADAM8BIT_BLOCK != 0), one;
    return ck_size_mul(blocks, 4, &one) && ck_size_add(one, n, &one) && ck_size_mul(one, 2, out);
}

bool ck_training_state_bytes(const ck_training *t, const ck_param *p, uint64_t *out)
{
    uint64_t like_params = ck_dtype_bytes(t->state_dtype);
    *out = 0;
    if (p->numel == 0) /* absent, or tied: its table's owner keeps the state */
        return true;
    switch (t->optimizer) {
    case CK_OPT_NONE:
    case CK_OPT_SGD:
        return true;
    case CK_OPT_MOMENTUM:
        return ck_size_mul(p->numel, like_params, out);
    case CK_OPT_ADAM:
    case CK_OPT_ADAMW:
        return ck_size_mul(p->numel, 2 * like_params, out);
    case CK_OPT_ADAFACTOR:
        return adafactor_bytes(p, out);
    case CK_OPT_ADAM8BIT:
        return adam8bit_bytes(p, out);
    }
    return false;
}
