#include "planner/impl.h"

#include <stdio.h>
#include <string.h>

/* Each choice is an attribute of the op table; a unit test checks every one names a boolean
 * attribute of its op (test_impl.c). What each keeps: docs/profiles.md. */
static const ck_impl profiles[] = {
    {"hf", "transformers 5's modeling code, as PyTorch 2's autograd saves it", 16, {
        /* LlamaRMSNorm: x * rsqrt(...) is kept for the product with the weight */
        {CK_OP_RMSNORM, "fused", false},
        /* Qwen3's q_norm and k_norm, the same RMSNorm on each head */
        {CK_OP_QKNORM, "fused", false},
        /* act(gate) * up as two autograd ops: act(gate) is kept for up's gradient */
        {CK_OP_SWIGLU, "fused", false},
        {CK_OP_GEGLU, "fused", false},
        /* GPT-2's NewGELUActivation, the tanh formula in Python ops */
        {CK_OP_GELU, "fused", false},
        /* repeat_kv before eager attention: the products keep the copies */
        {CK_OP_ATTENTION, "expand_kv", true},
        /* sdpa keeps the sliding window's mask, converted to the query's dtype */
        {CK_OP_ATTENTION, "sdpa_mask", true},
        /* CUDA's sdpa runs grouped kv heads in f32 on its math path */
        {CK_OP_ATTENTION, "gqa_math", true},
        /* eager attention's softmax backward beside the probabilities' gradient */
        {CK_OP_ATTENTION, "eager_grads", true},
        /* the mask and position ids the model's forward makes once for its layers, and the
         * rotary tables: held to the forward's end, by checkpointed layers to their
         * backward, and the tables by each layer's products */
        {CK_OP_ATTENTION, "step_args", true},
        {CK_OP_ROPE, "step_tables", true},
        /* gradient_checkpointing_enable()'s hook: a frozen table's lookup requires grad */
        {CK_OP_EMBEDDING, "leaf", true},
        /* transformers 5's experts: grouped_mm, its default where PyTorch has the op */
        {CK_OP_MOE, "grouped", true},
        /* ForCausalLMLoss: F.cross_entropy on logits.float(), log_softmax's f32 output kept */
        {CK_OP_CROSS_ENTROPY, "fused", false},
        {CK_OP_CROSS_ENTROPY, "upcast", true},
        /* PEFT's adapters in f32 beside 16-bit weights, each projection's copy of x kept */
        {CK_OP_LORA, "upcast", true}}, NULL},
    {"fused", "liger-kernel, Megatron or llm.c's fused kernels", 16, {
        {CK_OP_RMSNORM, "fused", true},
        {CK_OP_QKNORM, "fused", true},
        {CK_OP_SWIGLU, "fused", true},
        {CK_OP_GEGLU, "fused", true},
        {CK_OP_GELU, "fused", true},
        {CK_OP_ATTENTION, "expand_kv", false},
        {CK_OP_ATTENTION, "sdpa_mask", false},
        {CK_OP_ATTENTION, "gqa_math", false},
        {CK_OP_ATTENTION, "eager_grads", false},
        {CK_OP_ATTENTION, "step_args", false},
        {CK_OP_ROPE, "step_tables", false},
        {CK_OP_EMBEDDING, "leaf", false},
        {CK_OP_MOE, "grouped", true}, /* Megatron's grouped GEMM */
        {CK_OP_CROSS_ENTROPY, "fused", true},
        {CK_OP_CROSS_ENTROPY, "upcast", false},
        {CK_OP_LORA, "upcast", false}}, NULL},
    {"hf-cpu", "hf as PyTorch runs it on the CPU: dropout masks in the input's dtype, sdpa "
               "with dropout on its math path, grouped kv heads in f32 on its fused one", 3, {
        /* torch.dropout off CUDA: input * bernoulli(empty_like(input)) / (1 - p), the noise
         * kept in the input's dtype, where CUDA's native_dropout keeps a bool mask */
        {CK_OP_DROPOUT, "cpu", true},
        {CK_OP_ATTENTION, "cpu", true},
        /* the CPU's flash kernel takes f32 and grouped heads */
        {CK_OP_ATTENTION, "gqa_math", false}}, &profiles[0]},
};
#define N_PROFILES (sizeof profiles / sizeof profiles[0])

const ck_impl *ck_impl_find(const char *name)
{
    for (size_t i = 0; i < N_PROFILES; i++)
        if (strcmp(profiles[i].name, name) == 0)
            return &profiles[i];
    return NULL;
}

size_t ck_impl_count(void)
{
    return N_PROFILES;
}

const ck_impl *ck_impl_at(size_t i)
{
    return i < N_PROFILES ? &profiles[i] : NULL;
}

const char *ck_impl_names(void)
{
    /* joined from the table once: the names live in the table alone */
    static char names[64];
    if (!names[0])
        for (size_t i = 0; i < N_PROFILES; i++) {
            size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", profiles[i].name);
        }
    return names;
}

void ck_impl_apply(const ck_impl *p, const ck_op_def *op, ck_attrs *a)
{
    if (p->base)
        ck_impl_apply(p->base, op, a);
    for (size_t c = 0; c < p->n_choices; c++) {
        if (p->choices[c].op != op->kind)
            continue;
        for (size_t i = 0; i < op->n_attrs; i++)
            if (op->attrs[i].kind == CK_ATTR_BOOL && strcmp(op->attrs[i].name, p->choices[c].attr) == 0)
                *(bool *)((char *)a + op->attrs[i].offset) = p->choices[c].value;
    }
}
