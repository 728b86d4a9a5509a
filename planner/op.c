#include "planner/op.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "planner/size.h"

#define ATTR(n, k, req, d, field) {n, k, req, d, offsetof(ck_attrs, field)}
#define OP(k, n, ar, fwd, bwd, ...) \
    [k] = {.kind = k, .name = n, .arity = ar, .flops_per_element = {fwd, bwd}, __VA_ARGS__}

/* FLOPs per element: ops whose cost is proportional to their size; the others add theirs
 * in ck_op_describe. */
static const ck_op_def op_table[] = {
    OP(CK_OP_EMBEDDING, "embedding", 1, 0, 1, .n_attrs = 5,
       .attrs = {ATTR("vocab", CK_ATTR_DIM, true, 0, vocab), ATTR("dim", CK_ATTR_DIM, true, 0, dim),
                 ATTR("positions", CK_ATTR_DIM, false, 0, positions),
                 ATTR("scatter", CK_ATTR_DIM, false, 0, scatter),
                 ATTR("leaf", CK_ATTR_BOOL, false, 0, leaf)}),
    OP(CK_OP_LINEAR, "linear", 1, 0, 0, .n_attrs = 6,
       .attrs = {ATTR("out", CK_ATTR_DIM, true, 0, out), ATTR("bias", CK_ATTR_BOOL, false, 1, bias),
                 ATTR("tied", CK_ATTR_BOOL, false, 0, tied),
                 ATTR("gather", CK_ATTR_DIM, false, 0, gather),
                 ATTR("scatter", CK_ATTR_DIM, false, 0, scatter),
                 ATTR("flat", CK_ATTR_BOOL, false, 0, flat)}),
    OP(CK_OP_LAYERNORM, "layernorm", 1, 7, 12, .n_attrs = 1,
       .attrs = {ATTR("eps", CK_ATTR_POSITIVE, false, 1e-5, eps)}),
    OP(CK_OP_RMSNORM, "rmsnorm", 1, 4, 8, .n_attrs = 2,
       .attrs = {ATTR("eps", CK_ATTR_POSITIVE, false, 1e-5, eps),
                 ATTR("fused", CK_ATTR_BOOL, false, 1, fused)}),
    OP(CK_OP_GELU, "gelu", 1, 8, 12, .n_attrs = 1,
       .attrs = {ATTR("fused", CK_ATTR_BOOL, false, 1, fused)}),
    OP(CK_OP_RELU, "relu", 1, 1, 1),
    OP(CK_OP_SILU, "silu", 1, 4, 6),
    OP(CK_OP_ADD, "add", 2, 1, 0),
    OP(CK_OP_MUL, "mul", 2, 1, 2),
    OP(CK_OP_DROPOUT, "dropout", 1, 2, 1, .draws = true, .n_attrs = 2,
       .attrs = {ATTR("p", CK_ATTR_PROB, true, 0, p),
                 ATTR("cpu", CK_ATTR_BOOL, false, 0, cpu)}),
    OP(CK_OP_ATTENTION, "attention", 1, 0, 0, .draws = true, .n_attrs = 16,
       .attrs = {ATTR("heads", CK_ATTR_DIM, true, 0, heads),
                 ATTR("kv_heads", CK_ATTR_DIM, false, 0, kv_heads),
                 ATTR("dropout", CK_ATTR_PROB, false, 0, p),
                 ATTR("flash", CK_ATTR_BOOL, false, 0, flash),
                 ATTR("head_dim", CK_ATTR_DIM, false, 0, head_dim),
                 ATTR("softmax_dtype", CK_ATTR_DTYPE, false, CK_I32, softmax_dtype),
                 ATTR("softcap", CK_ATTR_POSITIVE, false, 0, cap),
                 ATTR("expand_kv", CK_ATTR_BOOL, false, 0, expand_kv),
                 ATTR("context", CK_ATTR_DIM, false, 0, context),
                 ATTR("cpu", CK_ATTR_BOOL, false, 0, cpu),
                 ATTR("window", CK_ATTR_DIM, false, 0, window),
                 ATTR("sdpa_mask", CK_ATTR_BOOL, false, 0, sdpa_mask),
                 ATTR("v_view", CK_ATTR_BOOL, false, 0, v_view),
                 ATTR("gqa_math", CK_ATTR_BOOL, false, 0, gqa_math),
                 ATTR("eager_grads", CK_ATTR_BOOL, false, 0, eager_grads),
                 ATTR("step_args", CK_ATTR_BOOL, false, 0, step_args)}),
    OP(CK_OP_ROPE, "rope", 1, 0, 0, .n_attrs = 5,
       .attrs = {ATTR("heads", CK_ATTR_DIM, true, 0, heads),
                 ATTR("kv_heads", CK_ATTR_DIM, false, 0, kv_heads),
                 ATTR("theta", CK_ATTR_DIM, false, 10000, theta),
                 ATTR("head_dim", CK_ATTR_DIM, false, 0, head_dim),
                 ATTR("step_tables", CK_ATTR_BOOL, false, 0, step_tables)}),
    /* silu(gate) * up: forward silu 4, product 1; backward the sigmoid again 3, silu 1,
     * d up 1, silu' = s (1 + g (1 - s)) 3, d gate 2. */
    OP(CK_OP_SWIGLU, "swiglu", 2, 5, 10, .n_attrs = 1,
       .attrs = {ATTR("fused", CK_ATTR_BOOL, false, 1, fused)}),
    /* One conversion per element, of the value forward and of its gradient backward. */
    OP(CK_OP_CAST, "cast", 1, 1, 1, .n_attrs = 1, .attrs = {ATTR("to", CK_ATTR_DTYPE, true, 0, to)}),
    /* out = y + alpha/rank B (A x): per output element, forward the scaling and the sum,
     * backward the scaling of the gradient and its copy to y; the products in
     * describe_lora. */
    OP(CK_OP_LORA, "lora", 2, 2, 2, .n_attrs = 6,
       .attrs = {ATTR("rank", CK_ATTR_DIM, true, 0, rank),
                 ATTR("alpha", CK_ATTR_POSITIVE, false, 0, alpha),
                 ATTR("heads", CK_ATTR_DIM, false, 0, heads),
                 ATTR("kv_heads", CK_ATTR_DIM, false, 0, kv_heads),
                 ATTR("upcast", CK_ATTR_BOOL, false, 0, upcast),
                 ATTR("flat", CK_ATTR_BOOL, false, 0, flat)}),
    /* RMSNorm of each q and k head: its FLOPs (rmsnorm's per normalised element) in
     * describe_kind. */
    OP(CK_OP_QKNORM, "qknorm", 1, 0, 0, .n_attrs = 5,
       .attrs = {ATTR("heads", CK_ATTR_DIM, true, 0, heads),
                 ATTR("kv_heads", CK_ATTR_DIM, false, 0, kv_heads),
                 ATTR("head_dim", CK_ATTR_DIM, false, 0, head_dim),
                 ATTR("eps", CK_ATTR_POSITIVE, false, 1e-6, eps),
                 ATTR("fused", CK_ATTR_BOOL, false, 1, fused)}),
    /* gelu(gate) * up: forward gelu 8, product 1; backward gelu's 12, d up 1, d gate 1. */
    OP(CK_OP_GEGLU, "geglu", 2, 9, 14, .n_attrs = 1,
       .attrs = {ATTR("fused", CK_ATTR_BOOL, false, 1, fused)}),
    /* cap tanh(x / cap): a division, tanh and a product; backward (out / cap)^2, 1 minus
     * it, times the gradient. */
    OP(CK_OP_SOFTCAP, "softcap", 1, 3, 4, .n_attrs = 1,
       .attrs = {ATTR("cap", CK_ATTR_POSITIVE, true, 0, cap)}),
    /* One product per element each way. */
    OP(CK_OP_SCALE, "scale", 1, 1, 1, .n_attrs = 1,
       .attrs = {ATTR("factor", CK_ATTR_POSITIVE, true, 0, factor)}),
    /* Its FLOPs depend on the routing's sizes: in describe_moe. */
    OP(CK_OP_MOE, "moe", 1, 0, 0, .n_attrs = 4,
       .attrs = {ATTR("experts", CK_ATTR_DIM, true, 0, experts),
                 ATTR("top_k", CK_ATTR_DIM, true, 0, top_k),
                 ATTR("hidden", CK_ATTR_DIM, true, 0, hidden),
                 ATTR("grouped", CK_ATTR_BOOL, false, 0, grouped)}),
    OP(CK_OP_CROSS_ENTROPY, "cross_entropy", 2, 4, 3, .is_loss = true, .n_attrs = 2,
       .attrs = {ATTR("fused", CK_ATTR_BOOL, false, 0, fused),
                 ATTR("upcast", CK_ATTR_BOOL, false, 0, upcast)}),
    OP(CK_OP_MSE, "mse", 2, 3, 3, .is_loss = true),
};
#define N_OPS (sizeof op_table / sizeof op_table[0])
_Static_assert(N_OPS == CK_N_OP_KINDS, "one op table entry per op kind");

const ck_op_def *ck_op_find(const char *name)
{
    for (size_t i = 0; i < N_OPS; i++)
        if (strcmp(op_table[i].name, name) == 0)
            return &op_table[i];
    return NULL;
}

const char *ck_op_names(void)
{
    /* tests/unit/test_ops.c checks that it names every op of the table. */
    return "embedding, linear, layernorm, rmsnorm, gelu, relu, silu, add, mul, dropout, "
           "attention, rope, swiglu, cast, lora, qknorm, geglu, softcap, scale, moe, "
           "cross_entropy, mse";
}

void ck_op_default_attrs(const ck_op_def *op, ck_attrs *a)
{
    memset(a, 0, sizeof *a);
    for (size_t i = 0; i < op->n_attrs; i++) {
        const ck_attr_spec *s = &op->attrs[i];
        char *field = (char *)a + s->offset;
        if (s->kind == CK_ATTR_DIM)
            *(uint64_t *)(void *)field = (uint64_t)s->dflt;
        else if (s->kind == CK_ATTR_BOOL)
            *(bool *)(void *)field = s->dflt != 0;
        else if (s->kind == CK_ATTR_DTYPE)
            *(ck_dtype *)(void *)field = (ck_dtype)s->dflt;
        else
            *(double *)(void *)field = s->dflt;
    }
}

/* ---- shape inference ---- */

static int bad_input(const char *file, const char *path, size_t i, const char *expected,
                     const ck_ttype *got, ck_err *err)
{
    char shown[128];
    ck_ttype_format(got, shown, sizeof shown);
    return ck_err_fail(err, CK_ERR_INPUT, "%s: %s.inputs[%zu]: expected %s, got %s", file, path, i,
                   expected, shown);
}

static int bad_attr(const char *file, const char *path, const char *attr, ck_err *err,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int bad_attr(const char *file, const char *path, const char *attr, ck_err *err,
                    const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return ck_err_fail(err, CK_ERR_INPUT, "%s: %s.%s: %s", file, path, attr, why);
}

static bool same_type(const ck_ttype *a, const ck_ttype *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank)
        return false;
    for (size_t i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i])
            return false;
    return true;
}

static uint64_t last_dim(const ck_ttype *t) { return t->dim[t->rank - 1]; }

/* Inputs every float op shares: a float tensor of rank >= 1. */
static int check_float(const char *file, const char *path, size_t i, const ck_ttype *t, ck_err *err)
{
    if (!ck_dtype_is_float(t->dtype) || t->rank == 0)
        return bad_input(file, path, i, "a float tensor (f32, bf16 or f16) of rank >= 1", t, err);
    return CK_OK;
}

static int check_same(const char *file, const char *path, const ck_ttype *in, ck_err *err)
{
    if (same_type(&in[1], &in[0]))
        return CK_OK;
    char want[160], shown[128];
    ck_ttype_format(&in[0], shown, sizeof shown);
    snprintf(want, sizeof want, "the type of inputs[0], %s", shown);
    return bad_input(file, path, 1, want, &in[1], err);
}

/* Sequence parallelism: *out (a linear's or embedding's output, shaped from its input) with
 * its sequence, dimension 1, gathered (times a->gather) or reduce-scattered (divided by
 * a->scatter, which must divide it). */
static int infer_sequence(const ck_attrs *a, ck_ttype *out, const char *file, const char *path,
                          ck_err *err)
{
    if (!a->gather && !a->scatter)
        return CK_OK;
    if (out->rank < 3)
        return bad_attr(file, path, a->gather ? "gather" : "scatter", err,
                        "expected an output [B, T, features] to split along T, got rank %zu",
                        out->rank);
    if (a->scatter && out->dim[1] % a->scatter != 0)
        return bad_attr(file, path, "scatter", err,
                        "expected a divisor of the sequence, %llu, got %llu",
                        (unsigned long long)out->dim[1], (unsigned long long)a->scatter);
    if (a->gather && !ck_size_mul(out->dim[1], a->gather, &out->dim[1]))
        return bad_attr(file, path, "gather", err, "the gathered sequence overflows 64 bits");
    out->dim[1] /= a->scatter ? a->scatter : 1;
    return CK_OK;
}

static int infer_embedding(const ck_attrs *a, ck_dtype act, const ck_ttype *in, ck_ttype *out,
                           const char *file, const char *path, ck_err *err)
{
    if (in[0].dtype != CK_I32 || in[0].rank == 0 || in[0].rank >= CK_MAX_RANK)
        return bad_input(file, path, 0, "int32 token ids of rank 1 to 3", &in[0], err);
    if (a->positions && last_dim(&in[0]) > a->positions)
        return bad_input(file, path, 0, "at most `positions` tokens in the last dimension",
                         &in[0], err);
    *out = in[0];
    out->dtype = act;
    out->dim[out->rank++] = a->dim;
    return infer_sequence(a, out, file, path, err);
}

/* The packed q, k, v layout attention and rope read: [B, T, (heads + 2*kv_heads) * D];
 * fills kv_heads' default and sets *head_dim. */
static int check_packed(ck_attrs *a, const ck_ttype *in, size_t i, uint64_t *head_dim,
                        const char *file, const char *path, ck_err *err)
{
    if (in[i].rank != 3 || !ck_dtype_is_float(in[i].dtype))
        return bad_input(file, path, i, "a float tensor [B, T, (heads + 2*kv_heads) * head_dim]",
                         &in[i], err);
    if (a->kv_heads == 0)
        a->kv_heads = a->heads;
    if (a->heads % a->kv_heads != 0)
        return bad_attr(file, path, "kv_heads", err,
                        "expected a divisor of heads (%llu), got %llu",
                        (unsigned long long)a->heads, (unsigned long long)a->kv_heads);
    uint64_t groups; /* heads + 2*kv_heads: heads <= 2^53 keeps this exact */
    if (!ck_size_mul(a->kv_heads, 2, &groups) || !ck_size_add(groups, a->heads, &groups))
        return bad_attr(file, path, "heads", err, "heads + 2*kv_heads overflows 64 bits");
    if (last_dim(&in[i]) % groups != 0) {
        char want[160];
        snprintf(want, sizeof want,
                 "a last dimension divisible by heads + 2*kv_heads = %llu (packed q, k, v)",
                 (unsigned long long)groups);
        return bad_input(file, path, i, want, &in[i], err);
    }
    *head_dim = last_dim(&in[i]) / groups;
    if (a->head_dim && a->head_dim != *head_dim)
        return bad_attr(file, path, "head_dim", err,
                        "expected the head size of the packed width, %llu / (heads + "
                        "2*kv_heads = %llu) = %llu, got %llu",
                        (unsigned long long)last_dim(&in[i]), (unsigned long long)groups,
                        (unsigned long long)*head_dim, (unsigned long long)a->head_dim);
    return CK_OK;
}

/* Whether transformers hands sdpa a mask: once the keys reach the sliding window
 * (masking_utils' _ignore_causal_mask_sdpa); otherwise it asks for causality alone. */
static bool sdpa_masked(const ck_attrs *a, const ck_ttype *out)
{
    uint64_t keys;
    if (!ck_size_mul(out->dim[1], a->context ? a->context : 1, &keys))
        keys = UINT64_MAX; /* past any window */
    return a->sdpa_mask && a->window && keys >= a->window;
}

static int infer_attention(ck_attrs *a, const ck_ttype *in, ck_ttype *out, const char *file,
                           const char *path, ck_err *err)
{
    uint64_t head_dim;
    int rc = check_packed(a, in, 0, &head_dim, file, path, err);
    *out = in[0];
    out->dim[2] = head_dim * a->heads;
    if (rc != CK_OK)
        return rc;
    if (!ck_dtype_is_float(a->softmax_dtype))
        a->softmax_dtype = in[0].dtype;
    a->sdpa = a->flash;
    if (a->cpu && a->p > 0) /* PyTorch's fused CPU kernels take no dropout: the math path */
        a->flash = false;
    if (a->gqa_math && in[0].dtype == CK_F32 && a->kv_heads < a->heads && !sdpa_masked(a, out))
        a->flash = false;
    if (a->softmax_dtype != CK_F32 && a->softmax_dtype != in[0].dtype)
        return bad_attr(file, path, "softmax_dtype", err,
                        "expected \"f32\" or the input's dtype, \"%s\", got \"%s\"",
                        ck_dtype_name(in[0].dtype), ck_dtype_name(a->softmax_dtype));
    return CK_OK;
}

/* Rotations act on pairs of values, so heads have an even size. */
static int infer_rope(ck_attrs *a, const ck_ttype *in, ck_ttype *out, const char *file,
                      const char *path, ck_err *err)
{
    uint64_t head_dim;
    int rc = check_packed(a, in, 0, &head_dim, file, path, err);
    if (rc == CK_OK && head_dim % 2 != 0) {
        char want[160];
        snprintf(want, sizeof want, "heads of an even size (rotated in pairs); "
                 "(heads + 2*kv_heads) divides the last dimension into heads of %llu",
                 (unsigned long long)head_dim);
        rc = bad_input(file, path, 0, want, &in[0], err);
    }
    *out = in[0];
    return rc;
}

/* x [.., in] and y [.., out] of one float dtype and the same leading dimensions; with
 * heads, y is a packed q, k, v. alpha defaults to the rank. */
static int infer_lora(ck_attrs *a, const ck_ttype *in, ck_ttype *out, const char *file,
                      const char *path, ck_err *err)
{
    *out = in[1];
    int rc = check_float(file, path, 0, &in[0], err);
    if (rc != CK_OK)
        return rc;
    bool ok = in[1].dtype == in[0].dtype && in[1].rank == in[0].rank;
    for (size_t i = 0; ok && i + 1 < in[0].rank; i++)
        ok = in[1].dim[i] == in[0].dim[i];
    if (!ok) {
        char want[256], shown[128];
        ck_ttype_format(&in[0], shown, sizeof shown);
        snprintf(want, sizeof want, "the dtype and leading dimensions of inputs[0], %s "
                 "(y, the base projection of x)", shown);
        return bad_input(file, path, 1, want, &in[1], err);
    }
    if (a->alpha == 0)
        a->alpha = (double)a->rank;
    uint64_t head_dim;
    return a->heads ? check_packed(a, in, 1, &head_dim, file, path, err) : CK_OK;
}

static int infer_loss(const ck_op_def *op, const ck_ttype *in, ck_ttype *out, const char *file,
                      const char *path, ck_err *err)
{
    int rc = check_float(file, path, 0, &in[0], err);
    if (rc != CK_OK)
        return rc;
    if (op->kind == CK_OP_MSE) {
        rc = check_same(file, path, in, err);
    } else {
        bool ok = in[1].dtype == CK_I32 && in[1].rank + 1 == in[0].rank;
        for (size_t i = 0; ok && i < in[1].rank; i++)
            ok = in[1].dim[i] == in[0].dim[i];
        if (!ok)
            rc = bad_input(file, path, 1,
                           "int32 targets shaped like inputs[0] without its last (class) dimension",
                           &in[1], err);
    }
    *out = (ck_ttype){.dtype = CK_F32, .rank = 0};
    return rc;
}

int ck_op_infer(const ck_op_def *op, ck_attrs *a, ck_dtype act, const ck_ttype *in,
                ck_ttype *out, const char *file, const char *path, ck_err *err)
{
    int rc;
    switch (op->kind) {
    case CK_OP_EMBEDDING:
        return infer_embedding(a, act, in, out, file, path, err);
    case CK_OP_ATTENTION:
        return infer_attention(a, in, out, file, path, err);
    case CK_OP_ROPE:
        return infer_rope(a, in, out, file, path, err);
    case CK_OP_LORA:
        return infer_lora(a, in, out, file, path, err);
    case CK_OP_QKNORM: {
        uint64_t head_dim;
        *out = in[0];
        return check_packed(a, in, 0, &head_dim, file, path, err);
    }
    case CK_OP_CROSS_ENTROPY:
    case CK_OP_MSE:
        return infer_loss(op, in, out, file, path, err);
    case CK_OP_LINEAR:
        if (a->tied && a->bias)
            return bad_attr(file, path, "bias", err,
                            "expected false with \"tied\": true (a tied head reuses the "
                            "embedding table, which has no bias)");
        rc = check_float(file, path, 0, &in[0], err);
        if (rc != CK_OK)
            return rc;
        *out = in[0];
        out->dim[out->rank - 1] = a->out;
        return infer_sequence(a, out, file, path, err);
    case CK_OP_ADD:
    case CK_OP_MUL:
    case CK_OP_SWIGLU:
    case CK_OP_GEGLU:
        rc = check_float(file, path, 0, &in[0], err);
        if (rc == CK_OK)
            rc = check_same(file, path, in, err);
        *out = in[0];
        return rc;
    case CK_OP_LAYERNORM:
    case CK_OP_RMSNORM:
    case CK_OP_GELU:
    case CK_OP_RELU:
    case CK_OP_SILU:
    case CK_OP_DROPOUT:
    case CK_OP_SOFTCAP:
    case CK_OP_SCALE: /* they keep their input's type */
        *out = in[0];
        return check_float(file, path, 0, &in[0], err);
    case CK_OP_MOE: /* a token picks K distinct experts */
        if (a->top_k > a->experts)
            return bad_attr(file, path, "top_k", err, "expected at most experts (%llu), got %llu",
                            (unsigned long long)a->experts, (unsigned long long)a->top_k);
        *out = in[0];
        return check_float(file, path, 0, &in[0], err);
    case CK_OP_CAST: /* "to" is a float dtype, as the loader reads it */
        *out = in[0];
        out->dtype = a->to;
        return check_float(file, path, 0, &in[0], err);
    }
    return ck_err_fail(err, CK_ERR_RUNTIME, "%s: %s: op kind %d has no shape rule", file, path,
                       (int)op->kind);
}

/* ---- costs ---- */

/* Checked arithmetic that remembers whether anything overflowed, so the formulas below read
 * like formulas and the overflow is reported once at the end. */
typedef struct {
    bool ok;
} ovf;

static uint64_t mul(ovf *o, uint64_t a, uint64_t b)
{
    uint64_t r = 0;
    if (!ck_size_mul(a, b, &r))
        o->ok = false;
    return r;
}

static uint64_t add(ovf *o, uint64_t a, uint64_t b)
{
    uint64_t r = 0;
    if (!ck_size_add(a, b, &r))
        o->ok = false;
    return r;
}

/* a - b, or 0 where b is larger. */
static uint64_t sub_floor(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

static uint64_t numel(ovf *o, const ck_ttype *t)
{
    uint64_t n = 0;
    if (!ck_ttype_numel(t, &n))
        o->ok = false;
    return n;
}

static uint64_t bytes_of(ovf *o, const ck_ttype *t)
{
    return mul(o, numel(o, t), ck_dtype_bytes(t->dtype));
}

static void save_ref(ovf *o, ck_op_info *info, ck_save_kind kind, size_t input, const ck_ttype *t)
{
    ck_saved *s = &info->saved[info->n_saved++];
    *s = (ck_saved){.kind = kind, .input = input, .type = *t, .bytes = bytes_of(o, t),
                    .needed_for = CK_NEED_ANY};
}

/* Saved tensor number s is needed only for the gradients in `needed` (CK_NEED_* bits). */
static void only_for(ck_op_info *info, size_t s, unsigned needed)
{
    info->saved[s].needed_for = needed;
}

/* A dropout mask for an input of type `like`: one byte an element, held in bytes of
 * like's dtype as PyTorch's CPU dropout holds them (the kernels use the first bytes). */
static void save_mask(ovf *o, ck_op_info *info, const ck_attrs *a, const ck_ttype *like)
{
    ck_ttype mask = *like;
    mask.dtype = CK_U8;
    save_ref(o, info, CK_SAVE_INTERNAL, 0, &mask);
    info->saved[info->n_saved - 1].slot = CK_SLOT_MASK;
    if (a->cpu)
        info->saved[info->n_saved - 1].bytes = bytes_of(o, like);
}

static void save_internal(ovf *o, ck_op_info *info, ck_slot slot, const ck_ttype *t)
{
    save_ref(o, info, CK_SAVE_INTERNAL, 0, t);
    info->saved[info->n_saved - 1].slot = slot;
}

/* A parameter's shape as param() takes it: its rank, then its dimensions. */
#define SHAPE(...) (sizeof((uint64_t[]){__VA_ARGS__}) / sizeof(uint64_t)), (const uint64_t[]){__VA_ARGS__}

/* Appends the node's next parameter, of the given shape (rank <= CK_PARAM_MAX_RANK, as
 * SHAPE(...) gives it); `present` false makes it absent (numel 0), a tied one is counted by
 * the node it is tied to. */
static void param(ovf *o, ck_op_info *info, const char *name, ck_init init, bool present,
                  bool tied, size_t rank, const uint64_t *dim)
{
    ck_param *p = &info->params[info->n_param_tensors++];
    *p = (ck_param){.name = name, .init = init, .tied = tied, .rank = rank,
                    .offset = info->n_params};
    uint64_t n = 1;
    for (size_t i = 0; i < rank; i++) {
        p->dim[i] = dim[i];
        n = mul(o, n, dim[i]);
    }
    p->numel = present && !tied ? n : 0;
    info->n_params = add(o, info->n_params, p->numel);
}

/* A tensor shaped like t without its last dimension (per-row statistics). */
static ck_ttype rows_of(const ck_ttype *t, ck_dtype dtype)
{
    ck_ttype r = *t;
    r.rank--;
    r.dtype = dtype;
    return r;
}

/* Eager attention's [B, H, T, T] tensors, after Hugging Face's eager_attention_forward:
 * the capped scores' tanh (softcap: its backward reads it), the softmax output in the
 * softmax dtype (its backward reads it), then what the product with V reads: with dropout
 * the mask and the dropped probabilities, else the probabilities in the input's dtype,
 * which is the softmax output itself unless that was upcast to f32. */
static void save_scores(ovf *o, const ck_attrs *a, const ck_ttype *scores, ck_op_info *info)
{
    uint64_t s = numel(o, scores);
    ck_ttype probs = *scores;
    probs.dtype = a->softmax_dtype;
    if (a->cap > 0)
        save_internal(o, info, CK_SLOT_CAPPED, scores);
    save_internal(o, info, CK_SLOT_PROBS, &probs);
    if (a->p > 0) {
        save_mask(o, info, a, scores);
        save_internal(o, info, CK_SLOT_DROPPED, scores);
        info->fwd_flops = add(o, info->fwd_flops, mul(o, s, 2));
        info->bwd_flops = add(o, info->bwd_flops, s);
    } else if (probs.dtype != scores->dtype) {
        save_internal(o, info, CK_SLOT_PROBS_CAST, scores);
    }
    /* Forward: the raw scores before softmax. Backward: the gradient of the
     * probabilities, turned into that of the scores in place. */
    info->fwd_ws_bytes = bytes_of(o, scores);
    info->bwd_ws_bytes = add(o, info->bwd_ws_bytes, info->fwd_ws_bytes);
}

/* Transformers' eager attention as autograd runs it, without dropout (eager_grads): its
 * backward peaks in softmax's, where the probabilities' gradient and the scores', a tensor
 * of its own, are both live beside the kept probabilities, and on CUDA the kernel's own
 * f32 temporary of the same shape. Under an upcast softmax in 16 bits both gradients are
 * f32 (the scores' is cast after) and the probabilities' 16-bit copy is freed by then; its
 * forward softmaxes an f32 copy of the scores (PyTorch casts bf16 first). The packed
 * input's gradient, which the program makes when the backward starts, comes after that
 * peak, so it is part of it; the output's gradient, which the program holds to the end of
 * the backward, is freed before it (once P V's backward has read it, measured in the
 * llama-tiny referee at 256 tokens), so it is not. Measured with allocation logs of eager_attention_forward's
 * backward, T = 32 to 2048, f32 and bf16, on the CPU and an H200 (tests/torch/
 * eager_backward.py, docs/pytorch.md). Never
 * less than the in-place workspace, which the executor's kernels take (sim/widen sizes
 * their workspace from this description): on short sequences that is more than
 * autograd's peak, by less than one gradient. */
static void add_eager_grads_ws(ovf *o, const ck_attrs *a, const ck_ttype *in, const ck_ttype *out,
                               const ck_ttype *scores, ck_op_info *info)
{
    uint64_t s = numel(o, scores), e = ck_dtype_bytes(scores->dtype);
    bool upcast = a->softmax_dtype == CK_F32 && scores->dtype != CK_F32;
    uint64_t grads = upcast ? mul(o, s, 8 - e) : mul(o, s, 2 * e);
    if (!a->cpu)
        grads = add(o, grads, mul(o, s, 4));
    grads = sub_floor(grads, add(o, bytes_of(o, &in[0]), bytes_of(o, out)));
    if (grads > info->bwd_ws_bytes)
        info->bwd_ws_bytes = grads;
    if (upcast)
        info->fwd_ws_bytes = mul(o, s, 4);
}

/* Context parallelism (docs/parallel.md): the keys and values of the other ranks' parts of
 * the sequence pass through. Fused kernels go round the ring (Liu et al. 2023, ring
 * attention): forward the part computed on and the one arriving, backward those and their
 * gradients, travelling with them. Eager attention all-gathers them whole, forward and
 * again backward with their gradients (as the Llama 3 paper's all-gather variant). */
static void add_context_ws(ovf *o, const ck_attrs *a, const ck_ttype *in, uint64_t head_dim,
                           ck_op_info *info)
{
    if (!a->context || a->context == 1)
        return;
    uint64_t part = mul(o, mul(o, mul(o, in->dim[0], in->dim[1]), mul(o, a->kv_heads, head_dim)),
                        2 * ck_dtype_bytes(in->dtype)); /* k and v of one rank's part */
    uint64_t fwd = mul(o, part, a->flash ? 2 : a->context);
    info->fwd_ws_bytes = add(o, info->fwd_ws_bytes, fwd);
    info->bwd_ws_bytes = add(o, info->bwd_ws_bytes, mul(o, fwd, 2));
}

/* What transformers' model forward hands every layer (step_args), as masking_utils makes
 * it: eager attention's mask [B, 1, T, keys] in the activations' dtype (0 where a query sees
 * the key, the dtype's minimum elsewhere); sdpa's a bool one, only once the keys reach the
 * window, else none (it asks for causality alone); one per distinct window. The position
 * ids, int64 [1, T] (cache_position unsqueezed). And per checkpointed layer on the CPU,
 * torch.utils.checkpoint's copy of the generator state (measured: docs/pytorch.md). */
static void add_step_args(ovf *o, const ck_attrs *a, const ck_ttype *out, const ck_ttype *scores,
                          ck_op_info *info)
{
    ck_ttype mask = {.dtype = scores->dtype, .rank = 4, .dim = {scores->dim[0], 1, scores->dim[2], scores->dim[3]}};
    if (a->sdpa)
        mask.dtype = CK_U8; /* a bool is a byte */
    if (!a->sdpa || sdpa_masked(a, out))
        info->step_bytes[CK_STEP_MASK] = bytes_of(o, &mask);
    info->step_window = a->window;
    info->step_bytes[CK_STEP_POSITIONS] = mul(o, scores->dim[2], 8);
    info->checkpoint_bytes = a->cpu ? CK_TORCH_CPU_RNG_STATE_BYTES : 0;
}

/* Whether attention copies k and v out to every query head: Hugging Face's repeat_kv,
 * which its eager path runs when there are fewer kv heads than query heads (its sdpa path
 * hands the shared heads to the kernel, as flash kernels read them: nothing to copy). */
static bool expands_kv(const ck_attrs *a)
{
    return a->expand_kv && !a->flash && a->kv_heads < a->heads;
}

static void describe_attention(ovf *o, const ck_attrs *a, const ck_ttype *in,
                               const ck_ttype *out, ck_op_info *info)
{
    uint64_t b = in[0].dim[0], t = in[0].dim[1], keys = mul(o, t, a->context ? a->context : 1);
    uint64_t head_dim = out->dim[2] / a->heads;
    ck_ttype scores = {.dtype = out->dtype, .rank = 4, .dim = {b, a->heads, t, keys}};
    uint64_t s = numel(o, &scores);
    uint64_t sd = mul(o, s, head_dim);
    if (expands_kv(a)) { /* the copies, as repeat_kv makes them and the products keep them */
        ck_ttype expanded = in[0];
        expanded.dim[2] = mul(o, mul(o, a->heads, 3), head_dim);
        save_internal(o, info, CK_SLOT_QKV_EXPANDED, &expanded);
        info->bwd_ws_bytes = bytes_of(o, &expanded); /* their gradient, summed into qkv's */
    } else {
        save_ref(o, info, CK_SAVE_INPUT, 0, &in[0]);
    }
    /* A flash kernel's backward reads its output (rowsum(dO O)); eager attention's
     * products keep q, k, v and the probabilities, not the output (eager_grads: as
     * autograd runs transformers' code), which o_proj's backward then frees. */
    if (a->flash || !a->eager_grads)
        save_ref(o, info, CK_SAVE_OUTPUT, 0, out);
    /* Q K^T and P V: two products of 2*S*D; softmax about 5 FLOPs per score; softcap a
     * division, tanh and a product forward, 1 - t^2 and a product backward. */
    uint64_t cap = a->cap > 0 ? mul(o, s, 3) : 0;
    info->fwd_flops = add(o, add(o, mul(o, sd, 4), mul(o, s, 5)), cap);
    info->bwd_flops = add(o, add(o, mul(o, sd, 8), mul(o, s, 5)), cap);
    if (a->flash) {
        ck_ttype lse = {.dtype = CK_F32, .rank = 3, .dim = {b, a->heads, t}};
        save_internal(o, info, CK_SLOT_LSE, &lse);
        /* Row by row: one row of f32 scores forward; backward recomputes a row of
         * probabilities (capped again) and its gradient. */
        info->fwd_ws_bytes = mul(o, t, 4);
        info->bwd_ws_bytes = add(o, info->bwd_ws_bytes, mul(o, t, 8));
        info->bwd_flops = add(o, info->bwd_flops,
                              add(o, add(o, mul(o, sd, 2), mul(o, s, 5)), cap));
        if (sdpa_masked(a, out)) { /* shared by the heads */
            ck_ttype mask = {.dtype = out->dtype, .rank = 4, .dim = {b, 1, t, keys}};
            save_internal(o, info, CK_SLOT_SDPA_MASK, &mask);
        }
        if (a->v_view) { /* the packed input stands for the projection v keeps alive */
            ck_ttype qk = in[0];
            qk.dim[2] = mul(o, add(o, a->heads, a->kv_heads), head_dim);
            save_internal(o, info, CK_SLOT_QK_APART, &qk);
            /* The CPU's flash kernel and cuDNN's (PyTorch's choice in 16 bits on Hopper)
             * lay their output out by head, like the q they are given, which o_proj's
             * input copies; CUDA's memory-efficient kernel (f32) writes [B, T, H, D], so
             * transpose(1, 2).contiguous() copies nothing (both measured on an H200:
             * docs/pytorch.md). Flash, 16 bits before Hopper, writes [B, T, H, D] too:
             * there this counts one [B, T, C] a layer too many. */
            if (a->cpu || in[0].dtype != CK_F32)
                save_internal(o, info, CK_SLOT_OUT_HEADS, out);
        }
    } else {
        save_scores(o, a, &scores, info);
        if (a->eager_grads && a->p == 0)
            add_eager_grads_ws(o, a, in, out, &scores, info);
    }
    add_context_ws(o, a, &in[0], head_dim, info);
    if (a->step_args)
        add_step_args(o, a, out, &scores, info);
}

/* Sequence parallelism's transients (Korthikanti et al. 2022, section 4.2.2): a gathering
 * linear saves its input shard and all-gathers it forward and again backward, where the
 * input's gradient is whole until reduce-scattered; a scattering node's output is whole
 * until reduce-scattered, and its gradient is all-gathered backward. */
static void add_sequence_ws(ovf *o, const ck_attrs *a, const ck_ttype *in, const ck_ttype *out,
                            ck_op_info *info)
{
    if (a->gather) {
        uint64_t whole = mul(o, bytes_of(o, &in[0]), a->gather);
        info->fwd_ws_bytes = add(o, info->fwd_ws_bytes, whole);
        info->bwd_ws_bytes = add(o, info->bwd_ws_bytes, mul(o, whole, 2));
    }
    if (a->scatter) {
        uint64_t whole = mul(o, bytes_of(o, out), a->scatter);
        info->fwd_ws_bytes = add(o, info->fwd_ws_bytes, whole);
        info->bwd_ws_bytes = add(o, info->bwd_ws_bytes, whole);
    }
}

static void describe_linear(ovf *o, const ck_attrs *a, const ck_ttype *in, const ck_ttype *out,
                            ck_op_info *info)
{
    uint64_t in_f = last_dim(&in[0]);
    uint64_t rows = mul(o, numel(o, out) / a->out, a->scatter ? a->scatter : 1);
    uint64_t macs = mul(o, mul(o, rows, in_f), a->out);
    uint64_t bias_flops = a->bias ? mul(o, rows, a->out) : 0;
    save_ref(o, info, CK_SAVE_INPUT, 0, &in[0]);
    only_for(info, 0, CK_NEED_PARAMS); /* dW = dY^T X; dX = dY W reads the weight only */
    info->grad_view = in[0].rank > 2 && !a->flat; /* dY W on the rows, viewed back to the input's shape */
    param(o, info, "weight", CK_INIT_NORMAL, true, a->tied, SHAPE(a->out, in_f));
    param(o, info, "bias", CK_INIT_ZEROS, a->bias, false, SHAPE(a->out));
    info->fwd_flops = add(o, mul(o, macs, 2), bias_flops);
    info->bwd_flops = add(o, mul(o, macs, 4), bias_flops); /* dX and dW */
    add_sequence_ws(o, a, in, out, info);
}

/* PEFT's lora.Linear with its adapters in their own dtype (upcast, beside 16-bit x), one
 * projection at a time: forward, lora_B's [rows, part] output, its scaled copy and the sum
 * with the base output (promoted) in that dtype, all three live at the sum (measured:
 * tests/torch, docs/pytorch.md), and under autocast (f32 weights) the f32 cast of x that
 * autocast casts back; backward, the output's gradient and its scaled copy in that dtype,
 * then x's before its cast back. The widest part is q's. */
static void add_adapter_ws(ovf *o, const ck_attrs *a, const ck_ttype *x, const ck_ttype *mid,
                           uint64_t rows, uint64_t out_f, ck_op_info *info)
{
    uint64_t part = a->heads ? out_f / add(o, a->heads, mul(o, a->kv_heads, 2)) * a->heads : out_f;
    uint64_t eb = ck_dtype_bytes(mid->dtype), x_elems = numel(o, x);
    uint64_t one_part = mul(o, mul(o, rows, part), eb);
    info->fwd_ws_bytes = add(o, mul(o, one_part, 3), mid->dtype != CK_F32 ? mul(o, x_elems, 4) : 0);
    info->bwd_ws_bytes = add(o, info->bwd_ws_bytes, add(o, mul(o, one_part, 2), mul(o, x_elems, eb)));
}

/* A = lora_a [P*R, in], B = lora_b [out, R], P = 3 parts (q, k, v) with heads, else 1.
 * Forward: mid = x A^T, 2*rows*in*P*R; B mid, 2*rows*out*R (each output column reads R
 * values of mid). Backward: dmid and dB, dx and dA, twice each. */
static void describe_lora(ovf *o, const ck_attrs *a, const ck_ttype *in, const ck_ttype *out,
                          ck_op_info *info)
{
    uint64_t in_f = last_dim(&in[0]), out_f = last_dim(out);
    uint64_t rows = numel(o, out) / out_f;
    uint64_t parts = a->heads ? 3 : 1, mid_w = mul(o, parts, a->rank);
    /* under f32 weights, autocast's copies; beside 16-bit ones, PEFT's f32 copies, unless
     * the framework keeps f32 masters and casts the adapters with the rest (DeepSpeed's and
     * FSDP's bf16) */
    bool copies = a->upcast && in[0].dtype != CK_F32 && (a->weights == CK_F32 || !a->master_weights);
    ck_ttype mid = in[0];
    mid.dim[mid.rank - 1] = mid_w;
    if (!copies)
        save_ref(o, info, CK_SAVE_INPUT, 0, &in[0]);
    else { /* each projection's own copy of x, in the adapters' dtype, for lora_a's gradient */
        mid.dtype = a->weights == CK_F32 ? in[0].dtype : CK_F32;
        ck_ttype copy = in[0];
        copy.dtype = mid.dtype;
        for (uint64_t p = 0; p < parts; p++) {
            save_internal(o, info, CK_SLOT_ADAPTER_IN, &copy);
            only_for(info, info->n_saved - 1, CK_NEED_PARAMS);
        }
    }
    save_internal(o, info, CK_SLOT_LORA_MID, &mid);
    /* x's: lora_a's linear's, a view; with copies, the cast back's, a tensor of its own */
    info->grad_view = in[0].rank > 2 && !copies && !a->flat;
    param(o, info, "lora_a", CK_INIT_NORMAL, true, false, SHAPE(mid_w, in_f));
    param(o, info, "lora_b", CK_INIT_ZEROS, true, false, SHAPE(out_f, a->rank));
    uint64_t a_flops = mul(o, mul(o, rows, in_f), mul(o, mid_w, 2));
    uint64_t b_flops = mul(o, mul(o, rows, out_f), mul(o, a->rank, 2));
    info->fwd_flops = add(o, info->fwd_flops, add(o, a_flops, b_flops));
    info->bwd_flops = add(o, info->bwd_flops, mul(o, add(o, a_flops, b_flops), 2));
    info->bwd_ws_bytes = bytes_of(o, &mid); /* dmid */
    if (copies)
        add_adapter_ws(o, a, &in[0], &mid, rows, out_f, info);
}

/* rmsnorm's FLOPs per normalised (q or k) element, and backward one per v element, whose
 * gradient passes through; rstd is one f32 per head of each row. */
static void describe_qknorm(ovf *o, const ck_attrs *a, const ck_ttype *in, uint64_t n,
                            ck_op_info *info)
{
    uint64_t normed_heads = add(o, a->heads, a->kv_heads);
    uint64_t d = last_dim(&in[0]) / add(o, normed_heads, a->kv_heads);
    uint64_t normed = mul(o, mul(o, n / last_dim(&in[0]), d), normed_heads);
    ck_ttype stats = rows_of(&in[0], CK_F32), heads = in[0];
    stats.dim[stats.rank++] = normed_heads;
    heads.dim[heads.rank - 1] = mul(o, normed_heads, d);
    if (a->fused) {
        save_ref(o, info, CK_SAVE_INPUT, 0, &in[0]);
    } else { /* Qwen3RMSNorm on q_proj's and k_proj's own outputs, not on v: it keeps */
        ck_ttype upcast = heads; /* x.float(), the f32 copy on 16-bit x, for the square */
        upcast.dtype = CK_F32;
        save_internal(o, info, CK_SLOT_X_F32, &upcast);
    }
    save_internal(o, info, CK_SLOT_RSTD, &stats);
    if (!a->fused) { /* ... and w * (x rstd) keeps x rstd for w's gradient */
        save_internal(o, info, CK_SLOT_NORMED, &heads);
        only_for(info, info->n_saved - 1, CK_NEED_PARAMS);
    }
    param(o, info, "q_gamma", CK_INIT_ONES, true, false, SHAPE(d));
    param(o, info, "k_gamma", CK_INIT_ONES, true, false, SHAPE(d));
    info->fwd_flops = mul(o, normed, 4);
    info->bwd_flops = add(o, mul(o, normed, 8), n - normed);
}

static ck_ttype matrix(ck_dtype d, uint64_t rows, uint64_t cols)
{
    return (ck_ttype){.dtype = d, .rank = cols ? 2 : 1, .dim = {rows, cols}};
}

/* What moe keeps beside its input, in the order of ck_slot: as the eager loop of
 * transformers' MixtralSparseMoeBlock, or its grouped_mm experts (grouped), keep them. The
 * grouped routing weights stay f32 (the router's softmax dtype), and instead of index_add_'s
 * source it keeps an inverse permutation and the experts' offsets. */
static size_t moe_internals(const ck_attrs *a, ck_dtype act, uint64_t n, uint64_t c,
                            uint64_t r, ck_slot slot[], ck_ttype type[])
{
    uint64_t e = a->experts, k = a->top_k, f = a->hidden;
    const struct {
        ck_slot slot;
        ck_ttype type;
        bool grouped, eager;
    } all[] = {
        {CK_SLOT_ROUTER_PROBS, matrix(CK_F32, n, e), true, true},
        {CK_SLOT_TOPK_INDEX, matrix(CK_I64, n, k), true, true},
        {CK_SLOT_TOPK_PROBS, matrix(CK_F32, n, k), true, true},
        {CK_SLOT_TOPK_SUM, matrix(CK_F32, n, 0), true, true},
        {CK_SLOT_ROUTE_INDEX, matrix(CK_I64, r, 2), true, true},
        {CK_SLOT_ROUTE_ORDER, matrix(CK_I64, r, 0), true, false},
        {CK_SLOT_EXPERT_OFFSETS, matrix(CK_I32, e, 0), true, false},
        {CK_SLOT_ROUTE_WEIGHT, matrix(a->grouped ? CK_F32 : act, r, 0), true, true},
        {CK_SLOT_EXPERT_IN, matrix(act, r, c), true, true},
        {CK_SLOT_EXPERT_GATE, matrix(act, r, f), true, true},
        {CK_SLOT_EXPERT_ACT, matrix(act, r, f), true, true},
        {CK_SLOT_EXPERT_UP, matrix(act, r, f), true, true},
        {CK_SLOT_EXPERT_HIDDEN, matrix(act, r, f), true, true},
        {CK_SLOT_EXPERT_OUT, matrix(act, r, c), true, true},
        {CK_SLOT_EXPERT_WEIGHTED, matrix(act, r, c), false, true},
    };
    size_t n_kept = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (a->grouped ? all[i].grouped : all[i].eager) {
            slot[n_kept] = all[i].slot;
            type[n_kept++] = all[i].type;
        }
    return n_kept;
}

/* What transformers' grouped_mm experts hold at their forward's highest point, the gather
 * back to token order, beyond the output [N, C]: the weighted rows and their gather, f32
 * [R, C] each (the f32 weights promote them), beside the Python locals then: the router
 * logits [N, E], the weights f32 [N, K], the sorted expert ids int64 [R], their f32 copy for
 * the histogram and the f32 counts [E]. */
static uint64_t grouped_moe_forward_ws(ovf *o, uint64_t n, uint64_t c, uint64_t e, uint64_t k,
                                       uint64_t eb)
{
    uint64_t r = mul(o, n, k), gather = mul(o, mul(o, mul(o, r, c), 2), 4);
    uint64_t locals = add(o, add(o, mul(o, mul(o, n, e), eb), mul(o, r, 4)),
                          add(o, mul(o, r, 8 + 4), mul(o, e, 4)));
    return add(o, gather, locals) - mul(o, mul(o, n, c), eb); /* gather >= out: R >= N, 8 >= eb */
}

#define BIT(i) (1u << (i))
#define SLOT(s) ((uint64_t)1 << (s))

/* The grouped experts' backward as autograd runs it, node by node (ck_moe_phase), each
 * freeing its saved tensors and the gradients it read as it ends (measured: docs/pytorch.md,
 * "`moe`'s backward in phases"). The routing weights are f32, so the gradients up to their
 * product are too, and the product's backward makes expert_out's in f32 before autograd
 * casts it to x's dtype. Workspace: the gather's zeros beside the view's copy; the product's f32
 * copy of the weighted rows and its gradient before the cast; the renormalisation's four
 * [N, K] f32 temporaries (or top-k's zeros and softmax's gradient, [N, E] f32 each); the
 * router's gradient of x, added into the input's (and of its logits in x's dtype). */
static void moe_grouped_phases(ovf *o, ck_dtype act, uint64_t n, uint64_t c, uint64_t e,
                               uint64_t k, uint64_t f, ck_op_info *info)
{
    uint64_t r = mul(o, n, k), eb = ck_dtype_bytes(act), ne4 = mul(o, mul(o, n, e), 4);
    uint64_t rc4 = mul(o, mul(o, r, c), 4), rc = mul(o, mul(o, r, c), eb);
    const ck_ttype types[] = {
        [CK_MOE_D_SORTED] = matrix(CK_F32, r, c), [CK_MOE_D_OUT] = matrix(act, r, c),
        [CK_MOE_D_WEIGHT] = matrix(CK_F32, r, 0), [CK_MOE_D_HIDDEN] = matrix(act, r, f),
        [CK_MOE_D_ACT] = matrix(act, r, f),       [CK_MOE_D_UP] = matrix(act, r, f),
        [CK_MOE_D_GATE] = matrix(act, r, f),      [CK_MOE_D_GATE_UP] = matrix(act, r, mul(o, f, 2)),
        [CK_MOE_D_IN] = matrix(act, r, c),        [CK_MOE_D_TOPK] = matrix(CK_F32, n, k),
        [CK_MOE_D_LOGITS] = matrix(CK_F32, n, e),
    };
    for (size_t t = 0; t < CK_MOE_N_TEMPS; t++)
        info->temps[t] = (ck_temp){types[t], bytes_of(o, &types[t])};
    info->n_temps = CK_MOE_N_TEMPS;
    const ck_phase phases[] = {
        [CK_MOE_UNSORT] = {.ws_bytes = rc4, .makes = BIT(CK_MOE_D_SORTED),
                           .releases = SLOT(CK_SLOT_ROUTE_ORDER)},
        [CK_MOE_WEIGHTING] = {.ws_bytes = sub_floor(mul(o, rc4, 2), rc),
                              .makes = BIT(CK_MOE_D_OUT) | BIT(CK_MOE_D_WEIGHT),
                              .frees = BIT(CK_MOE_D_SORTED),
                              .releases = SLOT(CK_SLOT_EXPERT_OUT) | SLOT(CK_SLOT_ROUTE_WEIGHT)},
        [CK_MOE_DOWN] = {.params = BIT(3), .makes = BIT(CK_MOE_D_HIDDEN), .frees = BIT(CK_MOE_D_OUT),
                         .releases = SLOT(CK_SLOT_EXPERT_HIDDEN)},
        [CK_MOE_GLU] = {.makes = BIT(CK_MOE_D_ACT) | BIT(CK_MOE_D_UP), .frees = BIT(CK_MOE_D_HIDDEN),
                        .releases = SLOT(CK_SLOT_EXPERT_ACT)},
        /* gate and up are halves of one product's output, freed with the last of them */
        [CK_MOE_SILU] = {.makes = BIT(CK_MOE_D_GATE), .frees = BIT(CK_MOE_D_ACT),
                         .releases = SLOT(CK_SLOT_EXPERT_GATE) | SLOT(CK_SLOT_EXPERT_UP)},
        [CK_MOE_CAT] = {.makes = BIT(CK_MOE_D_GATE_UP), .frees = BIT(CK_MOE_D_GATE) | BIT(CK_MOE_D_UP)},
        [CK_MOE_UP] = {.params = BIT(1) | BIT(2), .makes = BIT(CK_MOE_D_IN), .frees = BIT(CK_MOE_D_GATE_UP),
                       .releases = SLOT(CK_SLOT_EXPERT_IN) | SLOT(CK_SLOT_EXPERT_OFFSETS)},
        [CK_MOE_SCATTER] = {.makes = BIT(CK_MOE_D_TOPK), .frees = BIT(CK_MOE_D_WEIGHT)},
        [CK_MOE_GATHER] = {.input_grads = true, .frees = BIT(CK_MOE_D_IN),
                           .releases = SLOT(CK_SLOT_ROUTE_INDEX)},
        [CK_MOE_ROUTING] = {.ws_bytes = sub_floor(mul(o, r, 16) > mul(o, ne4, 2) ? mul(o, r, 16)
                                                                                 : mul(o, ne4, 2), ne4),
                            .makes = BIT(CK_MOE_D_LOGITS), .frees = BIT(CK_MOE_D_TOPK),
                            .releases = SLOT(CK_SLOT_ROUTER_PROBS) | SLOT(CK_SLOT_TOPK_INDEX) |
                                        SLOT(CK_SLOT_TOPK_PROBS) | SLOT(CK_SLOT_TOPK_SUM)},
        [CK_MOE_ROUTER] = {.ws_bytes = add(o, mul(o, mul(o, n, c), eb),
                                           act == CK_F32 ? 0 : mul(o, mul(o, n, e), eb)),
                           .params = BIT(0), .frees = BIT(CK_MOE_D_LOGITS)},
    };
    memcpy(info->phases, phases, sizeof phases);
    info->n_phases = CK_MOE_N_PHASES;
    /* the bound planners sum: every phase's workspace beside the temps live then */
    uint64_t live = 0;
    for (size_t p = 0; p < CK_MOE_N_PHASES; p++) {
        for (size_t t = 0; t < CK_MOE_N_TEMPS; t++)
            live = phases[p].makes >> t & 1 ? add(o, live, info->temps[t].bytes) : live;
        uint64_t top = add(o, live, phases[p].ws_bytes);
        info->bwd_ws_bytes = top > info->bwd_ws_bytes ? top : info->bwd_ws_bytes;
        for (size_t t = 0; t < CK_MOE_N_TEMPS; t++)
            live -= phases[p].frees >> t & 1 ? info->temps[t].bytes : 0;
    }
}

/* moe as transformers' MixtralSparseMoeBlock runs under PyTorch autograd (moe_internals);
 * section 3 of docs/model-format.md names the PyTorch op that keeps each saved tensor. x is
 * N rows of C, R = N*K rows are routed (a row once to each of its K experts), F is an
 * expert's width. */
static void describe_moe(ovf *o, const ck_attrs *a, const ck_ttype *in, ck_op_info *info)
{
    const ck_ttype *x = &in[0];
    ck_dtype act = x->dtype;
    uint64_t c = last_dim(x), n = numel(o, x) / c, e = a->experts, k = a->top_k, f = a->hidden;
    uint64_t r = mul(o, n, k), eb = ck_dtype_bytes(act);
    ck_slot slots[CK_OP_MAX_SAVED];
    ck_ttype types[CK_OP_MAX_SAVED];
    size_t n_internal = moe_internals(a, act, n, c, r, slots, types);
    save_ref(o, info, CK_SAVE_INPUT, 0, x); /* for the router's weight gradient */
    only_for(info, 0, CK_NEED_PARAMS);
    for (size_t i = 0; i < n_internal; i++) {
        save_internal(o, info, slots[i], &types[i]);
        /* The experts' w1 and w3 inputs and w2's input serve their weights' gradients. */
        if (slots[i] == CK_SLOT_EXPERT_IN || slots[i] == CK_SLOT_EXPERT_HIDDEN)
            only_for(info, info->n_saved - 1, CK_NEED_PARAMS);
        /* Grouped, w2's product is the last to read its input: kept by nothing, it is freed
         * before the gather back, while the rows (a Python local) live to the end. */
        info->saved[info->n_saved - 1].dies_early = a->grouped && slots[i] == CK_SLOT_EXPERT_HIDDEN;
    }
    param(o, info, "router", CK_INIT_NORMAL, true, false, SHAPE(e, c));
    param(o, info, "w1", CK_INIT_NORMAL, true, false, SHAPE(e, f, c));
    param(o, info, "w3", CK_INIT_NORMAL, true, false, SHAPE(e, f, c));
    param(o, info, "w2", CK_INIT_NORMAL, true, false, SHAPE(e, c, f));
    /* Forward: the router's product, softmax 5 per logit, sum and divide per chosen one,
     * the experts' three products, their gate at swiglu's rate, weighting and summing the
     * outputs. Backward: the products' input and weight gradients, 1 per probability, 4 per
     * chosen one, swiglu's backward, the weighting's two gradients and the gather's. */
    const uint64_t *glu = op_table[CK_OP_SWIGLU].flops_per_element;
    uint64_t rcf = mul(o, mul(o, r, c), f), nce = mul(o, mul(o, n, c), e), ne = mul(o, n, e);
    uint64_t rf = mul(o, r, f), rc = mul(o, r, c);
    info->fwd_flops = add(o, add(o, add(o, mul(o, nce, 2), mul(o, ne, 5)), mul(o, r, 2)),
                          add(o, add(o, mul(o, rcf, 6), mul(o, rf, glu[0])), mul(o, rc, 2)));
    info->bwd_flops = add(o, add(o, add(o, mul(o, nce, 4), ne), mul(o, r, 4)),
                          add(o, add(o, mul(o, rcf, 12), mul(o, rf, glu[1])), mul(o, rc, 4)));
    /* Forward, as the eager loop holds them: the router logits, the routing weights [N, K]
     * and the int64 one-hot expert mask [E, K, N] (ckplan's kernel's too); grouped, at least
     * that. Backward: one expert's gradients (N rows of C and two of F) and the routing's
     * in f32. */
    info->fwd_ws_bytes = add(o, mul(o, mul(o, r, e), 8), mul(o, add(o, ne, r), eb));
    info->early_scratch_at = info->fwd_ws_bytes;
    if (a->grouped) {
        uint64_t held = grouped_moe_forward_ws(o, n, c, e, k, eb);
        info->fwd_ws_bytes = held > info->fwd_ws_bytes ? held : info->fwd_ws_bytes;
    }
    info->bwd_ws_bytes = add(o, mul(o, add(o, mul(o, n, c), mul(o, mul(o, n, f), 2)), eb),
                             mul(o, add(o, r, ne), 4));
    if (a->grouped)
        moe_grouped_phases(o, act, n, c, e, k, f, info);
}

/* Fused (one kernel, as liger-kernel or llm.c): the logits and the f32 row log-sum-exp, and
 * the logits' gradient made directly. PyTorch's F.cross_entropy, log_softmax then nll_loss:
 * nll_loss keeps the log-probabilities, and its backward makes their gradient (the
 * workspace) before log_softmax's backward makes the logits': three logits-sized tensors
 * at once. Either way the targets are read. */
static void describe_cross_entropy(ovf *o, const ck_attrs *a, const ck_ttype *in,
                                   ck_op_info *info)
{
    if (a->fused) {
        ck_ttype lse = rows_of(&in[0], CK_F32);
        save_ref(o, info, CK_SAVE_INPUT, 0, &in[0]);
        save_ref(o, info, CK_SAVE_INPUT, 1, &in[1]);
        save_internal(o, info, CK_SLOT_LSE, &lse);
    } else if (a->upcast && in[0].dtype != CK_F32) {
        /* HF's ForCausalLMLoss: logits.float() (the forward's workspace) to log_softmax,
         * whose f32 output nll_loss keeps. Backward, PyTorch peaks at log_softmax's, with
         * the kept output and two f32 gradients (nll_loss's, log_softmax's); the logits'
         * own 16-bit gradient comes after the first two are freed (the cast back, 6 bytes
         * an element then). The program makes that gradient before the backward runs, so
         * the workspace is the rest of the peak: two f32 gradients less one 16-bit one
         * (measured on an H200: one bf16 logits tensor over before, docs/pytorch.md). */
        ck_ttype logp = in[0];
        logp.dtype = CK_F32;
        save_ref(o, info, CK_SAVE_INPUT, 1, &in[1]);
        save_internal(o, info, CK_SLOT_LOGP, &logp);
        info->fwd_ws_bytes = bytes_of(o, &logp);
        info->bwd_ws_bytes = sub_floor(mul(o, bytes_of(o, &logp), 2), bytes_of(o, &in[0]));
    } else {
        save_ref(o, info, CK_SAVE_INPUT, 1, &in[1]);
        save_internal(o, info, CK_SLOT_LOGP, &in[0]);
        info->bwd_ws_bytes = bytes_of(o, &in[0]);
    }
    info->id_limit[1] = last_dim(&in[0]);
}

/* act(gate) * up. Fused, one kernel keeps gate and up (swiglu's dup reads the gate only).
 * Written out, as Hugging Face's MLPs run it: act keeps the gate for the gate's gradient,
 * the product keeps act(gate) for up's and up for act(gate)'s. No workspace: autograd makes
 * act(gate)'s gradient beside up's, runs up_proj's backward (made later, so first), which
 * frees up's, then act's, which makes the gate's: two [..] gradients at a time, the two
 * this node's backward holds (the referee measures the same peak). */
static void describe_glu(ovf *o, const ck_op_def *op, const ck_attrs *a, const ck_ttype *out,
                         const ck_ttype *in, ck_op_info *info)
{
    save_ref(o, info, CK_SAVE_INPUT, 0, &in[0]);
    save_ref(o, info, CK_SAVE_INPUT, 1, &in[1]);
    if (a->fused) {
        if (op->kind == CK_OP_SWIGLU)
            only_for(info, 1, CK_NEED_INPUT(0));
        return;
    }
    only_for(info, 0, CK_NEED_INPUT(0));
    only_for(info, 1, CK_NEED_INPUT(0));
    save_internal(o, info, CK_SLOT_GLU_ACT, out);
    only_for(info, 2, CK_NEED_INPUT(1));
}

/* What node of kind op->kind saves and owns, and the FLOPs beyond its per-element ones;
 * n is its output's element count (a loss's: its input's). */
static void describe_kind(ovf *o, const ck_op_def *op, const ck_attrs *a, const ck_ttype *in,
                          const ck_ttype *out, uint64_t n, ck_op_info *info)
{
    switch (op->kind) {
    case CK_OP_EMBEDDING:
        save_ref(o, info, CK_SAVE_INPUT, 0, &in[0]);
        only_for(info, 0, CK_NEED_PARAMS); /* the ids say which rows of dwte to add to */
        param(o, info, "wte", CK_INIT_NORMAL, true, false, SHAPE(a->vocab, a->dim));
        param(o, info, "wpe", CK_INIT_NORMAL, a->positions > 0, false,
              SHAPE(a->positions, a->dim));
        info->id_limit[0] = a->vocab;
        if (a->positions) { /* adding the position rows, and their gradient */
            info->fwd_flops = add(o, info->fwd_flops, n);
            info->bwd_flops = add(o, info->bwd_flops, n);
            if (a->leaf) /* the lookup the position rows are added to */
                info->step_bytes[CK_STEP_LEAF] = bytes_of(o, out);
        }
        add_sequence_ws(o, a, in, out, info);
        break;
    case CK_OP_LINEAR:
        describe_linear(o, a, in, out, info);
        break;
    case CK_OP_LAYERNORM:
    case CK_OP_RMSNORM: {
        ck_ttype stats = rows_of(&in[0], CK_F32), upcast = in[0];
        uint64_t c = last_dim(&in[0]);
        upcast.dtype = CK_F32;
        /* LlamaRMSNorm computes on x.float(): on 16-bit x, that copy is what it keeps */
        if (op->kind == CK_OP_RMSNORM && !a->fused && in[0].dtype != CK_F32)
            save_internal(o, info, CK_SLOT_X_F32, &upcast);
        else
            save_ref(o, info, CK_SAVE_INPUT, 0, &in[0]);
        if (op->kind == CK_OP_LAYERNORM)
            save_internal(o, info, CK_SLOT_MEAN, &stats);
        save_internal(o, info, CK_SLOT_RSTD, &stats);
        if (op->kind == CK_OP_RMSNORM && !a->fused) { /* HF's LlamaRMSNorm: w * (x rstd), */
            save_internal(o, info, CK_SLOT_NORMED, &in[0]); /* which the weight's gradient reads */
            only_for(info, info->n_saved - 1, CK_NEED_PARAMS);
        }
        param(o, info, "gamma", CK_INIT_ONES, true, false, SHAPE(c));
        if (op->kind == CK_OP_LAYERNORM)
            param(o, info, "beta", CK_INIT_ZEROS, true, false, SHAPE(c));
        break;
    }
    case CK_OP_GELU:
        save_ref(o, info, CK_SAVE_INPUT, 0, &in[0]);
        if (a->fused)
            break;
        /* 0.5 x (1 + tanh(..)): pow keeps x, tanh its output, the product both. Backward,
         * autograd's chain holds one more [..] gradient beside the output's and the input's
         * (the product's two, then the tanh's input's): the workspace. */
        for (ck_slot s = CK_SLOT_GELU_HALF; s <= CK_SLOT_GELU_SUM; s++)
            save_internal(o, info, s, out);
        info->bwd_ws_bytes = bytes_of(o, out);
        break;
    case CK_OP_SILU:
        save_ref(o, info, CK_SAVE_INPUT, 0, &in[0]);
        break;
    case CK_OP_RELU:
    case CK_OP_SOFTCAP:
        save_ref(o, info, CK_SAVE_OUTPUT, 0, out);
        break;
    case CK_OP_SWIGLU:
    case CK_OP_GEGLU:
        describe_glu(o, op, a, out, in, info);
        break;
    case CK_OP_MUL:
    case CK_OP_MSE:
        save_ref(o, info, CK_SAVE_INPUT, 0, &in[0]);
        save_ref(o, info, CK_SAVE_INPUT, 1, &in[1]);
        if (op->kind == CK_OP_MUL) { /* da = dout b, db = dout a */
            only_for(info, 0, CK_NEED_INPUT(1));
            only_for(info, 1, CK_NEED_INPUT(0));
        }
        break;
    case CK_OP_DROPOUT:
        save_mask(o, info, a, out);
        break;
    case CK_OP_ATTENTION:
        describe_attention(o, a, in, out, info);
        break;
    case CK_OP_LORA:
        describe_lora(o, a, in, out, info);
        break;
    case CK_OP_QKNORM:
        describe_qknorm(o, a, in, n, info);
        break;
    case CK_OP_CROSS_ENTROPY:
        describe_cross_entropy(o, a, in, info);
        break;
    case CK_OP_ROPE: { /* saves nothing: its backward is the inverse rotation */
        /* 4 multiplications and 2 additions per pair of the q and k heads, either way. */
        uint64_t groups = add(o, mul(o, a->kv_heads, 2), a->heads);
        uint64_t rotated = mul(o, n / groups, add(o, a->heads, a->kv_heads));
        info->fwd_flops = mul(o, rotated, 3);
        info->bwd_flops = info->fwd_flops;
        if (a->step_tables) /* cos and sin, [1, T, head_dim] each, in the activations' dtype */
            info->step_bytes[CK_STEP_TABLES] =
                mul(o, mul(o, mul(o, in[0].dim[1], last_dim(&in[0]) / groups), 2), ck_dtype_bytes(out->dtype));
        break;
    }
    case CK_OP_MOE:
        describe_moe(o, a, in, info);
        break;
    case CK_OP_ADD:
    case CK_OP_CAST:
    case CK_OP_SCALE: /* they save nothing */
        break;
    }
}

/* Bytes moved, the same rule for every op: the forward reads its inputs and parameters and
 * writes its output and internal saved tensors; the backward reads the output's gradient
 * and what was saved and writes the inputs' gradients, reading and writing the parameters'
 * gradients; workspace is written once and read once. Parameters are counted in the
 * activation dtype, the precision the kernels compute in. */
static void bytes_moved(ovf *o, const ck_op_def *op, const ck_ttype *in, const ck_ttype *out,
                        ck_op_info *info)
{
    uint64_t param_bytes = mul(o, info->n_params, ck_dtype_bytes(out->dtype));
    uint64_t out_bytes = bytes_of(o, out);
    uint64_t fwd = add(o, add(o, out_bytes, param_bytes), mul(o, info->fwd_ws_bytes, 2));
    uint64_t bwd = add(o, add(o, out_bytes, mul(o, param_bytes, 3)), mul(o, info->bwd_ws_bytes, 2));
    for (size_t i = 0; i < op->arity; i++) {
        fwd = add(o, fwd, bytes_of(o, &in[i]));
        if (ck_dtype_is_float(in[i].dtype))
            bwd = add(o, bwd, bytes_of(o, &in[i]));
    }
    for (size_t i = 0; i < info->n_saved; i++) {
        bwd = add(o, bwd, info->saved[i].bytes);
        if (info->saved[i].kind == CK_SAVE_INTERNAL)
            fwd = add(o, fwd, info->saved[i].bytes);
    }
    info->fwd_bytes_moved = fwd;
    info->bwd_bytes_moved = bwd;
}

int ck_op_describe(const ck_op_def *op, const ck_attrs *a, const ck_ttype *in,
                   const ck_ttype *out, ck_op_info *info, const char *file, const char *path,
                   ck_err *err)
{
    ovf o = {true};
    memset(info, 0, sizeof *info);
    uint64_t n = numel(&o, out);
    if (op->is_loss)
        n = numel(&o, &in[0]);
    info->fwd_flops = mul(&o, n, op->flops_per_element[0]);
    info->bwd_flops = mul(&o, n, op->flops_per_element[1]);
    describe_kind(&o, op, a, in, out, n, info);
    bytes_moved(&o, op, in, out, info);
    if (!o.ok)
        return ck_err_fail(err, CK_ERR_INPUT,
                       "%s: %s: the sizes or FLOP counts of this %s overflow 64 bits", file, path,
                       op->name);
    return CK_OK;
}
