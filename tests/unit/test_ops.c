#include "planner/op.h"

#include <stdio.h>
#include <string.h>

#include "tests/unit/check_main.h"

static ck_ttype tt(ck_dtype d, size_t rank, uint64_t d0, uint64_t d1, uint64_t d2)
{
    ck_ttype t = {.dtype = d, .rank = rank, .dim = {d0, d1, d2}};
    return t;
}

/* Runs inference and description of op `name` with attributes set by the caller. */
static ck_ttype infer_ok(const char *name, ck_attrs *a, const ck_ttype *in, ck_op_info *info)
{
    const ck_op_def *op = ck_op_find(name);
    ck_assert_ptr_nonnull(op);
    ck_ttype out;
    ck_err err = {{0}};
    ck_assert_msg(ck_op_infer(op, a, CK_BF16, in, &out, "f", "n", &err) == CK_OK, "%s", err.msg);
    ck_assert_msg(ck_op_describe(op, a, in, &out, info, "f", "n", &err) == CK_OK, "%s", err.msg);
    return out;
}

static const char *infer_bad(const char *name, ck_attrs *a, const ck_ttype *in)
{
    static ck_err err;
    ck_ttype out;
    ck_assert_int_eq(ck_op_infer(ck_op_find(name), a, CK_F32, in, &out, "f.json", "nodes[3]", &err),
                     CK_ERR_INPUT);
    return err.msg;
}

static ck_attrs defaults(const char *name)
{
    ck_attrs a;
    ck_op_default_attrs(ck_op_find(name), &a);
    return a;
}

static void assert_shape(const ck_ttype *t, ck_dtype d, size_t rank, uint64_t d0, uint64_t d1, uint64_t d2)
{
    ck_assert_int_eq(t->dtype, d);
    ck_assert_uint_eq(t->rank, rank);
    const uint64_t want[3] = {d0, d1, d2};
    for (size_t i = 0; i < rank && i < 3; i++)
        ck_assert_uint_eq(t->dim[i], want[i]);
}

/* Parameter i of a node: its name, init, shape ([d0] where d1 is 0) and offset. */
static void assert_param(const ck_op_info *info, size_t i, const char *name, ck_init init,
                         uint64_t d0, uint64_t d1, uint64_t offset)
{
    const ck_param *p = &info->params[i];
    ck_assert_uint_lt(i, info->n_param_tensors);
    ck_assert_str_eq(p->name, name);
    ck_assert_int_eq(p->init, init);
    ck_assert(!p->tied);
    ck_assert_uint_eq(p->rank, d1 ? 2 : 1);
    ck_assert(p->dim[0] == d0 && (!d1 || p->dim[1] == d1));
    ck_assert_uint_eq(p->numel, d1 ? d0 * d1 : d0);
    ck_assert_uint_eq(p->offset, offset);
}

/* ck_op_names, which messages list, names every op of the table, each once. */
START_TEST(names_list_every_op)
{
    char names[512];
    snprintf(names, sizeof names, "%s", ck_op_names());
    bool seen[CK_N_OP_KINDS] = {false};
    size_t n = 0;
    for (char *tok = strtok(names, ", "); tok; tok = strtok(NULL, ", ")) {
        const ck_op_def *op = ck_op_find(tok);
        ck_assert_msg(op, "%s is not an op", tok);
        ck_assert_msg(!seen[op->kind], "%s twice", tok);
        ck_assert_str_eq(op->name, tok);
        seen[op->kind] = true;
        n++;
    }
    ck_assert_uint_eq(n, CK_N_OP_KINDS);
}
END_TEST

START_TEST(dtypes)
{
    ck_dtype d;
    ck_assert(ck_dtype_parse("bf16", &d) && d == CK_BF16);
    ck_assert(ck_dtype_parse("int32", &d) && d == CK_I32);
    ck_assert(!ck_dtype_parse("f64", &d));
    ck_assert_uint_eq(ck_dtype_bytes(CK_F32), 4);
    ck_assert_uint_eq(ck_dtype_bytes(CK_F16), 2);
    ck_assert_uint_eq(ck_dtype_bytes(CK_U8), 1);
    ck_assert(ck_dtype_is_float(CK_BF16) && !ck_dtype_is_float(CK_I32));
    char buf[64];
    ck_ttype t = tt(CK_F16, 3, 4, 64, 128);
    ck_ttype_format(&t, buf, sizeof buf);
    ck_assert_str_eq(buf, "f16 [4, 64, 128]");
    uint64_t bytes;
    ck_assert(ck_ttype_bytes(&t, &bytes) && bytes == 4 * 64 * 128 * 2);
    ck_ttype huge = tt(CK_F32, 2, 1ULL << 32, 1ULL << 31, 0);
    ck_assert(!ck_ttype_bytes(&huge, &bytes));
    ck_assert_ptr_null(ck_op_find("conv"));
}
END_TEST

START_TEST(embedding)
{
    ck_attrs a = defaults("embedding");
    a.vocab = 100, a.dim = 16, a.positions = 32;
    ck_ttype in = tt(CK_I32, 2, 4, 32, 0);
    ck_op_info info;
    ck_ttype out = infer_ok("embedding", &a, &in, &info);
    assert_shape(&out, CK_BF16, 3, 4, 32, 16); /* takes the activation dtype */
    ck_assert_uint_eq(info.n_params, (100 + 32) * 16);
    assert_param(&info, 0, "wte", CK_INIT_NORMAL, 100, 16, 0);
    assert_param(&info, 1, "wpe", CK_INIT_NORMAL, 32, 16, 100 * 16);
    ck_assert_uint_eq(info.id_limit[0], 100);
    ck_assert_uint_eq(info.n_saved, 1);
    ck_assert_int_eq(info.saved[0].kind, CK_SAVE_INPUT);
    ck_assert_uint_eq(info.saved[0].bytes, 4 * 32 * 4);
    ck_ttype long_in = tt(CK_I32, 2, 4, 33, 0);
    ck_assert(strstr(infer_bad("embedding", &a, &long_in),
                     "f.json: nodes[3].inputs[0]: expected at most `positions` tokens"));
}
END_TEST

START_TEST(linear)
{
    ck_attrs a = defaults("linear");
    ck_assert(a.bias && !a.tied);
    a.out = 48;
    ck_ttype in = tt(CK_BF16, 3, 2, 5, 16);
    ck_op_info info;
    ck_ttype out = infer_ok("linear", &a, &in, &info);
    assert_shape(&out, CK_BF16, 3, 2, 5, 48);
    ck_assert_uint_eq(info.n_params, 16 * 48 + 48);
    assert_param(&info, 0, "weight", CK_INIT_NORMAL, 48, 16, 0);
    assert_param(&info, 1, "bias", CK_INIT_ZEROS, 48, 0, 16 * 48);
    ck_assert_uint_eq(info.id_limit[0], 0);
    ck_assert_uint_eq(info.fwd_flops, 2 * 10 * 16 * 48 + 10 * 48);
    ck_assert_uint_eq(info.bwd_flops, 4 * 10 * 16 * 48 + 10 * 48);
    ck_assert_uint_eq(info.n_saved, 1);
    ck_assert_int_eq(info.saved[0].kind, CK_SAVE_INPUT);
    ck_assert_uint_eq(info.saved[0].input, 0);
    /* bytes: in + out + weights (bf16) forward; dY, dX, saved X, 3x weights backward */
    uint64_t x = 10 * 16 * 2, y = 10 * 48 * 2, w = (16 * 48 + 48) * 2;
    ck_assert_uint_eq(info.fwd_bytes_moved, x + y + w);
    ck_assert_uint_eq(info.bwd_bytes_moved, y + 3 * w + x + x);
    /* dX of rows of a rank-3 input is the product's view, on a matrix the product itself */
    ck_assert_uint_eq(info.grad_view, 1);
    ck_ttype rows = tt(CK_BF16, 2, 10, 16, 0);
    infer_ok("linear", &a, &rows, &info);
    ck_assert_uint_eq(info.grad_view, 0);
    a.flat = true; /* rows already, as OPT's MLP makes them: no view either */
    infer_ok("linear", &a, &in, &info);
    ck_assert_uint_eq(info.grad_view, 0);
    a.flat = false;
    a.bias = false, a.tied = true;
    infer_ok("linear", &a, &in, &info);
    ck_assert_uint_eq(info.n_params, 0);
    /* The tied weight keeps its name and shape but counts nothing; the bias is absent. */
    ck_assert(info.n_param_tensors == 2 && info.params[0].tied && info.params[0].numel == 0);
    ck_assert_uint_eq(info.params[0].dim[0] * info.params[0].dim[1], 48 * 16);
    ck_assert(!info.params[1].tied && info.params[1].numel == 0);
    ck_ttype ids = tt(CK_I32, 2, 2, 5, 0);
    ck_assert(strstr(infer_bad("linear", &a, &ids), "f.json: nodes[3].inputs[0]: expected a float tensor"));
}
END_TEST

START_TEST(norms_save_input_and_f32_statistics)
{
    ck_ttype in = tt(CK_BF16, 3, 2, 5, 16);
    ck_attrs a = defaults("layernorm");
    ck_op_info info;
    ck_ttype out = infer_ok("layernorm", &a, &in, &info);
    assert_shape(&out, CK_BF16, 3, 2, 5, 16);
    ck_assert_uint_eq(info.n_params, 32);
    assert_param(&info, 0, "gamma", CK_INIT_ONES, 16, 0, 0);
    assert_param(&info, 1, "beta", CK_INIT_ZEROS, 16, 0, 16);
    ck_assert_uint_eq(info.n_saved, 3);
    ck_assert_int_eq(info.saved[0].kind, CK_SAVE_INPUT);
    ck_assert_int_eq(info.saved[1].slot, CK_SLOT_MEAN);
    ck_assert_int_eq(info.saved[2].slot, CK_SLOT_RSTD);
    assert_shape(&info.saved[2].type, CK_F32, 2, 2, 5, 0);
    ck_assert_uint_eq(info.saved[2].bytes, 10 * 4);
    a = defaults("rmsnorm");
    infer_ok("rmsnorm", &a, &in, &info);
    ck_assert_uint_eq(info.n_params, 16);
    ck_assert_uint_eq(info.n_param_tensors, 1);
    assert_param(&info, 0, "gamma", CK_INIT_ONES, 16, 0, 0);
    ck_assert_uint_eq(info.n_saved, 2);
    ck_assert_int_eq(info.saved[1].slot, CK_SLOT_RSTD);
    /* Written out (HF's LlamaRMSNorm), the product with gamma keeps x rstd too. */
    a.fused = false;
    infer_ok("rmsnorm", &a, &in, &info);
    ck_assert_uint_eq(info.n_saved, 3);
    ck_assert_int_eq(info.saved[2].slot, CK_SLOT_NORMED);
    ck_assert_uint_eq(info.saved[2].bytes, 2 * 5 * 16 * 2);
}
END_TEST

START_TEST(elementwise)
{
    ck_ttype in[2] = {tt(CK_F16, 2, 3, 7, 0), tt(CK_F16, 2, 3, 7, 0)};
    ck_op_info info;
    ck_attrs a = defaults("gelu");
    ck_ttype out = infer_ok("gelu", &a, in, &info);
    assert_shape(&out, CK_F16, 2, 3, 7, 0);
    ck_assert(info.n_saved == 1 && info.saved[0].kind == CK_SAVE_INPUT);
    /* Written out as GPT-2's NewGELU: x / 2, the tanh and 1 + the tanh besides x. */
    a.fused = false;
    infer_ok("gelu", &a, in, &info);
    ck_assert_uint_eq(info.n_saved, 4);
    for (size_t s = 1; s < 4; s++)
        ck_assert(info.saved[s].kind == CK_SAVE_INTERNAL && info.saved[s].bytes == 21 * 2);
    ck_assert_int_eq(info.saved[1].slot, CK_SLOT_GELU_HALF);
    ck_assert_int_eq(info.saved[3].slot, CK_SLOT_GELU_SUM);
    ck_assert_uint_eq(info.bwd_ws_bytes, 21 * 2); /* the tanh input's gradient */
    a.fused = true;
    infer_ok("silu", &a, in, &info);
    ck_assert(info.n_saved == 1 && info.saved[0].kind == CK_SAVE_INPUT);
    infer_ok("relu", &a, in, &info);
    ck_assert(info.n_saved == 1 && info.saved[0].kind == CK_SAVE_OUTPUT);
    out = infer_ok("add", &a, in, &info);
    assert_shape(&out, CK_F16, 2, 3, 7, 0);
    ck_assert_uint_eq(info.n_saved, 0);
    infer_ok("mul", &a, in, &info);
    ck_assert(info.n_saved == 2 && info.saved[0].input == 0 && info.saved[1].input == 1);
    a = defaults("dropout");
    a.p = 0.5;
    infer_ok("dropout", &a, in, &info);
    ck_assert(info.n_saved == 1 && info.saved[0].kind == CK_SAVE_INTERNAL);
    assert_shape(&info.saved[0].type, CK_U8, 2, 3, 7, 0);
    ck_assert_uint_eq(info.saved[0].bytes, 21);
    in[1].dtype = CK_F32;
    ck_assert(strstr(infer_bad("mul", &a, in), "f.json: nodes[3].inputs[1]: expected the type of "
                                               "inputs[0], f16 [3, 7], got f32 [3, 7]"));
}
END_TEST

START_TEST(attention_grouped_query)
{
    ck_attrs a = defaults("attention");
    ck_assert(a.p == 0 && !a.flash);
    a.heads = 4, a.kv_heads = 2;
    ck_ttype in = tt(CK_BF16, 3, 2, 8, (4 + 2 * 2) * 16);
    ck_op_info info;
    ck_ttype out = infer_ok("attention", &a, &in, &info);
    assert_shape(&out, CK_BF16, 3, 2, 8, 4 * 16);
    ck_assert_uint_eq(info.n_params, 0);
    /* qkv, output, probabilities [B, H, T, T] */
    ck_assert_uint_eq(info.n_saved, 3);
    ck_assert_int_eq(info.saved[0].kind, CK_SAVE_INPUT);
    ck_assert_int_eq(info.saved[1].kind, CK_SAVE_OUTPUT);
    ck_assert_int_eq(info.saved[2].slot, CK_SLOT_PROBS);
    ck_assert_uint_eq(info.saved[2].bytes, 2 * 4 * 8 * 8 * 2);
    ck_assert_uint_eq(info.fwd_ws_bytes, 2 * 4 * 8 * 8 * 2);
    ck_assert_uint_eq(info.fwd_flops, 4 * (2 * 4 * 8 * 8) * 16 + 5 * (2 * 4 * 8 * 8));

    /* Hugging Face's repeat_kv: q, and k and v copied to all 4 heads, [B, H, T, D] each, kept
     * instead of the packed qkv (measured: tests/torch/hf_saved.py); their gradient is a
     * transient of the backward. */
    a.expand_kv = true;
    infer_ok("attention", &a, &in, &info);
    ck_assert_uint_eq(info.n_saved, 3);
    ck_assert_int_eq(info.saved[0].slot, CK_SLOT_QKV_EXPANDED);
    ck_assert_int_eq(info.saved[0].kind, CK_SAVE_INTERNAL);
    ck_assert_uint_eq(info.saved[0].bytes, 3 * 2 * 4 * 8 * 16 * 2);
    ck_assert_int_eq(info.saved[1].kind, CK_SAVE_OUTPUT);
    ck_assert_uint_eq(info.bwd_ws_bytes, 3 * 2 * 4 * 8 * 16 * 2 + 2 * 4 * 8 * 8 * 2);
    a.kv_heads = 4; /* one kv head a query head: repeat_kv copies nothing */
    ck_ttype all_heads = tt(CK_BF16, 3, 2, 8, 3 * 4 * 16);
    infer_ok("attention", &a, &all_heads, &info);
    ck_assert_uint_eq(info.n_saved, 3);
    ck_assert_int_eq(info.saved[0].kind, CK_SAVE_INPUT);
    a.kv_heads = 2;
    a.flash = true; /* sdpa and flash kernels read the shared heads: nothing copied */
    infer_ok("attention", &a, &in, &info);
    ck_assert_int_eq(info.saved[0].kind, CK_SAVE_INPUT);
    ck_assert_uint_eq(info.n_saved, 3);
    a.flash = false;
    a.expand_kv = false;

    a.p = 0.1;
    infer_ok("attention", &a, &in, &info);
    ck_assert_uint_eq(info.n_saved, 5);
    ck_assert_int_eq(info.saved[3].slot, CK_SLOT_MASK);
    ck_assert_uint_eq(info.saved[3].bytes, 2 * 4 * 8 * 8);
    ck_assert_int_eq(info.saved[4].slot, CK_SLOT_DROPPED);

    a.flash = true;
    infer_ok("attention", &a, &in, &info);
    ck_assert_uint_eq(info.n_saved, 3);
    ck_assert_int_eq(info.saved[2].slot, CK_SLOT_LSE);
    assert_shape(&info.saved[2].type, CK_F32, 3, 2, 4, 8);
    ck_assert_uint_eq(info.fwd_ws_bytes, 8 * 4);

    a = defaults("attention");
    a.heads = 4; /* kv_heads defaults to heads: width 3 * 4 * 16 */
    ck_ttype mha = tt(CK_BF16, 3, 2, 8, 192);
    out = infer_ok("attention", &a, &mha, &info);
    ck_assert_uint_eq(a.kv_heads, 4);
    ck_assert_uint_eq(out.dim[2], 64);
    ck_assert(strstr(infer_bad("attention", &a, &in),
                     "f.json: nodes[3].inputs[0]: expected a last dimension divisible by heads + "
                     "2*kv_heads = 12 (packed q, k, v), got bf16 [2, 8, 128]"));
    a.kv_heads = 3;
    ck_assert(strstr(infer_bad("attention", &a, &mha),
                     "f.json: nodes[3].kv_heads: expected a divisor of heads (4), got 3"));
}
END_TEST

/* Rope keeps packed qkv's type, owns and saves nothing, and costs 3 FLOPs per rotated
 * (q or k) element each way. */
START_TEST(rope_rotates_q_and_k)
{
    ck_attrs a = defaults("rope");
    ck_assert_uint_eq(a.theta, 10000);
    a.heads = 8, a.kv_heads = 2; /* 12 heads of 16 */
    ck_ttype in = tt(CK_BF16, 3, 2, 8, 192);
    ck_op_info info;
    ck_ttype out = infer_ok("rope", &a, &in, &info);
    assert_shape(&out, CK_BF16, 3, 2, 8, 192);
    ck_assert(info.n_saved == 0 && info.n_params == 0 && info.n_param_tensors == 0);
    ck_assert(info.fwd_ws_bytes == 0 && info.bwd_ws_bytes == 0);
    uint64_t rotated = 2 * 8 * (8 + 2) * 16;
    ck_assert_uint_eq(info.fwd_flops, 3 * rotated);
    ck_assert_uint_eq(info.bwd_flops, 3 * rotated);
    uint64_t bytes = 2 * 8 * 192 * 2;
    ck_assert_uint_eq(info.fwd_bytes_moved, 2 * bytes); /* reads x, writes y */
    ck_assert_uint_eq(info.bwd_bytes_moved, 2 * bytes); /* reads dy, writes dx */
    a = defaults("rope");
    a.heads = 4; /* kv_heads defaults to heads: 12 heads of 16 */
    infer_ok("rope", &a, &in, &info);
    ck_assert_uint_eq(a.kv_heads, 4);
    ck_assert_uint_eq(info.fwd_flops, 3 * 2 * 8 * 8 * 16);
    ck_ttype odd = tt(CK_F32, 3, 2, 8, 36); /* 12 heads of 3 */
    ck_assert(strstr(infer_bad("rope", &a, &odd),
                     "f.json: nodes[3].inputs[0]: expected heads of an even size (rotated in "
                     "pairs); (heads + 2*kv_heads) divides the last dimension into heads of 3, "
                     "got f32 [2, 8, 36]"));
    ck_ttype flat = tt(CK_F32, 2, 16, 192, 0);
    ck_assert(strstr(infer_bad("rope", &a, &flat),
                     "f.json: nodes[3].inputs[0]: expected a float tensor [B, T, (heads + "
                     "2*kv_heads) * head_dim], got f32 [16, 192]"));
    a.kv_heads = 3;
    ck_assert(strstr(infer_bad("rope", &a, &in),
                     "f.json: nodes[3].kv_heads: expected a divisor of heads (4), got 3"));
    a.kv_heads = 1; /* 6 groups do not divide 100 */
    ck_ttype uneven = tt(CK_F32, 3, 2, 8, 100);
    ck_assert(strstr(infer_bad("rope", &a, &uneven),
                     "f.json: nodes[3].inputs[0]: expected a last dimension divisible by heads + "
                     "2*kv_heads = 6 (packed q, k, v)"));
}
END_TEST

/* A fused gated unit op(gate, up) on bf16 [2, 5, 24]: keeps their type, saves both inputs
 * and costs fwd and bwd FLOPs per element; the two inputs must have one type. */
static void assert_gated(const char *name, uint64_t fwd, uint64_t bwd)
{
    ck_ttype in[2] = {tt(CK_BF16, 3, 2, 5, 24), tt(CK_BF16, 3, 2, 5, 24)};
    ck_attrs a = defaults(name);
    ck_op_info info;
    ck_ttype out = infer_ok(name, &a, in, &info);
    assert_shape(&out, CK_BF16, 3, 2, 5, 24);
    ck_assert(info.n_params == 0 && info.n_param_tensors == 0);
    ck_assert_uint_eq(info.n_saved, 2);
    ck_assert(info.saved[0].kind == CK_SAVE_INPUT && info.saved[0].input == 0);
    ck_assert(info.saved[1].kind == CK_SAVE_INPUT && info.saved[1].input == 1);
    ck_assert_uint_eq(info.saved[0].bytes + info.saved[1].bytes, 2 * 240 * 2);
    ck_assert_uint_eq(info.fwd_flops, fwd * 240);
    ck_assert_uint_eq(info.bwd_flops, bwd * 240);
    uint64_t x = 240 * 2; /* reads 2 inputs, writes 1; reads dy and the 2 saved, writes 2 */
    ck_assert_uint_eq(info.fwd_bytes_moved, 3 * x);
    ck_assert_uint_eq(info.bwd_bytes_moved, 5 * x);
    /* Written out (Hugging Face's MLPs): act(gate) kept too, for up's gradient only, gate and
     * up for the gate's; no workspace (act(gate)'s gradient lives while up's is gone). */
    a.fused = false;
    infer_ok(name, &a, in, &info);
    ck_assert_uint_eq(info.n_saved, 3);
    ck_assert(info.saved[2].kind == CK_SAVE_INTERNAL && info.saved[2].slot == CK_SLOT_GLU_ACT);
    ck_assert_uint_eq(info.saved[2].bytes, 240 * 2);
    ck_assert_uint_eq(info.saved[0].needed_for, CK_NEED_INPUT(0));
    ck_assert_uint_eq(info.saved[1].needed_for, CK_NEED_INPUT(0));
    ck_assert_uint_eq(info.saved[2].needed_for, CK_NEED_INPUT(1));
    ck_assert_uint_eq(info.bwd_ws_bytes, 0);
    a.fused = true;
    in[1].dim[2] = 12;
    ck_assert(strstr(infer_bad(name, &a, in),
                     "f.json: nodes[3].inputs[1]: expected the type of inputs[0], bf16 [2, 5, 24], "
                     "got bf16 [2, 5, 12]"));
    in[1] = tt(CK_F16, 3, 2, 5, 24);
    ck_assert(strstr(infer_bad(name, &a, in),
                     "f.json: nodes[3].inputs[1]: expected the type of inputs[0], bf16 [2, 5, 24], "
                     "got f16 [2, 5, 24]"));
    ck_ttype ids[2] = {tt(CK_I32, 2, 2, 5, 0), tt(CK_I32, 2, 2, 5, 0)};
    ck_assert(strstr(infer_bad(name, &a, ids), "f.json: nodes[3].inputs[0]: expected a float tensor"));
}

/* swiglu: silu 4 + product 1 forward, 10 backward. */
START_TEST(swiglu_saves_both_inputs) { assert_gated("swiglu", 5, 10); }
END_TEST


/* lora(x [2,5,24], y [2,5,40]) at rank 4: lora_a [4, 24] then lora_b [40, 4]; saves x and
 * mid [2,5,4]; 10 rows. With heads 2, kv_heads 1, q, k and v have their own A rows. */
START_TEST(lora_adds_an_adapter)
{
    ck_ttype in[2] = {tt(CK_BF16, 3, 2, 5, 24), tt(CK_BF16, 3, 2, 5, 40)};
    ck_attrs a = defaults("lora");
    a.rank = 4;
    ck_op_info info;
    ck_ttype out = infer_ok("lora", &a, in, &info);
    assert_shape(&out, CK_BF16, 3, 2, 5, 40);
    ck_assert(a.alpha == 4.0); /* the rank's, by default */
    ck_assert_uint_eq(info.n_params, 4 * 24 + 40 * 4);
    assert_param(&info, 0, "lora_a", CK_INIT_NORMAL, 4, 24, 0);
    assert_param(&info, 1, "lora_b", CK_INIT_ZEROS, 40, 4, 96);
    ck_assert_uint_eq(info.n_saved, 2);
    ck_assert(info.saved[0].kind == CK_SAVE_INPUT && info.saved[0].input == 0);
    ck_assert(info.saved[1].kind == CK_SAVE_INTERNAL && info.saved[1].slot == CK_SLOT_LORA_MID);
    assert_shape(&info.saved[1].type, CK_BF16, 3, 2, 5, 4);
    ck_assert_uint_eq(info.saved[0].bytes + info.saved[1].bytes, 10 * 24 * 2 + 10 * 4 * 2);
    uint64_t a_mm = 2 * 10 * 24 * 4, b_mm = 2 * 10 * 40 * 4; /* x A^T, mid B^T */
    ck_assert_uint_eq(info.fwd_flops, 2 * 400 + a_mm + b_mm);
    ck_assert_uint_eq(info.bwd_flops, 2 * 400 + 2 * (a_mm + b_mm));
    ck_assert(info.fwd_ws_bytes == 0 && info.bwd_ws_bytes == 10 * 4 * 2); /* dmid */
    /* forward: x, y, params in, out and mid out; backward: dy, saved, params x3, ws x2 in
     * and out, dx and dy out. */
    uint64_t params = 256 * 2;
    ck_assert_uint_eq(info.fwd_bytes_moved, 480 + 800 + params + 800 + 80);
    ck_assert_uint_eq(info.bwd_bytes_moved, 800 + 480 + 80 + 3 * params + 2 * 80 + 480 + 800);
    a = defaults("lora");
    a.rank = 4, a.alpha = 8, a.heads = 2, a.kv_heads = 1; /* 4 heads of 10 */
    infer_ok("lora", &a, in, &info);
    ck_assert(a.alpha == 8.0);
    ck_assert_uint_eq(info.n_params, 3 * 4 * 24 + 40 * 4);
    assert_param(&info, 0, "lora_a", CK_INIT_NORMAL, 12, 24, 0);
    assert_param(&info, 1, "lora_b", CK_INIT_ZEROS, 40, 4, 288);
    assert_shape(&info.saved[1].type, CK_BF16, 3, 2, 5, 12);
    in[1].dim[2] = 42;
    ck_assert(strstr(infer_bad("lora", &a, in),
                     "f.json: nodes[3].inputs[1]: expected a last dimension divisible by heads + "
                     "2*kv_heads = 4 (packed q, k, v), got bf16 [2, 5, 42]"));
    a.kv_heads = 3;
    ck_assert(strstr(infer_bad("lora", &a, in),
                     "f.json: nodes[3].kv_heads: expected a divisor of heads (2), got 3"));
    a = defaults("lora");
    a.rank = 4;
    in[1] = tt(CK_BF16, 3, 2, 6, 40);
    ck_assert(strstr(infer_bad("lora", &a, in),
                     "f.json: nodes[3].inputs[1]: expected the dtype and leading dimensions of "
                     "inputs[0], bf16 [2, 5, 24] (y, the base projection of x), got bf16 [2, 6, 40]"));
    in[1] = tt(CK_F32, 3, 2, 5, 40);
    ck_assert(strstr(infer_bad("lora", &a, in), "nodes[3].inputs[1]: expected the dtype"));
}
END_TEST

/* qknorm on bf16 [2, 5, 96] with 4 q heads and 2 kv heads of 12: q_gamma and k_gamma [12]
 * (ones); saves its input and rstd f32 [2, 5, 6]; 2*5*6*12 normalised elements, 2*5*2*12
 * v elements. head_dim, when stated, must be 12. */
START_TEST(qknorm_normalises_q_and_k_heads)
{
    ck_ttype in = tt(CK_BF16, 3, 2, 5, 96);
    ck_attrs a = defaults("qknorm");
    a.heads = 4, a.kv_heads = 2;
    ck_op_info info;
    ck_ttype out = infer_ok("qknorm", &a, &in, &info);
    assert_shape(&out, CK_BF16, 3, 2, 5, 96);
    ck_assert_uint_eq(info.n_params, 24);
    assert_param(&info, 0, "q_gamma", CK_INIT_ONES, 12, 0, 0);
    assert_param(&info, 1, "k_gamma", CK_INIT_ONES, 12, 0, 12);
    ck_assert_uint_eq(info.n_saved, 2);
    ck_assert(info.saved[0].kind == CK_SAVE_INPUT && info.saved[0].bytes == 960 * 2);
    ck_assert(info.saved[1].kind == CK_SAVE_INTERNAL && info.saved[1].slot == CK_SLOT_RSTD);
    assert_shape(&info.saved[1].type, CK_F32, 3, 2, 5, 6);
    ck_assert_uint_eq(info.saved[1].bytes, 2 * 5 * 6 * 4);
    ck_assert_uint_eq(info.fwd_flops, 4 * 720);
    ck_assert_uint_eq(info.bwd_flops, 8 * 720 + 240);
    uint64_t x = 960 * 2, params = 24 * 2, stats = 240;
    ck_assert_uint_eq(info.fwd_bytes_moved, 2 * x + params + stats);
    ck_assert_uint_eq(info.bwd_bytes_moved, x + x + stats + 3 * params + x);
    /* Written out (Qwen3RMSNorm on q_proj's and k_proj's outputs): not the input, which holds
     * v too, but the q and k heads as f32 (x.float()), then rstd, and x rstd in bf16 for the
     * weights' gradient. */
    a.fused = false;
    infer_ok("qknorm", &a, &in, &info);
    ck_assert_uint_eq(info.n_saved, 3);
    ck_assert(info.saved[0].kind == CK_SAVE_INTERNAL && info.saved[0].slot == CK_SLOT_X_F32);
    assert_shape(&info.saved[0].type, CK_F32, 3, 2, 5, 72);
    ck_assert(info.saved[1].slot == CK_SLOT_RSTD && info.saved[2].slot == CK_SLOT_NORMED);
    assert_shape(&info.saved[2].type, CK_BF16, 3, 2, 5, 72);
    a.fused = true;
    a.head_dim = 12;
    infer_ok("qknorm", &a, &in, &info);
    a.head_dim = 16;
    ck_assert(strstr(infer_bad("qknorm", &a, &in),
                     "f.json: nodes[3].head_dim: expected the head size of the packed width, 96 / "
                     "(heads + 2*kv_heads = 8) = 12, got 16"));
    a = defaults("qknorm");
    a.heads = 5; /* kv_heads 5: 15 heads do not divide 96 */
    ck_assert(strstr(infer_bad("qknorm", &a, &in),
                     "f.json: nodes[3].inputs[0]: expected a last dimension divisible by heads + "
                     "2*kv_heads = 15 (packed q, k, v), got bf16 [2, 5, 96]"));
    ck_assert_uint_eq(a.kv_heads, 5);
}
END_TEST

/* geglu: gelu 8 + product 1 forward, 14 backward. */
START_TEST(geglu_saves_both_inputs) { assert_gated("geglu", 9, 14); }
END_TEST

/* An element-wise op with one required positive-number attribute (set to 4) on bf16
 * [2, 5, 24]: keeps the type, owns nothing, saves its output or nothing, costs fwd and bwd
 * FLOPs per element and moves its input and output (and the saved output backward). */
static void assert_scalar_op(const char *name, bool saves_output, uint64_t fwd, uint64_t bwd)
{
    const ck_op_def *op = ck_op_find(name);
    ck_assert(op->n_attrs == 1 && op->attrs[0].required);
    ck_assert_int_eq(op->attrs[0].kind, CK_ATTR_POSITIVE);
    ck_ttype in = tt(CK_BF16, 3, 2, 5, 24);
    ck_attrs a = defaults(name);
    *(double *)(void *)((char *)&a + op->attrs[0].offset) = 4;
    ck_op_info info;
    ck_ttype out = infer_ok(name, &a, &in, &info);
    assert_shape(&out, CK_BF16, 3, 2, 5, 24);
    ck_assert(info.n_params == 0 && info.n_saved == (saves_output ? 1 : 0));
    if (saves_output)
        ck_assert(info.saved[0].kind == CK_SAVE_OUTPUT && info.saved[0].bytes == 480);
    ck_assert(info.fwd_flops == fwd * 240 && info.bwd_flops == bwd * 240);
    ck_assert_uint_eq(info.fwd_bytes_moved, 2 * 480);
    ck_assert_uint_eq(info.bwd_bytes_moved, (saves_output ? 3 : 2) * 480);
}

/* softcap saves its output (the derivative 1 - (out/cap)^2 reads only that): a division,
 * tanh and a product forward, 4 FLOPs backward. */
START_TEST(softcap_saves_its_output) { assert_scalar_op("softcap", true, 3, 4); }
END_TEST

/* scale saves nothing and costs one FLOP per element each way. */
START_TEST(scale_saves_nothing) { assert_scalar_op("scale", false, 1, 1); }
END_TEST

/* Whether any of info's saved tensors is in slot, and its bytes (0 when none). */
static uint64_t slot_bytes(const ck_op_info *info, ck_slot slot)
{
    for (size_t i = 0; i < info->n_saved; i++)
        if (info->saved[i].kind == CK_SAVE_INTERNAL && info->saved[i].slot == slot)
            return info->saved[i].bytes;
    return 0;
}

static size_t slot_count(const ck_op_info *info, ck_slot slot)
{
    size_t n = 0;
    for (size_t i = 0; i < info->n_saved; i++)
        n += info->saved[i].kind == CK_SAVE_INTERNAL && info->saved[i].slot == slot;
    return n;
}

/* PEFT's adapters in f32 (upcast) on bf16 x [2,5,24], y [2,5,40], rank 4, 10 rows: beside
 * bf16 weights each projection keeps an f32 copy of x instead of x, and mid is f32;
 * forward, lora_B's output, its scaled copy and the sum, 3 x [10, 40] f32; backward dmid,
 * 2 x [10, 40] and x's gradient before its cast back, f32, which is then no view. Under
 * autocast's f32
 * weights the copies and the rest are bf16, and the forward casts x to f32 first. q, k and
 * v (heads) each keep a copy, and their widest part is q's. Nothing is copied from f32 x,
 * nor where the framework keeps f32 master weights and computes the adapters in bf16. */
START_TEST(lora_upcast_keeps_each_projections_copy_of_x)
{
    ck_ttype in[2] = {tt(CK_BF16, 3, 2, 5, 24), tt(CK_BF16, 3, 2, 5, 40)};
    ck_attrs a = defaults("lora");
    a.rank = 4, a.upcast = true, a.weights = CK_BF16;
    ck_op_info info;
    infer_ok("lora", &a, in, &info);
    ck_assert_uint_eq(slot_count(&info, CK_SLOT_ADAPTER_IN), 1);
    ck_assert_uint_eq(slot_bytes(&info, CK_SLOT_ADAPTER_IN), 10 * 24 * 4);
    for (size_t i = 0; i < info.n_saved; i++) /* the copy stands for x */
        ck_assert(info.saved[i].kind == CK_SAVE_INTERNAL);
    ck_assert_uint_eq(slot_bytes(&info, CK_SLOT_LORA_MID), 10 * 4 * 4);
    ck_assert_uint_eq(info.fwd_ws_bytes, 3 * 10 * 40 * 4);
    ck_assert_uint_eq(info.bwd_ws_bytes, 10 * 4 * 4 + 2 * 10 * 40 * 4 + 10 * 24 * 4);
    ck_assert(!info.grad_view);
    a.weights = CK_F32;
    infer_ok("lora", &a, in, &info);
    ck_assert_uint_eq(slot_bytes(&info, CK_SLOT_ADAPTER_IN), 10 * 24 * 2);
    ck_assert_uint_eq(slot_bytes(&info, CK_SLOT_LORA_MID), 10 * 4 * 2);
    ck_assert_uint_eq(info.fwd_ws_bytes, 3 * 10 * 40 * 2 + 10 * 24 * 4);
    ck_assert_uint_eq(info.bwd_ws_bytes, 10 * 4 * 2 + 2 * 10 * 40 * 2 + 10 * 24 * 2);
    a.weights = CK_BF16, a.master_weights = true; /* DeepSpeed's bf16: adapters cast too */
    infer_ok("lora", &a, in, &info);
    ck_assert_uint_eq(slot_count(&info, CK_SLOT_ADAPTER_IN), 0);
    ck_assert(info.grad_view && info.fwd_ws_bytes == 0);
    a.master_weights = false, a.heads = 2, a.kv_heads = 1; /* 4 heads of 10: q is 20 wide */
    infer_ok("lora", &a, in, &info);
    ck_assert_uint_eq(slot_count(&info, CK_SLOT_ADAPTER_IN), 3);
    ck_assert_uint_eq(info.fwd_ws_bytes, 3 * 10 * 20 * 4);
    in[0].dtype = in[1].dtype = CK_F32;
    a.heads = a.kv_heads = 0;
    infer_ok("lora", &a, in, &info);
    ck_assert_uint_eq(slot_count(&info, CK_SLOT_ADAPTER_IN), 0);
    ck_assert(info.grad_view && info.fwd_ws_bytes == 0);
    a.flat = true;
    infer_ok("lora", &a, in, &info);
    ck_assert(!info.grad_view);
}
END_TEST

/* sdpa handed a sliding window's mask keeps it, [B, 1, T, keys] in the activation dtype,
 * once the keys reach the window (T = 8 here; with context 2 the keys are 16), and only on
 * the flash path with sdpa_mask: eager attention adds the mask and keeps none. */
START_TEST(attention_keeps_sdpa_mask_from_the_window)
{
    ck_ttype in = tt(CK_BF16, 3, 2, 8, (4 + 2 * 2) * 16);
    struct {
        uint64_t window, context;
        bool flash, sdpa_mask;
        uint64_t want;
    } cases[] = {
        {8, 0, true, true, 2 * 8 * 8 * 2},  {7, 0, true, true, 2 * 8 * 8 * 2},
        {9, 0, true, true, 0},              {0, 0, true, true, 0},
        {4, 0, true, false, 0},             {4, 0, false, true, 0},
        {16, 2, true, true, 2 * 8 * 16 * 2}, {17, 2, true, true, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_attrs a = defaults("attention");
        a.heads = 4, a.kv_heads = 2, a.window = cases[i].window, a.context = cases[i].context;
        a.flash = cases[i].flash, a.sdpa_mask = cases[i].sdpa_mask;
        ck_op_info info;
        infer_ok("attention", &a, &in, &info);
        ck_assert_msg(slot_bytes(&info, CK_SLOT_SDPA_MASK) == cases[i].want, "case %zu: %llu",
                      i, (unsigned long long)slot_bytes(&info, CK_SLOT_SDPA_MASK));
    }
}
END_TEST

/* gqa_math (CUDA's sdpa): grouped kv heads in f32 with no mask take the math path, which
 * keeps what eager attention with expand_kv keeps, to the byte; 16 bits, as many kv heads
 * as query heads, a mask (the keys reach the window), or gqa_math off keep the fused path. */
START_TEST(attention_gqa_in_f32_takes_the_math_path)
{
    struct {
        ck_dtype dtype;
        uint64_t kv_heads, window;
        bool gqa_math, math;
    } cases[] = {
        {CK_F32, 2, 0, true, true},   {CK_F32, 2, 16, true, true}, {CK_BF16, 2, 0, true, false},
        {CK_F32, 4, 0, true, false},  {CK_F32, 2, 8, true, false}, {CK_F32, 2, 0, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_ttype in = tt(cases[i].dtype, 3, 2, 8, (4 + 2 * cases[i].kv_heads) * 16);
        ck_attrs sdpa = defaults("attention"), eager;
        sdpa.heads = 4, sdpa.kv_heads = cases[i].kv_heads, sdpa.window = cases[i].window;
        sdpa.expand_kv = sdpa.sdpa_mask = true, sdpa.gqa_math = cases[i].gqa_math;
        eager = sdpa;
        sdpa.flash = true;
        ck_op_info got, want;
        infer_ok("attention", &sdpa, &in, &got);
        infer_ok("attention", &eager, &in, &want);
        ck_assert_msg(sdpa.flash == !cases[i].math, "case %zu", i);
        ck_assert_msg((slot_count(&got, CK_SLOT_LSE) == 0) == cases[i].math, "case %zu", i);
        if (!cases[i].math)
            continue;
        ck_assert_uint_eq(got.n_saved, want.n_saved);
        for (size_t s = 0; s < got.n_saved; s++)
            ck_assert_msg(got.saved[s].bytes == want.saved[s].bytes &&
                          got.saved[s].slot == want.saved[s].slot, "case %zu, saved %zu", i, s);
        ck_assert_uint_eq(slot_bytes(&got, CK_SLOT_QKV_EXPANDED), 2 * 8 * 3 * 4 * 16 * 4);
    }
}
END_TEST

/* eager_grads (transformers' eager attention under autograd), qkv [2, T, (4 + 2*2) * 16],
 * S = 2*4*T*T scores: the backward's peak beyond what it keeps is the probabilities' and
 * the scores' gradients, and on CUDA (not cpu) the softmax kernel's f32 temporary; under an
 * upcast softmax in bf16 both gradients are f32 and the probabilities' bf16 copy is freed
 * (8 - 2 bytes a score), and the forward copies the scores to f32. Less the packed input's
 * gradient, made after that peak; never less than the in-place workspace (one gradient and
 * the copies of k's and v's, 2*T*3*4*16 elements), which the executor's kernels take: at
 * T = 8 that is more. Dropout, or eager_grads off: in place. */
START_TEST(attention_eager_grads_holds_two_score_gradients)
{
    struct {
        uint64_t t;
        ck_dtype dtype;
        bool cpu;
        double p;
        bool eager_grads;
        uint64_t per_score; /* bytes a score at the backward's peak; 0: in place */
        bool widens;        /* the forward's f32 copy of the scores */
    } cases[] = {
        {128, CK_F32, false, 0, true, 12, false}, {128, CK_BF16, false, 0, true, 10, true},
        {128, CK_BF16, true, 0, true, 6, true},   {128, CK_F32, true, 0, true, 8, false},
        {128, CK_F32, false, 0.1, true, 0, false}, {128, CK_F32, false, 0, false, 0, false},
        {8, CK_F32, false, 0, true, 0, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t t = cases[i].t, e = ck_dtype_bytes(cases[i].dtype);
        uint64_t s = 2 * 4 * t * t, packed = 2 * t * 8 * 16, copies = 2 * t * 3 * 4 * 16, out = 2 * t * 4 * 16;
        ck_ttype in = tt(cases[i].dtype, 3, 2, t, (4 + 2 * 2) * 16);
        ck_attrs a = defaults("attention");
        a.heads = 4, a.kv_heads = 2, a.expand_kv = true, a.softmax_dtype = CK_F32;
        a.cpu = cases[i].cpu, a.p = cases[i].p, a.eager_grads = cases[i].eager_grads;
        ck_op_info info;
        infer_ok("attention", &a, &in, &info);
        uint64_t bwd = cases[i].per_score ? cases[i].per_score * s - (packed + out) * e : (s + copies) * e;
        ck_assert_msg(info.fwd_ws_bytes == s * (cases[i].widens ? 4 : e) && info.bwd_ws_bytes == bwd,
                      "case %zu: %llu %llu", i, (unsigned long long)info.fwd_ws_bytes,
                      (unsigned long long)info.bwd_ws_bytes);
    }
}
END_TEST

/* Whether info keeps the node's output for its backward. */
static bool keeps_output(const ck_op_info *info)
{
    for (size_t i = 0; i < info->n_saved; i++)
        if (info->saved[i].kind == CK_SAVE_OUTPUT)
            return true;
    return false;
}

/* Transformers' eager attention (eager_grads) keeps q, k, v and the probabilities, not its
 * output, with dropout or without (the output's gradient is all its backward reads of
 * it); a flash kernel keeps its output for rowsum(dO O), and ckplan's own unfused
 * attention, as its runtime, too. */
START_TEST(eager_attention_keeps_no_output)
{
    for (int flash = 0; flash < 2; flash++)
        for (int eager = 0; eager < 2; eager++)
            for (int dropout = 0; dropout < 2; dropout++) {
                ck_ttype in = tt(CK_F32, 3, 2, 16, 3 * 4 * 8);
                ck_attrs a = defaults("attention");
                a.heads = 4, a.flash = flash, a.eager_grads = eager, a.p = dropout ? 0.1 : 0;
                ck_op_info info;
                infer_ok("attention", &a, &in, &info);
                ck_assert_msg(keeps_output(&info) == (flash || !eager), "flash %d, eager_grads %d, dropout %d",
                              flash, eager, dropout);
            }
}
END_TEST

/* v_view (Phi-3 under sdpa): beside the packed input, which stands for the projection v
 * keeps, the rotated q and k, [B, T, (H + KV) D], and the output again where the kernel
 * lays it out by head (the CPU's, cuDNN's in 16 bits), not from CUDA's f32 kernel; flash
 * only (eager attention's products keep copies of their own, modelled by the input). */
START_TEST(attention_v_view_keeps_q_k_and_the_output_apart)
{
    ck_ttype in = tt(CK_BF16, 3, 2, 8, (4 + 2 * 2) * 16);
    ck_attrs a = defaults("attention");
    a.heads = 4, a.kv_heads = 2, a.flash = true, a.v_view = true;
    ck_op_info info;
    infer_ok("attention", &a, &in, &info);
    ck_assert_uint_eq(slot_bytes(&info, CK_SLOT_QK_APART), 2 * 8 * (4 + 2) * 16 * 2);
    ck_assert_uint_eq(slot_bytes(&info, CK_SLOT_OUT_HEADS), 2 * 8 * 4 * 16 * 2);
    ck_ttype f32 = in;
    f32.dtype = CK_F32;
    a.softmax_dtype = defaults("attention").softmax_dtype; /* the input's, again */
    infer_ok("attention", &a, &f32, &info);
    ck_assert_uint_eq(slot_bytes(&info, CK_SLOT_QK_APART), 2 * 8 * (4 + 2) * 16 * 4);
    ck_assert_uint_eq(slot_count(&info, CK_SLOT_OUT_HEADS), 0);
    a.cpu = true;
    infer_ok("attention", &a, &f32, &info);
    ck_assert_uint_eq(slot_bytes(&info, CK_SLOT_OUT_HEADS), 2 * 8 * 4 * 16 * 4);
    a = defaults("attention");
    a.heads = 4, a.kv_heads = 2, a.v_view = true;
    infer_ok("attention", &a, &in, &info);
    ck_assert_uint_eq(slot_bytes(&info, CK_SLOT_QK_APART) + slot_bytes(&info, CK_SLOT_OUT_HEADS), 0);
}
END_TEST

/* Eager attention on bf16 qkv [2, 8, (4 + 2*2) * 16], S = B*H*T*T = 512 scores, e = 2:
 * the softmax upcast to f32 keeps 4S + eS bytes of probabilities (the f32 softmax output
 * and its bf16 cast for the product with V); softcap keeps its tanh, eS more, and costs
 * 3S FLOPs each way; with dropout the cast is not kept (dropout's mask and output are).
 * Flash keeps lse only, whatever these are. */
START_TEST(attention_softmax_dtype_and_softcap)
{
    enum { S = 2 * 4 * 8 * 8 };
    ck_ttype in = tt(CK_BF16, 3, 2, 8, (4 + 2 * 2) * 16);
    ck_attrs a = defaults("attention");
    a.heads = 4, a.kv_heads = 2;
    ck_op_info info;
    infer_ok("attention", &a, &in, &info);
    ck_assert_int_eq(a.softmax_dtype, CK_BF16); /* the input's, by default */
    ck_assert_uint_eq(info.n_saved, 3);
    uint64_t base_fwd = info.fwd_flops, base_bwd = info.bwd_flops;

    a = defaults("attention");
    a.heads = 4, a.kv_heads = 2, a.softmax_dtype = CK_F32;
    infer_ok("attention", &a, &in, &info);
    ck_assert_uint_eq(info.n_saved, 4);
    ck_assert(info.saved[2].slot == CK_SLOT_PROBS && info.saved[2].type.dtype == CK_F32);
    ck_assert(info.saved[3].slot == CK_SLOT_PROBS_CAST && info.saved[3].type.dtype == CK_BF16);
    ck_assert_uint_eq(info.saved[2].bytes + info.saved[3].bytes, 4 * S + 2 * S);
    ck_assert(info.fwd_flops == base_fwd && info.bwd_flops == base_bwd);

    a.cap = 50;
    infer_ok("attention", &a, &in, &info);
    ck_assert_uint_eq(info.n_saved, 5);
    ck_assert(info.saved[2].slot == CK_SLOT_CAPPED && info.saved[2].type.dtype == CK_BF16);
    assert_shape(&info.saved[2].type, CK_BF16, 4, 2, 4, 8);
    ck_assert_uint_eq(info.saved[2].bytes, 2 * S);
    ck_assert(info.saved[3].slot == CK_SLOT_PROBS && info.saved[4].slot == CK_SLOT_PROBS_CAST);
    ck_assert_uint_eq(info.fwd_flops, base_fwd + 3 * S);
    ck_assert_uint_eq(info.bwd_flops, base_bwd + 3 * S);
    uint64_t internal = 2 * S + 4 * S + 2 * S, qkv = 2 * 8 * 128 * 2, o = 2 * 8 * 64 * 2;
    ck_assert_uint_eq(info.fwd_bytes_moved, qkv + o + internal + 2 * (2 * S));

    a.p = 0.1;
    infer_ok("attention", &a, &in, &info);
    ck_assert_uint_eq(info.n_saved, 6); /* qkv, out, capped, probs f32, mask, dropped */
    ck_assert(info.saved[4].slot == CK_SLOT_MASK && info.saved[5].slot == CK_SLOT_DROPPED);
    ck_assert_uint_eq(info.saved[5].bytes, 2 * S);

    a.flash = true;
    infer_ok("attention", &a, &in, &info);
    ck_assert_uint_eq(info.n_saved, 3);
    ck_assert_int_eq(info.saved[2].slot, CK_SLOT_LSE);

    ck_ttype f32 = in; /* f32 activations: the f32 softmax is the one copy */
    f32.dtype = CK_F32;
    a = defaults("attention");
    a.heads = 4, a.kv_heads = 2, a.softmax_dtype = CK_F32;
    infer_ok("attention", &a, &f32, &info);
    ck_assert_uint_eq(info.n_saved, 3);
    ck_assert_uint_eq(info.saved[2].bytes, 4 * S);

    a.softmax_dtype = CK_F16;
    ck_assert(strstr(infer_bad("attention", &a, &in),
                     "f.json: nodes[3].softmax_dtype: expected \"f32\" or the input's dtype, "
                     "\"bf16\", got \"f16\""));
    a.softmax_dtype = CK_BF16;
    a.head_dim = 16;
    infer_ok("attention", &a, &in, &info);
    a.head_dim = 32; /* 4 heads of 32 would need a width of 256 */
    ck_assert(strstr(infer_bad("attention", &a, &in),
                     "f.json: nodes[3].head_dim: expected the head size of the packed width, 128 / "
                     "(heads + 2*kv_heads = 8) = 16, got 32"));
}
END_TEST

/* cast changes only the dtype; it moves its input's bytes in and its output's out, the
 * other way round backward, and costs one FLOP per element each way. */
START_TEST(cast_changes_the_dtype)
{
    ck_attrs a = defaults("cast");
    a.to = CK_F32;
    ck_ttype in = tt(CK_BF16, 3, 2, 5, 24);
    ck_op_info info;
    ck_ttype out = infer_ok("cast", &a, &in, &info);
    assert_shape(&out, CK_F32, 3, 2, 5, 24);
    ck_assert(info.n_saved == 0 && info.n_params == 0 && info.n_param_tensors == 0);
    ck_assert(info.fwd_flops == 240 && info.bwd_flops == 240);
    ck_assert_uint_eq(info.fwd_bytes_moved, 240 * 2 + 240 * 4);
    ck_assert_uint_eq(info.bwd_bytes_moved, 240 * 4 + 240 * 2);
    a.to = CK_F16;
    ck_ttype f32_in = tt(CK_F32, 2, 4, 8, 0);
    out = infer_ok("cast", &a, &f32_in, &info);
    assert_shape(&out, CK_F16, 2, 4, 8, 0);
    ck_ttype ids = tt(CK_I32, 2, 4, 8, 0);
    ck_assert(strstr(infer_bad("cast", &a, &ids),
                     "f.json: nodes[3].inputs[0]: expected a float tensor (f32, bf16 or f16) of "
                     "rank >= 1, got int32 [4, 8]"));
    ck_assert(ck_op_find("cast")->attrs[0].required);
}
END_TEST

START_TEST(losses_make_scalars)
{
    ck_ttype in[2] = {tt(CK_BF16, 3, 2, 8, 50), tt(CK_I32, 2, 2, 8, 0)};
    ck_attrs a = defaults("cross_entropy");
    ck_op_info info;
    ck_ttype out = infer_ok("cross_entropy", &a, in, &info);
    ck_assert(ck_op_find("cross_entropy")->is_loss);
    assert_shape(&out, CK_F32, 0, 0, 0, 0);
    /* PyTorch's log_softmax then nll_loss: the targets and the bf16 log-probabilities,
     * whose gradient nll_loss's backward makes in the workspace. */
    ck_assert_uint_eq(info.n_saved, 2);
    ck_assert(info.saved[0].kind == CK_SAVE_INPUT && info.saved[0].input == 1);
    ck_assert_int_eq(info.saved[1].slot, CK_SLOT_LOGP);
    ck_assert_uint_eq(info.saved[1].bytes, 16 * 50 * 2);
    ck_assert_uint_eq(info.bwd_ws_bytes, 16 * 50 * 2);
    ck_assert(info.id_limit[0] == 0 && info.id_limit[1] == 50); /* targets: below the classes */
    /* Hugging Face's upcast: the f32 log-probabilities of logits.float() (the forward's
     * workspace); backward, log_softmax's peak of two f32 gradients beside them, the bf16
     * gradient of the logits (made by the program before the run) counted in it. */
    ck_attrs upcast = a;
    upcast.upcast = true;
    infer_ok("cross_entropy", &upcast, in, &info);
    ck_assert_uint_eq(info.saved[1].bytes, 16 * 50 * 4);
    ck_assert_uint_eq(info.fwd_ws_bytes, 16 * 50 * 4);
    ck_assert_uint_eq(info.bwd_ws_bytes + 16 * 50 * 2, 2 * 16 * 50 * 4);
    ck_attrs fused = a;
    fused.fused = true; /* one kernel: the logits and the f32 log-sum-exp, no workspace */
    infer_ok("cross_entropy", &fused, in, &info);
    ck_assert_uint_eq(info.n_saved, 3);
    ck_assert_int_eq(info.saved[2].slot, CK_SLOT_LSE);
    ck_assert_uint_eq(info.saved[2].bytes, 16 * 4);
    ck_assert_uint_eq(info.bwd_ws_bytes, 0);
    ck_assert_uint_eq(info.fwd_flops, 4 * 800);
    in[1] = tt(CK_I32, 2, 2, 9, 0);
    ck_assert(strstr(infer_bad("cross_entropy", &a, in),
                     "f.json: nodes[3].inputs[1]: expected int32 targets shaped like inputs[0] "
                     "without its last (class) dimension, got int32 [2, 9]"));
    ck_ttype same[2] = {tt(CK_F32, 1, 6, 0, 0), tt(CK_F32, 1, 6, 0, 0)};
    out = infer_ok("mse", &a, same, &info);
    assert_shape(&out, CK_F32, 0, 0, 0, 0);
    ck_assert_uint_eq(info.n_saved, 2);
}
END_TEST

START_TEST(overflowing_costs_are_input_errors)
{
    ck_attrs a = defaults("attention");
    a.heads = 1;
    ck_ttype in = tt(CK_F32, 3, 1, 1ULL << 33, 3);
    ck_ttype out;
    ck_op_info info;
    ck_err err = {{0}};
    const ck_op_def *op = ck_op_find("attention");
    ck_assert_int_eq(ck_op_infer(op, &a, CK_F32, &in, &out, "f.json", "nodes[1]", &err), CK_OK);
    ck_assert_int_eq(ck_op_describe(op, &a, &in, &out, &info, "f.json", "nodes[1]", &err), CK_ERR_INPUT);
    ck_assert(strstr(err.msg, "f.json: nodes[1]: the sizes or FLOP counts of this attention overflow 64 bits"));
}
END_TEST

/* Sequence parallelism (Korthikanti et al. 2022, 4.2.2): a gathering linear saves its
 * input shard and holds the gathered input as workspace, forward once and backward twice
 * (the input again, and its whole gradient before the reduce-scatter); a scattering one
 * holds its whole output forward and its gathered gradient backward; both count the
 * products of the whole sequence. A scatter that does not divide the sequence is refused. */
START_TEST(sequence_parallel_linears)
{
    const uint64_t b = 2, t = 8, c = 16, out_f = 32, g = 4;
    ck_attrs a = defaults("linear");
    a.out = out_f;
    a.bias = false;
    a.gather = g;
    ck_op_info info = {0};
    ck_ttype in = tt(CK_BF16, 3, b, t / g, c), out = infer_ok("linear", &a, &in, &info);
    ck_assert_uint_eq(out.dim[1], t);
    ck_assert_uint_eq(info.saved[0].bytes, 2 * b * (t / g) * c);
    ck_assert_uint_eq(info.fwd_ws_bytes, 2 * b * t * c);
    ck_assert_uint_eq(info.bwd_ws_bytes, 2 * 2 * b * t * c);
    ck_assert_uint_eq(info.fwd_flops, 2 * b * t * c * out_f);
    a = defaults("linear");
    a.out = c;
    a.bias = false;
    a.scatter = g;
    ck_op_info row = {0};
    ck_ttype wide = tt(CK_BF16, 3, b, t, out_f);
    out = infer_ok("linear", &a, &wide, &row);
    ck_assert_uint_eq(out.dim[1], t / g);
    ck_assert_uint_eq(row.fwd_ws_bytes, 2 * b * t * c);
    ck_assert_uint_eq(row.bwd_ws_bytes, 2 * b * t * c);
    ck_assert_uint_eq(row.fwd_flops, 2 * b * t * c * out_f);
    a.scatter = 3;
    const char *why = infer_bad("linear", &a, &wide);
    ck_assert_msg(strstr(why, "f.json: nodes[3].scatter: expected a divisor of the sequence, 8, got 3"), "%s", why);
}
END_TEST

/* Context parallelism: queries of this rank's part of the sequence against keys of all c
 * parts; eager keeps [B, H, T, c*T] scores and gathers every part's k and v (forward, and
 * backward with their gradients), flash passes two parts round the ring. */
START_TEST(context_parallel_attention)
{
    const uint64_t b = 1, t = 8, h = 4, d = 8, cp = 4, kv = 2 * b * t * h * d * 2; /* k, v bf16 */
    for (int flash = 0; flash <= 1; flash++) {
        ck_attrs a = defaults("attention");
        a.heads = h;
        a.flash = flash;
        a.context = cp;
        ck_op_info info = {0}, alone = {0};
        ck_ttype in = tt(CK_BF16, 3, b, t, 3 * h * d);
        infer_ok("attention", &a, &in, &info);
        a.context = 0;
        infer_ok("attention", &a, &in, &alone);
        if (!flash) /* probs bf16: the scores, cp times wider */
            ck_assert_uint_eq(info.saved[2].bytes, 2 * b * h * t * t * cp);
        ck_assert_uint_eq(info.fwd_ws_bytes - (flash ? alone.fwd_ws_bytes : 2 * b * h * t * t * cp),
                          kv * (flash ? 2 : cp));
        ck_assert_uint_eq(info.fwd_flops > alone.fwd_flops, true);
    }
}
END_TEST

static Suite *ops_suite(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("ops");
    tcase_add_test(tc, dtypes);
    tcase_add_test(tc, names_list_every_op);
    tcase_add_test(tc, embedding);
    tcase_add_test(tc, linear);
    tcase_add_test(tc, norms_save_input_and_f32_statistics);
    tcase_add_test(tc, elementwise);
    tcase_add_test(tc, attention_grouped_query);
    tcase_add_test(tc, rope_rotates_q_and_k);
    tcase_add_test(tc, lora_adds_an_adapter);
    tcase_add_test(tc, lora_upcast_keeps_each_projections_copy_of_x);
    tcase_add_test(tc, qknorm_normalises_q_and_k_heads);
    tcase_add_test(tc, geglu_saves_both_inputs);
    tcase_add_test(tc, softcap_saves_its_output);
    tcase_add_test(tc, scale_saves_nothing);
    tcase_add_test(tc, attention_softmax_dtype_and_softcap);
    tcase_add_test(tc, attention_keeps_sdpa_mask_from_the_window);
    tcase_add_test(tc, attention_gqa_in_f32_takes_the_math_path);
    tcase_add_test(tc, attention_eager_grads_holds_two_score_gradients);
    tcase_add_test(tc, eager_attention_keeps_no_output);
    tcase_add_test(tc, attention_v_view_keeps_q_k_and_the_output_apart);
    tcase_add_test(tc, swiglu_saves_both_inputs);
    tcase_add_test(tc, cast_changes_the_dtype);
    tcase_add_test(tc, losses_make_scalars);
    tcase_add_test(tc, overflowing_costs_are_input_errors);
    tcase_add_test(tc, sequence_parallel_linears);
    tcase_add_test(tc, context_parallel_attention);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(ops_suite)
