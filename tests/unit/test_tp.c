/* Tensor, sequence and context parallelism (--tp, --sp, --cp): the per-layer activation
 * bytes of Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
 * Models"), Table 2, from ckplan's own derivation of one rank's GPT-2-medium layer (bf16,
 * eager attention, dropout 0.1: their layer) for several t; one rank's parameters counted
 * module by module as Megatron splits them; what ZeRO shards over dp x cp; and the inputs
 * that cannot be split. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "fixtures.h"
#include "planner/workload.h"

#define GPT2_MEDIUM "tests/data/hf/gpt2-medium.json"
#define LLAMA "tests/data/hf/llama-3-8b"

/* Loads path with s tokens, b sequences, the given attention kernel and layout. */
static int load(const char *path, uint64_t s, uint64_t b, const char *attention, ck_layout l,
                ck_workload *w, ck_err *err)
{
    ck_workload_opts o;
    ck_workload_opts_default(&o);
    o.model.attention = attention;
    o.model.impl = "fused"; /* Megatron's kernels, which Table 2 counts */
    o.model.layout = l;
    ck_assert(ck_model_opts_set(&o.model, "T", 1, s));
    ck_assert(ck_model_opts_set(&o.model, "B", 1, b));
    return ck_workload_load(path, &o, w, err);
}

/* Stage h.0 (one layer at block granularity) of w. */
static const ck_stage *layer(const ck_workload *w)
{
    for (size_t i = 0; i < w->chain.n_stages; i++)
        if (strcmp(w->chain.stages[i].name, "h.0") == 0)
            return &w->chain.stages[i];
    ck_abort_msg("no stage h.0");
    return NULL;
}

/* What h.0 keeps under its variant `keep` ("all", "attn": Megatron's selective recompute). */
static uint64_t kept(const ck_workload *w, const char *keep)
{
    const ck_stage *st = layer(w);
    size_t i = (size_t)(st - w->chain.stages);
    for (size_t v = 0; v <= st->n_variants; v++)
        if (strcmp(ck_chain_variant(&w->chain, i, v).name, keep) == 0)
            return ck_chain_variant(&w->chain, i, v).saved_bytes;
    ck_abort_msg("h.0 has no variant %s", keep);
    return 0;
}

/* Table 2, in bytes, for a layer of hidden size h and a heads, s tokens, b sequences over t
 * tensor-parallel ranks; ckplan's extra: each of the two layernorms keeps an f32 mean and
 * rstd per token, 16sb, split by t where the tokens are (sequence parallelism). */
typedef struct {
    uint64_t s, b, h, a, t;
    bool sp;
} table2;

static uint64_t norm_stats(const table2 *k)
{
    return 16 * k->s * k->b / (k->sp ? k->t : 1);
}

/* No recompute: "tensor parallel" sbh(10 + 24/t + 5as/(ht)), "tensor + sequence parallel"
 * sbh(34/t + 5as/(ht)); multiplied out so that every term is whole. */
static uint64_t none_recomputed(const table2 *k)
{
    uint64_t sbh = k->s * k->b * k->h, scores = 5 * k->a * k->s * k->s * k->b / k->t;
    uint64_t linear = k->sp ? 34 * sbh / k->t : 10 * sbh + 24 * sbh / k->t;
    return linear + scores + norm_stats(k);
}

/* Selective recompute (the attention core recomputed): the same without 5as/(ht). */
static uint64_t selective(const table2 *k)
{
    uint64_t sbh = k->s * k->b * k->h;
    return (k->sp ? 34 * sbh / k->t : 10 * sbh + 24 * sbh / k->t) + norm_stats(k);
}

/* Full recompute keeps the layer's input alone: 2sbh, 2sbh/t with sequence parallelism
 * (the chain's `none` variant keeps the stage's output, the next layer's input, of the same
 * size as its own input). */
static uint64_t full(const table2 *k)
{
    return 2 * k->s * k->b * k->h / (k->sp ? k->t : 1);
}

START_TEST(gpt2_layer_is_table_2)
{
    const uint64_t shapes[][2] = {{1024, 1}, {512, 4}}, ts[] = {1, 2, 4, 8};
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 4; j++)
            for (int sp = 0; sp <= (ts[j] > 1); sp++) {
                table2 k = {shapes[i][0], shapes[i][1], 1024, 16, ts[j], sp};
                ck_workload w;
                ck_err err = {{0}};
                ck_layout l = {.tp = k.t, .sp = sp};
                ck_assert_msg(load(GPT2_MEDIUM, k.s, k.b, "eager", l, &w, &err) == CK_OK, "%s", err.msg);
                ck_assert_msg(kept(&w, "all") == none_recomputed(&k), "s %llu t %llu sp %d: %llu",
                              (unsigned long long)k.s, (unsigned long long)k.t, sp,
                              (unsigned long long)kept(&w, "all"));
                ck_assert_msg(kept(&w, "attn") == selective(&k), "selective, t %llu sp %d",
                              (unsigned long long)k.t, sp);
                ck_assert_msg(layer(&w)->out_bytes == full(&k) && kept(&w, "none") == full(&k),
                              "full, t %llu sp %d", (unsigned long long)k.t, sp);
                ck_workload_free(&w);
            }
}
END_TEST

/* Full recompute with the layers' inputs split over the t ranks (DeepSpeed's
 * partition_activations): Korthikanti et al. keep 2sbh a layer with full recompute, and
 * 2sbh/t when the checkpoints are partitioned. With every stage checkpointed (F_ck each, the
 * loss, then F_all and B each backwards), what the forward leaves held before the loss
 * drops by 2sbh - 2sbh/t for each of the L layers and for nothing else, and the peak by no
 * more than that. */
static uint64_t held_before_loss(const ck_workload *w, const ck_schedule *s, uint64_t *peak)
{
    uint64_t *live = malloc(s->n * sizeof *live);
    ck_replay r;
    ck_err err = {{0}};
    ck_assert_msg(ck_schedule_replay(&w->chain, s, &r, live, NULL, &err) == CK_OK, "%s", err.msg);
    size_t k = 0;
    while (s->actions[k].kind != CK_LOSS)
        k++;
    uint64_t held = live[k - 1];
    free(live);
    *peak = r.peak_bytes;
    return held;
}

START_TEST(partitioned_full_recompute_keeps_2sbh_over_t)
{
    const uint64_t ts[] = {2, 4, 8}, layers = 24;
    for (size_t j = 0; j < 3; j++) {
        table2 k = {1024, 2, 1024, 16, ts[j], false};
        ck_workload whole, split;
        ck_err err = {{0}};
        ck_layout l = {.tp = k.t};
        ck_assert_msg(load(GPT2_MEDIUM, k.s, k.b, "eager", l, &whole, &err) == CK_OK, "%s", err.msg);
        l.partition = true;
        ck_assert_msg(load(GPT2_MEDIUM, k.s, k.b, "eager", l, &split, &err) == CK_OK, "%s", err.msg);
        size_t L = split.chain.n_stages, n_split = 0;
        ck_schedule s = {0};
        for (size_t i = 0; i < L; i++) {
            ck_assert(ck_schedule_push(&s, CK_F_CK, i));
            n_split += split.chain.stages[i].shard_bytes != 0;
        }
        ck_assert(ck_schedule_push(&s, CK_LOSS, 0));
        for (size_t i = L; i-- > 0;)
            ck_assert(ck_schedule_push(&s, CK_F_ALL, i) && ck_schedule_push(&s, CK_B, i));
        ck_assert_uint_eq(n_split, layers);
        uint64_t peak_whole, peak_split;
        uint64_t saved = held_before_loss(&whole, &s, &peak_whole) - held_before_loss(&split, &s, &peak_split);
        ck_assert_msg(saved == layers * (full(&k) - full(&k) / k.t), "t %llu: %llu",
                      (unsigned long long)k.t, (unsigned long long)saved);
        ck_assert(peak_split < peak_whole && peak_whole - peak_split <= saved);
        ck_schedule_free(&s);
        ck_workload_free(&whole);
        ck_workload_free(&split);
    }
}
END_TEST

/* Context parallelism splits every activation's sequence by cp; eager attention's scores
 * are [a/t heads, s/cp queries, s keys]: Table 2's terms divided by cp. */
START_TEST(context_parallel_splits_the_sequence)
{
    const uint64_t s = 1024, b = 2, h = 1024, a = 16, cps[] = {2, 4};
    for (size_t i = 0; i < 2; i++)
        for (uint64_t t = 1; t <= 2; t++) {
            uint64_t cp = cps[i];
            table2 k = {s, b, h, a, t, false};
            ck_workload w;
            ck_err err = {{0}};
            ck_assert_msg(load(GPT2_MEDIUM, s, b, "eager", (ck_layout){.tp = t, .cp = cp}, &w, &err) == CK_OK,
                          "%s", err.msg);
            ck_assert_uint_eq(kept(&w, "all"), none_recomputed(&k) / cp);
            ck_assert_uint_eq(layer(&w)->out_bytes, full(&k) / cp);
            ck_workload_free(&w);
        }
}
END_TEST

/* GPT2LMHeadModel over t ranks, as Megatron splits it: wte by vocabulary, padded to a
 * multiple of t (V_t rows a rank), wpe whole; per block ln_1 and ln_2 whole, c_attn
 * column-parallel C*3C/t + 3C/t, attn c_proj row-parallel C/t*C with its bias C whole,
 * c_fc C*F/t + F/t, mlp c_proj F/t*C + C; ln_f whole; lm_head tied to wte. */
static uint64_t gpt2_rank_params(uint64_t t)
{
    const uint64_t V = 50257, C = 1024, F = 4096, L = 24, P = 1024;
    uint64_t Vt = (V + t - 1) / t;
    uint64_t block = 2 * C + (C * 3 * C / t + 3 * C / t) + (C / t * C + C) + 2 * C + (C * F / t + F / t) +
                     (F / t * C + C);
    return Vt * C + P * C + L * block + 2 * C;
}

START_TEST(rank_parameters_are_megatrons)
{
    for (uint64_t t = 1; t <= 8; t *= 2) {
        ck_workload w;
        ck_err err = {{0}};
        ck_assert_msg(load(GPT2_MEDIUM, 1024, 1, NULL, (ck_layout){.tp = t}, &w, &err) == CK_OK, "%s", err.msg);
        ck_assert_uint_eq(w.statics.n_params, gpt2_rank_params(t));
        ck_assert_uint_eq(w.statics.params, 2 * gpt2_rank_params(t)); /* bf16 */
        ck_workload_free(&w);
    }
    ck_assert_uint_eq(gpt2_rank_params(1), 354823168); /* the published count */
}
END_TEST

/* Llama-3-8B, bf16-master with AdamW, --tp 2 --cp 2 --dp 2 --zero 1: the rank's 16-byte
 * parameter state, the optimizer's 12 bytes sharded over dp x cp = 4 ranks; the token ids
 * and targets are a context-parallel rank's part of the sequence. */
START_TEST(zero_shards_over_dp_times_cp)
{
    const uint64_t C = 4096, H = 32, K = 8, D = 128, F = 14336, V = 128256, L = 32, s = 4096;
    uint64_t attn = C * H * D / 2 + 2 * C * K * D / 2 + H * D / 2 * C, mlp = 3 * C * F / 2;
    uint64_t n = V / 2 * C + L * (attn + mlp + 2 * C) + C + V / 2 * C;
    ck_workload w;
    ck_err err = {{0}};
    ck_layout l = {.dp = 2, .zero = 1, .tp = 2, .cp = 2};
    ck_assert_msg(load(LLAMA, s, 1, NULL, l, &w, &err) == CK_OK, "%s", err.msg);
    ck_assert_uint_eq(w.statics.n_params, n);
    ck_assert_uint_eq(w.statics.params, 2 * n);
    ck_assert_uint_eq(w.statics.grads, 2 * n);
    ck_assert_uint_eq(w.statics.master, 4 * n / 4);
    ck_assert_uint_eq(w.statics.optimizer, 8 * n / 4);
    ck_assert_uint_eq(w.statics.held_inputs, 2 * 4 * s / 2); /* int32 ids and targets [1, s/cp] */
    ck_workload_free(&w);
}
END_TEST

static const char *refused(const char *path, uint64_t s, ck_layout l, const char *attention)
{
    static ck_err err;
    ck_workload w;
    ck_assert_int_eq(load(path, s, 1, attention, l, &w, &err), CK_ERR_INPUT);
    return err.msg;
}

/* A size that does not split is named with its values; --sp needs --tp; model files and
 * chain files take none of them. */
START_TEST(refusals_name_the_field)
{
    fx_assert_has(refused(GPT2_MEDIUM, 1024, (ck_layout){.tp = 3}, NULL),
                  "gpt2-medium.json: heads (H): 16 does not divide by --tp 3", NULL);
    fx_assert_has(refused(LLAMA, 1024, (ck_layout){.tp = 16}, NULL),
                  "key/value heads (KV): 8 does not divide by --tp 16", NULL);
    fx_assert_has(refused(GPT2_MEDIUM, 1000, (ck_layout){.tp = 16, .sp = true}, NULL),
                  "the sequence (T, --seq): 1000 does not divide by --tp under --sp 16", NULL);
    fx_assert_has(refused(GPT2_MEDIUM, 1000, (ck_layout){.cp = 16}, NULL),
                  "the sequence (T, --seq): 1000 does not divide by --cp 16", NULL);
    fx_assert_has(refused(GPT2_MEDIUM, 1024, (ck_layout){.sp = true}, NULL),
                  "--sp: sequence parallelism splits over the tensor-parallel ranks: it needs "
                  "--tp 2 or more, got --tp 1", NULL);
    fx_assert_has(refused("models/gpt2-tiny.json", 64, (ck_layout){.tp = 2}, NULL),
                  "--tp, --sp and --cp apply to Hugging Face configs only", NULL);
}
END_TEST

static Suite *tp_suite(void)
{
    Suite *s = suite_create("tp");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, gpt2_layer_is_table_2);
    tcase_add_test(tc, context_parallel_splits_the_sequence);
    tcase_add_test(tc, partitioned_full_recompute_keeps_2sbh_over_t);
    tcase_add_test(tc, rank_parameters_are_megatrons);
    tcase_add_test(tc, zero_shards_over_dp_times_cp);
    tcase_add_test(tc, refusals_name_the_field);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(tp_suite)
