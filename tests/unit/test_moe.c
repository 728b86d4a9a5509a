/* moe, Mixtral's sparse mixture-of-experts block: the op table's sizes against a hand count
 * of what transformers' MixtralSparseMoeBlock keeps under autograd, with its eager loop and
 * with its grouped_mm experts, and the kernels against a double-precision reference and
 * finite differences, run in buffers of exactly the sizes the op table declares. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/op.h"
#include "sim/kernel.h"
#include "tests/unit/check_main.h"

/* ---- the op table ---- */

static const char *describe(ck_attrs *a, const ck_ttype *x, ck_op_info *info, ck_err *err)
{
    const ck_op_def *op = ck_op_find("moe");
    ck_ttype out;
    int rc = ck_op_infer(op, a, CK_F32, x, &out, "m.json", "nodes[4]", err);
    if (rc == CK_OK)
        rc = ck_op_describe(op, a, x, &out, info, "m.json", "nodes[4]", err);
    return rc == CK_OK ? NULL : err->msg;
}

static ck_attrs moe_attrs(uint64_t E, uint64_t K, uint64_t F)
{
    ck_attrs a;
    ck_op_default_attrs(ck_op_find("moe"), &a);
    a.experts = E, a.top_k = K, a.hidden = F;
    return a;
}

static void assert_param3(const ck_param *p, const char *name, size_t rank, uint64_t d0,
                          uint64_t d1, uint64_t d2, uint64_t offset)
{
    ck_assert_str_eq(p->name, name);
    ck_assert_int_eq(p->init, CK_INIT_NORMAL);
    ck_assert_uint_eq(p->rank, rank);
    ck_assert(p->dim[0] == d0 && p->dim[1] == d1 && (rank < 3 || p->dim[2] == d2));
    ck_assert_uint_eq(p->numel, rank == 3 ? d0 * d1 * d2 : d0 * d1);
    ck_assert_uint_eq(p->offset, offset);
}

/* bf16 x [B=2, T=3, C=8], E=4 experts, K=2, F=6: N=6 rows, R=12 routed rows. Counted by
 * hand from HF's forward (docs/model-format.md, section 3):
 *   per row:        x (the router's input) 2*8, probs f32 4*4, top-k indices int64 8*2,
 *                   their probabilities (div_'s clone) f32 4*2, their sum f32 4
 *   per routed row: (row, position) int64 2*8, its weight 2*1, gathered x 2*8,
 *                   w1 x, silu, w3 x, product 4 * 2*6, w2 output 2*8. */
START_TEST(sizes_by_hand)
{
    ck_attrs a = moe_attrs(4, 2, 6);
    ck_ttype x = {.dtype = CK_BF16, .rank = 3, .dim = {2, 3, 8}};
    ck_op_info info;
    ck_err err = {{0}};
    const char *msg = describe(&a, &x, &info, &err);
    ck_assert_msg(!msg, "%s", msg);
    ck_assert_uint_eq(info.n_params, 4 * 8 + 3 * 4 * 6 * 8);
    ck_assert_uint_eq(info.n_param_tensors, 4);
    assert_param3(&info.params[0], "router", 2, 4, 8, 0, 0);
    assert_param3(&info.params[1], "w1", 3, 4, 6, 8, 32);
    assert_param3(&info.params[2], "w3", 3, 4, 6, 8, 32 + 192);
    assert_param3(&info.params[3], "w2", 3, 4, 8, 6, 32 + 2 * 192);
    const struct {
        ck_save_kind kind;
        ck_slot slot;
        ck_dtype dtype;
        uint64_t bytes;
    } want[] = {
        {CK_SAVE_INPUT, 0, CK_BF16, 6 * 2 * 8},
        {CK_SAVE_INTERNAL, CK_SLOT_ROUTER_PROBS, CK_F32, 6 * 4 * 4},
        {CK_SAVE_INTERNAL, CK_SLOT_TOPK_INDEX, CK_I64, 6 * 8 * 2},
        {CK_SAVE_INTERNAL, CK_SLOT_TOPK_PROBS, CK_F32, 6 * 4 * 2},
        {CK_SAVE_INTERNAL, CK_SLOT_TOPK_SUM, CK_F32, 6 * 4},
        {CK_SAVE_INTERNAL, CK_SLOT_ROUTE_INDEX, CK_I64, 12 * 8 * 2},
        {CK_SAVE_INTERNAL, CK_SLOT_ROUTE_WEIGHT, CK_BF16, 12 * 2},
        {CK_SAVE_INTERNAL, CK_SLOT_EXPERT_IN, CK_BF16, 12 * 2 * 8},
        {CK_SAVE_INTERNAL, CK_SLOT_EXPERT_GATE, CK_BF16, 12 * 2 * 6},
        {CK_SAVE_INTERNAL, CK_SLOT_EXPERT_ACT, CK_BF16, 12 * 2 * 6},
        {CK_SAVE_INTERNAL, CK_SLOT_EXPERT_UP, CK_BF16, 12 * 2 * 6},
        {CK_SAVE_INTERNAL, CK_SLOT_EXPERT_HIDDEN, CK_BF16, 12 * 2 * 6},
        {CK_SAVE_INTERNAL, CK_SLOT_EXPERT_OUT, CK_BF16, 12 * 2 * 8},
        {CK_SAVE_INTERNAL, CK_SLOT_EXPERT_WEIGHTED, CK_BF16, 12 * 2 * 8},
    };
    size_t n_want = sizeof want / sizeof want[0];
    ck_assert_uint_eq(info.n_saved, n_want);
    uint64_t total = 0;
    for (size_t i = 0; i < n_want; i++) {
        const ck_saved *s = &info.saved[i];
        ck_assert_int_eq(s->kind, want[i].kind);
        if (s->kind == CK_SAVE_INTERNAL)
            ck_assert_int_eq(s->slot, want[i].slot);
        ck_assert_int_eq(s->type.dtype, want[i].dtype);
        ck_assert_uint_eq(s->bytes, want[i].bytes);
        total += s->bytes;
    }
    /* The same as one formula: e N C + N (4E + 12K + 4) + R (e (3C + 4F + 1) + 16). */
    ck_assert_uint_eq(total, 2 * 6 * 8 + 6 * (16 + 24 + 4) + 12 * (2 * (24 + 24 + 1) + 16));
    /* FLOPs: 2NCE + 5NE + 2R + 6RCF + 5RF + 2RC forward, 4NCE + NE + 4R + 12RCF + 10RF +
     * 4RC backward. */
    ck_assert_uint_eq(info.fwd_flops, 2 * 6 * 8 * 4 + 5 * 24 + 2 * 12 + 6 * 12 * 8 * 6 +
                                          5 * 12 * 6 + 2 * 12 * 8);
    ck_assert_uint_eq(info.bwd_flops, 4 * 6 * 8 * 4 + 24 + 4 * 12 + 12 * 12 * 8 * 6 +
                                          10 * 12 * 6 + 4 * 12 * 8);
    /* Workspace: the int64 mask [E, K, N], logits [N, E], weights [N, K] forward (the
     * weighted outputs are saved: index_add_ keeps them); [N, C] + 2 [N, F] in bf16 and
     * f32 [N, K], [N, E] backward. */
    ck_assert_uint_eq(info.fwd_ws_bytes, 8 * 4 * 2 * 6 + 2 * (24 + 12));
    ck_assert_uint_eq(info.bwd_ws_bytes, 2 * (48 + 2 * 36) + 4 * (12 + 24));
    /* Bytes moved, the one rule: x, params, out and the internal tensors forward. */
    uint64_t xb = 6 * 8 * 2, pb = info.n_params * 2, internal = total - xb;
    ck_assert_uint_eq(info.fwd_bytes_moved, xb + pb + xb + internal + 2 * info.fwd_ws_bytes);
    ck_assert_uint_eq(info.bwd_bytes_moved, xb + 3 * pb + xb + total + 2 * info.bwd_ws_bytes);
}
END_TEST

/* Grouped (transformers 5's grouped_mm experts), measured with tests/torch's allocation
 * tracker on MixtralSparseMoeBlock: no weighted outputs (the gather back to token order
 * keeps only its indices), a third int64 index per routed row (the inverse permutation),
 * the int32 offsets of the experts, the routing weights in f32; the forward's workspace the
 * weighted rows and their gather in f32 beyond the output, and the Python locals then. */
START_TEST(grouped_sizes_by_hand)
{
    ck_attrs a = moe_attrs(4, 2, 6);
    a.grouped = true;
    ck_ttype x = {.dtype = CK_BF16, .rank = 3, .dim = {2, 3, 8}};
    ck_op_info info;
    ck_err err = {{0}};
    const char *msg = describe(&a, &x, &info, &err);
    ck_assert_msg(!msg, "%s", msg);
    const struct {
        ck_slot slot;
        ck_dtype dtype;
        uint64_t bytes;
    } want[] = {
        {CK_SLOT_ROUTER_PROBS, CK_F32, 6 * 4 * 4},   {CK_SLOT_TOPK_INDEX, CK_I64, 6 * 8 * 2},
        {CK_SLOT_TOPK_PROBS, CK_F32, 6 * 4 * 2},     {CK_SLOT_TOPK_SUM, CK_F32, 6 * 4},
        {CK_SLOT_ROUTE_INDEX, CK_I64, 12 * 8 * 2},   {CK_SLOT_ROUTE_ORDER, CK_I64, 12 * 8},
        {CK_SLOT_EXPERT_OFFSETS, CK_I32, 4 * 4},     {CK_SLOT_ROUTE_WEIGHT, CK_F32, 12 * 4},
        {CK_SLOT_EXPERT_IN, CK_BF16, 12 * 2 * 8},    {CK_SLOT_EXPERT_GATE, CK_BF16, 12 * 2 * 6},
        {CK_SLOT_EXPERT_ACT, CK_BF16, 12 * 2 * 6},   {CK_SLOT_EXPERT_UP, CK_BF16, 12 * 2 * 6},
        {CK_SLOT_EXPERT_HIDDEN, CK_BF16, 12 * 2 * 6}, {CK_SLOT_EXPERT_OUT, CK_BF16, 12 * 2 * 8},
    };
    size_t n_want = sizeof want / sizeof want[0];
    ck_assert_uint_eq(info.n_saved, n_want + 1);
    ck_assert_int_eq(info.saved[0].kind, CK_SAVE_INPUT);
    for (size_t i = 0; i < n_want; i++) {
        const ck_saved *s = &info.saved[i + 1];
        ck_assert_int_eq(s->kind, CK_SAVE_INTERNAL);
        ck_assert_int_eq(s->slot, want[i].slot);
        ck_assert_int_eq(s->type.dtype, want[i].dtype);
        ck_assert_uint_eq(s->bytes, want[i].bytes);
    }
    /* At the gather back: weighted and gathered f32 [R, C], less the bf16 output [N, C],
     * with the logits [N, E] bf16, the weights f32 [N, K], the sorted ids int64 [R], their
     * f32 copy [R] and the f32 counts [E]; above the kernel's 8 E K N + 2 (N E + N K). */
    uint64_t ws = 2 * 12 * 8 * 4 - 6 * 8 * 2 + 6 * 4 * 2 + 6 * 2 * 4 + 12 * 8 + 12 * 4 + 4 * 4;
    ck_assert_uint_gt(ws, 8 * 4 * 2 * 6 + 2 * (24 + 12));
    ck_assert_uint_eq(info.fwd_ws_bytes, ws);
    /* The backward's phases, as the allocation tracker saw autograd run them (ck_moe_phase):
     * the gather back's zeros beside the view's f32 copy [R, C]; the weighting's f32
     * product and its gradient before the cast to bf16; the renormalisation's four f32
     * [N, K] temporaries less the logits' gradient [N, E]; the router's gradient of x and of
     * its bf16 logits. */
    ck_assert_uint_eq(info.n_phases, CK_MOE_N_PHASES);
    ck_assert_uint_eq(info.phases[CK_MOE_UNSORT].ws_bytes, 12 * 8 * 4);
    ck_assert_uint_eq(info.phases[CK_MOE_WEIGHTING].ws_bytes, 2 * 12 * 8 * 4 - 12 * 8 * 2);
    ck_assert_uint_eq(info.phases[CK_MOE_ROUTING].ws_bytes, 4 * 12 * 4 - 6 * 4 * 4);
    ck_assert_uint_eq(info.phases[CK_MOE_ROUTER].ws_bytes, 6 * 8 * 2 + 6 * 4 * 2);
    ck_assert_uint_eq(info.temps[CK_MOE_D_SORTED].bytes, 12 * 8 * 4);
    ck_assert_uint_eq(info.temps[CK_MOE_D_GATE_UP].bytes, 12 * 12 * 2);
    ck_assert_uint_eq(info.temps[CK_MOE_D_LOGITS].bytes, 6 * 4 * 4);
    /* The bound planners sum is the weighting's: its workspace beside the sorted rows'
     * gradient, expert_out's and the weights'. */
    ck_assert_uint_eq(info.bwd_ws_bytes, 12 * 8 * 4 + (2 * 12 * 8 * 4 - 12 * 8 * 2) + 12 * 8 * 2 + 12 * 4);
    /* The same parameters either way. */
    ck_assert_uint_eq(info.n_params, 4 * 8 + 3 * 4 * 6 * 8);
}
END_TEST

/* The phases of any grouped backward (the class, not the instance): each internal saved
 * tensor released once, each temp made once and freed by a later phase, each parameter's
 * gradient and the input's made once; the eager loop's backward is one call. */
START_TEST(phases_account_for_everything)
{
    for (uint64_t E = 1; E <= 8; E *= 2)
        for (uint64_t K = 1; K <= E; K++) {
            ck_attrs a = moe_attrs(E, K, 3 * K + 1);
            ck_ttype x = {.dtype = K % 2 ? CK_F32 : CK_BF16, .rank = 2, .dim = {5, 4}};
            ck_op_info info;
            ck_err err = {{0}};
            const char *msg = describe(&a, &x, &info, &err);
            ck_assert_msg(!msg, "%s", msg);
            ck_assert_uint_eq(info.n_phases, 0);
            a.grouped = true;
            msg = describe(&a, &x, &info, &err);
            ck_assert_msg(!msg, "%s", msg);
            ck_assert_uint_eq(info.n_phases, CK_MOE_N_PHASES);
            uint64_t released = 0, internal = 0;
            unsigned params = 0, made = 0, freed = 0, inputs = 0;
            for (size_t s = 0; s < info.n_saved; s++)
                if (info.saved[s].kind == CK_SAVE_INTERNAL)
                    internal |= (uint64_t)1 << info.saved[s].slot;
            for (size_t p = 0; p < info.n_phases; p++) {
                const ck_phase *ph = &info.phases[p];
                ck_assert_msg(!(released & ph->releases) && !(params & ph->params) && !(made & ph->makes),
                              "phase %zu releases or makes again", p);
                ck_assert_msg((ph->frees & made) == ph->frees && !(ph->frees & freed),
                              "phase %zu frees what is not live", p);
                released |= ph->releases, params |= ph->params, made |= ph->makes;
                freed |= ph->frees, inputs += ph->input_grads;
            }
            ck_assert_uint_eq(released, internal);
            ck_assert_uint_eq(params, (1u << info.n_param_tensors) - 1);
            ck_assert_uint_eq(made, (1u << CK_MOE_N_TEMPS) - 1);
            ck_assert_uint_eq(freed, made);
            ck_assert_uint_eq(inputs, 1);
        }
}
END_TEST

/* Every attribute but grouped is required; top_k above experts, a non-float input and sizes past 64 bits
 * are refused, naming the file, the path and both numbers. */
START_TEST(bad_attributes)
{
    const ck_op_def *op = ck_op_find("moe");
    ck_assert_ptr_nonnull(op);
    ck_assert_uint_eq(op->n_attrs, 4);
    for (size_t i = 0; i < 3; i++)
        ck_assert(op->attrs[i].required && op->attrs[i].kind == CK_ATTR_DIM);
    ck_assert(!op->attrs[3].required && op->attrs[3].kind == CK_ATTR_BOOL);
    ck_assert_str_eq(op->attrs[3].name, "grouped");
    ck_ttype x = {.dtype = CK_F32, .rank = 2, .dim = {6, 8}};
    ck_op_info info;
    ck_err err = {{0}};
    ck_attrs a = moe_attrs(4, 5, 6);
    const char *msg = describe(&a, &x, &info, &err);
    ck_assert_ptr_nonnull(msg);
    ck_assert_str_eq(msg, "m.json: nodes[4].top_k: expected at most experts (4), got 5");
    a = moe_attrs(4, 4, 6); /* every expert for every row is allowed */
    ck_assert_ptr_null(describe(&a, &x, &info, &err));
    ck_ttype ids = {.dtype = CK_I32, .rank = 2, .dim = {6, 8}};
    msg = describe(&a, &ids, &info, &err);
    ck_assert(msg && strstr(msg, "m.json: nodes[4].inputs[0]: expected a float tensor"));
    a = moe_attrs(1ULL << 40, 1, 1ULL << 30);
    msg = describe(&a, &x, &info, &err);
    ck_assert(msg && strstr(msg, "overflow 64 bits"));
}
END_TEST

/* ---- the kernels ---- */

enum { N = 6, C = 5, E = 4, K = 2, F = 7 };

typedef struct {
    ck_op_info info;
    void *slot[CK_N_SLOTS];
    ck_kernel_moe_saved s;
    void *fws, *bws;
} moe_buffers;

/* Saved tensors and workspaces, each allocated at the size the op table gives it (grouped:
 * no weighted outputs). */
static void buffers_alloc(moe_buffers *b, bool grouped)
{
    ck_attrs a = moe_attrs(E, K, F);
    a.grouped = grouped;
    ck_ttype x = {.dtype = CK_F32, .rank = 2, .dim = {N, C}};
    ck_err err = {{0}};
    const char *msg = describe(&a, &x, &b->info, &err);
    ck_assert_msg(!msg, "%s", msg);
    memset(b->slot, 0, sizeof b->slot);
    for (size_t i = 0; i < b->info.n_saved; i++)
        if (b->info.saved[i].kind == CK_SAVE_INTERNAL)
            b->slot[b->info.saved[i].slot] = calloc(1, (size_t)b->info.saved[i].bytes);
    b->s = ck_kernel_moe_slots(b->slot);
    b->fws = malloc((size_t)b->info.fwd_ws_bytes);
    b->bws = malloc((size_t)b->info.bwd_ws_bytes);
}

static void buffers_free(moe_buffers *b)
{
    for (size_t i = 0; i < CK_N_SLOTS; i++)
        free(b->slot[i]);
    free(b->fws);
    free(b->bws);
}

/* All values of the test: x, router, w1, w3, w2 one after another. */
enum {
    X_AT = 0, ROUTER_AT = X_AT + N * C, W1_AT = ROUTER_AT + E * C, W3_AT = W1_AT + E * F * C,
    W2_AT = W3_AT + E * F * C, N_VALUES = W2_AT + E * C * F
};

static uint64_t rng_state;

static double uniform(void) /* in [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) / 4503599627370496.0 - 1.0;
}

/* The K experts of row n by decreasing p, ties to the lower index; the margin between the
 * K-th and the next probability. */
static double ref_topk(const double *p, size_t *idx)
{
    bool taken[E] = {false};
    for (size_t j = 0; j < K; j++) {
        size_t best = E;
        for (size_t e = 0; e < E; e++)
            if (!taken[e] && (best == E || p[e] > p[best]))
                best = e;
        idx[j] = best;
        taken[best] = true;
    }
    double next = -1.0;
    for (size_t e = 0; e < E; e++)
        if (!taken[e] && p[e] > next)
            next = p[e];
    return p[idx[K - 1]] - next;
}

/* out = the block in double; returns the smallest top-k margin over the rows. */
static double ref_moe(const double *v, double *out)
{
    const double *x = v + X_AT, *router = v + ROUTER_AT;
    double margin = 1.0;
    for (size_t n = 0; n < N; n++) {
        double p[E], mx = -INFINITY, sum = 0.0;
        for (size_t e = 0; e < E; e++) {
            p[e] = 0.0;
            for (size_t c = 0; c < C; c++)
                p[e] += x[n * C + c] * router[e * C + c];
            mx = fmax(mx, p[e]);
        }
        for (size_t e = 0; e < E; e++)
            sum += p[e] = exp(p[e] - mx);
        for (size_t e = 0; e < E; e++)
            p[e] /= sum;
        size_t idx[K];
        margin = fmin(margin, ref_topk(p, idx));
        double total = 0.0;
        for (size_t j = 0; j < K; j++)
            total += p[idx[j]];
        for (size_t c = 0; c < C; c++)
            out[n * C + c] = 0.0;
        for (size_t j = 0; j < K; j++) {
            size_t e = idx[j];
            double h[F];
            for (size_t f = 0; f < F; f++) {
                double g = 0.0, u = 0.0;
                for (size_t c = 0; c < C; c++) {
                    g += v[W1_AT + (e * F + f) * C + c] * x[n * C + c];
                    u += v[W3_AT + (e * F + f) * C + c] * x[n * C + c];
                }
                h[f] = g / (1.0 + exp(-g)) * u;
            }
            for (size_t c = 0; c < C; c++) {
                double y = 0.0;
                for (size_t f = 0; f < F; f++)
                    y += v[W2_AT + (e * C + c) * F + f] * h[f];
                out[n * C + c] += p[e] / total * y;
            }
        }
    }
    return margin;
}

/* Values whose routing has a top-k margin of at least 0.05, so that a finite difference
 * step never changes which experts a row picks. */
static void make_values(double *v, float *vf, uint64_t seed)
{
    double out[N * C];
    for (rng_state = seed;;) {
        for (size_t i = 0; i < N_VALUES; i++)
            v[i] = uniform() * (i >= ROUTER_AT && i < W1_AT ? 2.0 : 0.7);
        if (ref_moe(v, out) >= 0.05)
            break;
    }
    for (size_t i = 0; i < N_VALUES; i++)
        vf[i] = (float)v[i];
}

static ck_kernel_moe_weights weights_at(float *v)
{
    return (ck_kernel_moe_weights){v + ROUTER_AT, v + W1_AT, v + W3_AT, v + W2_AT};
}

/* Forward against the reference; backward against central differences of sum(dout * out)
 * for every input and weight element; a second backward adds the same again. Eager and
 * grouped: the same kernels, the second without the weighted outputs' slot. */
START_TEST(kernels_against_reference_and_finite_differences)
{
    bool grouped = _i == 1;
    static double v[N_VALUES];
    static float vf[N_VALUES], grad[N_VALUES], grad2[N_VALUES];
    double ref[N * C], dout_d[N * C];
    float out[N * C], dout[N * C];
    make_values(v, vf, 1234);
    for (size_t i = 0; i < N * C; i++)
        dout[i] = (float)(dout_d[i] = uniform());
    moe_buffers b;
    buffers_alloc(&b, grouped);
    ck_assert(grouped == (b.s.weighted == NULL));
    ck_kernel_moe_weights w = weights_at(vf), dw = weights_at(grad);
    ck_kernel_moe_forward(out, &b.s, vf + X_AT, &w, b.fws, N, C, E, K, F);
    ref_moe(v, ref);
    for (size_t i = 0; i < N * C; i++)
        ck_assert_msg(fabs(out[i] - ref[i]) <= 1e-5 + 1e-4 * fabs(ref[i]), "out[%zu] %g vs %g", i,
                      (double)out[i], ref[i]);
    memset(grad, 0, sizeof grad);
    ck_kernel_moe_backward(grad + X_AT, &dw, dout, &b.s, vf + X_AT, &w, b.bws, N, C, E, K, F);
    memcpy(grad2, grad, sizeof grad);
    ck_kernel_moe_backward(grad2 + X_AT, &(ck_kernel_moe_weights){grad2 + ROUTER_AT, grad2 + W1_AT,
                           grad2 + W3_AT, grad2 + W2_AT},
                           dout, &b.s, vf + X_AT, &w, b.bws, N, C, E, K, F);
    const double h = 1e-5;
    for (size_t i = 0; i < N_VALUES; i++) {
        double keep = v[i], up[N * C], down[N * C], fd = 0.0;
        v[i] = keep + h;
        ref_moe(v, up);
        v[i] = keep - h;
        ref_moe(v, down);
        v[i] = keep;
        for (size_t j = 0; j < N * C; j++)
            fd += dout_d[j] * (up[j] - down[j]) / (2 * h);
        ck_assert_msg(fabs(grad[i] - fd) <= 1e-4 + 1e-3 * fabs(fd), "grad[%zu] %g vs fd %g", i,
                      (double)grad[i], fd);
        ck_assert_msg(fabs(grad2[i] - 2 * grad[i]) <= 1e-6 + 1e-5 * fabs(grad[i]),
                      "second backward at %zu: %g, not twice %g", i, (double)grad2[i],
                      (double)grad[i]);
    }
    /* Without an input gradient the weights' gradients are the same. */
    static float grad3[N_VALUES];
    memset(grad3, 0, sizeof grad3);
    ck_kernel_moe_backward(NULL, &(ck_kernel_moe_weights){grad3 + ROUTER_AT, grad3 + W1_AT,
                           grad3 + W3_AT, grad3 + W2_AT},
                           dout, &b.s, vf + X_AT, &w, b.bws, N, C, E, K, F);
    for (size_t i = ROUTER_AT; i < N_VALUES; i++)
        ck_assert_msg(grad3[i] == grad[i], "weight gradient %zu differs without dx", i);
    buffers_free(&b);
}
END_TEST

/* The grouped backward run phase by phase as the program runs it: each temp allocated at
 * its size when its phase makes it and freed when the op table says, each saved tensor
 * freed at its release, and the gradients of the parameters and the input handed over
 * only from the phase that makes them (a phase reading anything earlier or later reads
 * freed memory or NULL, which ASan and the test catch). Its gradients equal the one-call
 * backward's, which the finite differences check. */
static void phased_backward(moe_buffers *b, float *grad, const float *dout, const float *vf,
                            const ck_kernel_moe_weights *w)
{
    const ck_op_info *info = &b->info;
    float *temp[CK_OP_MAX_TEMPS] = {0};
    ck_kernel_moe_weights dw = {0};
    float *dx = NULL;
    for (size_t p = 0; p < info->n_phases; p++) {
        const ck_phase *ph = &info->phases[p];
        for (size_t t = 0; t < info->n_temps; t++)
            if (ph->makes >> t & 1)
                temp[t] = calloc(1, (size_t)info->temps[t].bytes);
        dw.router = ph->params & 1 ? grad + ROUTER_AT : dw.router;
        dw.w1 = ph->params >> 1 & 1 ? grad + W1_AT : dw.w1;
        dw.w3 = ph->params >> 2 & 1 ? grad + W3_AT : dw.w3;
        dw.w2 = ph->params >> 3 & 1 ? grad + W2_AT : dw.w2;
        dx = ph->input_grads ? grad + X_AT : dx;
        ck_kernel_moe_backward_phase(p, dx, &dw, dout, &b->s, vf + X_AT, w, temp, N, C, E, K, F);
        for (size_t t = 0; t < info->n_temps; t++)
            if (ph->frees >> t & 1) {
                free(temp[t]);
                temp[t] = NULL;
            }
        for (size_t s = 0; s < CK_N_SLOTS; s++)
            if (ph->releases >> s & 1) {
                free(b->slot[s]);
                b->slot[s] = NULL;
            }
        b->s = ck_kernel_moe_slots(b->slot);
    }
}

START_TEST(phased_backward_equals_one_call)
{
    static double v[N_VALUES];
    static float vf[N_VALUES], one[N_VALUES], phased[N_VALUES];
    float out[N * C], dout[N * C];
    make_values(v, vf, 77);
    for (size_t i = 0; i < N * C; i++)
        dout[i] = (float)uniform();
    ck_kernel_moe_weights w = weights_at(vf);
    moe_buffers b;
    buffers_alloc(&b, true);
    ck_kernel_moe_forward(out, &b.s, vf + X_AT, &w, b.fws, N, C, E, K, F);
    ck_kernel_moe_weights dw = weights_at(one);
    ck_kernel_moe_backward(one + X_AT, &dw, dout, &b.s, vf + X_AT, &w, b.bws, N, C, E, K, F);
    phased_backward(&b, phased, dout, vf, &w);
    for (size_t i = 0; i < N_VALUES; i++)
        ck_assert_msg(fabsf(phased[i] - one[i]) <= 1e-6f + 1e-5f * fabsf(one[i]),
                      "gradient %zu: phased %g, one call %g", i, (double)phased[i], (double)one[i]);
    buffers_free(&b);
}
END_TEST

/* Routed rows come grouped by expert, then top-k position, then row (HF's order), each row
 * once per chosen expert with its renormalised weight; equal logits pick the lower experts. */
START_TEST(routing_order_and_ties)
{
    static double v[N_VALUES];
    static float vf[N_VALUES];
    float out[N * C];
    make_values(v, vf, 99);
    for (size_t c = 0; c < C; c++) /* row 0 sees four equal logits */
        vf[X_AT + c] = 0.0f;
    moe_buffers b;
    buffers_alloc(&b, false);
    ck_kernel_moe_weights w = weights_at(vf);
    ck_kernel_moe_forward(out, &b.s, vf + X_AT, &w, b.fws, N, C, E, K, F);
    for (size_t j = 0; j < K; j++)
        ck_assert_int_eq(b.s.topk_index[j], (int64_t)j);
    size_t seen[N][K] = {{0}};
    int64_t last = -1;
    for (size_t r = 0; r < N * K; r++) {
        int64_t n = b.s.route_index[2 * r], k = b.s.route_index[2 * r + 1];
        ck_assert(n >= 0 && n < N && k >= 0 && k < K);
        int64_t key = (b.s.topk_index[n * K + k] * K + k) * N + n;
        ck_assert_msg(key > last, "routed row %zu out of order", r);
        last = key;
        seen[n][k]++;
        float want = b.s.topk_probs[n * K + k] / b.s.topk_sum[n];
        ck_assert(b.s.route_weight[r] == want);
        ck_assert(memcmp(b.s.expert_in + r * C, vf + X_AT + n * C, C * sizeof(float)) == 0);
    }
    for (size_t n = 0; n < N; n++)
        for (size_t k = 0; k < K; k++)
            ck_assert_uint_eq(seen[n][k], 1);
    buffers_free(&b);
}
END_TEST

static Suite *moe_suite(void)
{
    Suite *s = suite_create("moe");
    TCase *tc = tcase_create("moe");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sizes_by_hand);
    tcase_add_test(tc, grouped_sizes_by_hand);
    tcase_add_test(tc, bad_attributes);
    tcase_add_loop_test(tc, kernels_against_reference_and_finite_differences, 0, 2);
    tcase_add_test(tc, routing_order_and_ties);
    tcase_add_test(tc, phases_account_for_everything);
    tcase_add_test(tc, phased_backward_equals_one_call);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(moe_suite)
