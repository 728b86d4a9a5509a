/* Communication bytes per GPU (planner/comm) against the papers' figures, computed from a
 * bundled model's own parameters (ZeRO's 2Ψ and 3Ψ), and against brute-force counts of
 * ring collectives, tensor-parallel layers and pipeline sends simulated message by
 * message; and the layouts of n GPUs that sweep --gpus plans (planner/layouts). */
#include <stdlib.h>
#include <string.h>

#include "planner/comm.h"
#include "planner/derive.h"
#include "planner/layouts.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

/* A ring all-reduce of n ranks' buffers of `bytes` bytes (one value a byte), padded to n
 * chunks, simulated send by send: n - 1 reduce-scatter steps in which rank r sends chunk
 * (r - k) mod n to rank r + 1, then n - 1 all-gather steps. Checks that every rank ends
 * with the sum; returns the bytes rank 0 sent (every rank sends the same). */
static uint64_t brute_ring_all_reduce(uint64_t n, uint64_t bytes, bool reduce_scatter_only)
{
    uint64_t chunk = (bytes + n - 1) / n;
    uint64_t *buf = calloc(n * n * chunk, sizeof *buf), sent = 0;
    ck_assert_ptr_nonnull(buf);
#define AT(r, c, i) buf[((r) * n + (c)) * chunk + (i)]
    for (uint64_t r = 0; r < n; r++)
        for (uint64_t c = 0; c < n; c++)
            for (uint64_t i = 0; i < chunk; i++)
                AT(r, c, i) = r + 1;
    for (uint64_t phase = 0; phase < (reduce_scatter_only ? 1u : 2u); phase++)
        for (uint64_t k = 0; k + 1 < n; k++) {
            uint64_t *next = malloc(n * n * chunk * sizeof *next);
            ck_assert_ptr_nonnull(next);
            memcpy(next, buf, n * n * chunk * sizeof *next);
            for (uint64_t r = 0; r < n; r++) {
                uint64_t c = (r + n - k + (phase ? 1 : 0)) % n, to = (r + 1) % n;
                for (uint64_t i = 0; i < chunk; i++)
                    next[(to * n + c) * chunk + i] = phase ? AT(r, c, i) : next[(to * n + c) * chunk + i] + AT(r, c, i);
                sent += r == 0 ? chunk : 0;
            }
            free(buf);
            buf = next;
        }
    uint64_t sum = n * (n + 1) / 2;
    for (uint64_t r = 0; r < n; r++) /* rank r owns chunk (r + 1) mod n after the scatter */
        for (uint64_t c = 0; c < n; c++)
            if (!reduce_scatter_only || c == (r + 1) % n)
                for (uint64_t i = 0; i < chunk; i++)
                    ck_assert_uint_eq(AT(r, c, i), sum);
#undef AT
    free(buf);
    return sent;
}

START_TEST(ring_collectives_against_a_simulated_ring)
{
    for (uint64_t n = 1; n <= 9; n++)
        for (uint64_t bytes = 1; bytes <= 40; bytes += 13) {
            uint64_t chunk = (bytes + n - 1) / n, ar, rs;
            ck_assert(ck_comm_ring_all_reduce(n, chunk, &ar));
            ck_assert(ck_comm_ring_gather(n, chunk, &rs));
            ck_assert_uint_eq(ar, brute_ring_all_reduce(n, bytes, false));
            ck_assert_uint_eq(rs, brute_ring_all_reduce(n, bytes, true));
        }
    uint64_t out;
    ck_assert(!ck_comm_ring_all_reduce(3, UINT64_MAX / 3, &out));
}
END_TEST

static ck_comm_bytes dp_of(const ck_model *m, uint64_t n, unsigned zero, uint64_t micro)
{
    ck_comm_bytes b;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_comm_data_parallel_of(m, &(ck_layout){.dp = n, .zero = zero}, NULL, micro, &b, &err), CK_OK);
    ck_assert_uint_eq(b.total, b.gradients + b.parameters);
    return b;
}

/* gpt2-tiny's tensors all divide by 2 to 128 (C = 128, V = 512): ZeRO's volumes (section
 * 7) per rank are then exactly 2(n-1)/n of the gradient bytes for stages 0 to 2 and 3/2 of
 * that for stage 3, the whole model's bytes coming from the unsharded derivation. */
START_TEST(zero_volumes_are_the_papers)
{
    ck_model *m = fx_load_file("models/gpt2-tiny.json");
    ck_static_mem whole;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_derive_static_memory(m, NULL, &whole, &err), CK_OK);
    const uint64_t psi_bytes = whole.params; /* f32: Ψ parameters of 4 bytes, gradients alike */
    ck_assert_uint_eq(whole.grads, psi_bytes);
    static const uint64_t ranks[] = {2, 4, 8, 16, 128};
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
        uint64_t n = ranks[i], two_psi = 2 * (n - 1) * psi_bytes / n;
        ck_assert_uint_eq(2 * (n - 1) * psi_bytes % n, 0);
        for (unsigned z = 0; z <= 2; z++)
            ck_assert_uint_eq(dp_of(m, n, z, 1).total, two_psi);
        ck_assert_uint_eq(dp_of(m, n, 3, 1).total, 3 * two_psi / 2);
        ck_assert_uint_eq(dp_of(m, n, 0, 1).parameters, 0);
        ck_assert_uint_eq(dp_of(m, n, 3, 1).parameters, two_psi);
    }
    ck_assert_uint_eq(dp_of(m, 1, 3, 4).total, 0); /* one rank sends nothing */
    ck_model_free(m);
}
END_TEST

/* A pipeline rank's part (mine): its own nodes' shards alone. Two complementary parts of
 * gpt2-tiny (the nodes before and after its middle one) send exactly what the whole model
 * does at every stage, and each part less: a wrong part (the whole model's shards, or
 * none) fails one of the two. */
START_TEST(a_part_sends_its_own_shards)
{
    ck_model *m = fx_load_file("models/gpt2-tiny.json");
    bool *first = calloc(m->n_nodes, sizeof *first), *second = calloc(m->n_nodes, sizeof *second);
    ck_assert(first && second);
    for (size_t k = 0; k < m->n_nodes; k++)
        (k < m->n_nodes / 2 ? first : second)[k] = true;
    for (unsigned z = 0; z <= 3; z++) {
        ck_layout l = {.dp = 4, .zero = z};
        ck_comm_bytes whole = dp_of(m, 4, z, 3), a, b;
        ck_err err = {{0}};
        ck_assert_int_eq(ck_comm_data_parallel_of(m, &l, first, 3, &a, &err), CK_OK);
        ck_assert_int_eq(ck_comm_data_parallel_of(m, &l, second, 3, &b, &err), CK_OK);
        ck_assert_uint_eq(a.gradients + b.gradients, whole.gradients);
        ck_assert_uint_eq(a.parameters + b.parameters, whole.parameters);
        ck_assert_uint_gt(a.gradients, 0);
        ck_assert_uint_gt(b.gradients, 0);
    }
    free(first);
    free(second);
    ck_model_free(m);
}
END_TEST

/* Gradient accumulation: stages 0 and 1 reduce once a step, stage 2 reduce-scatters every
 * microbatch, stage 3 also gathers the parameters twice a microbatch. */
START_TEST(microbatches_repeat_what_each_stage_does_per_microbatch)
{
    ck_model *m = fx_load_file("models/gpt2-tiny.json");
    for (unsigned z = 0; z <= 3; z++) {
        ck_comm_bytes one = dp_of(m, 8, z, 1), five = dp_of(m, 8, z, 5);
        ck_assert_uint_eq(five.gradients, z >= 2 ? 5 * one.gradients : one.gradients);
        ck_assert_uint_eq(five.parameters, z == 3 ? 5 * one.parameters : one.parameters);
    }
    ck_model_free(m);
}
END_TEST

/* Frozen parameters have no gradients; stages 1 and 2 gather only the trainable ones they
 * update, stage 3 gathers every one it computes with. A frozen linear 64 -> 256 with bias
 * (16640 elements), then a trainable 256 -> 64 (16448); every tensor divides by 8; f32. */
#define FROZEN_UP                                                                                \
    "{'format': 'ckplan-model/1', 'name': 'f', 'dims': {'B': 2, 'C': 64, 'W': 256},"            \
    " 'training': {'optimizer': 'adam'},"                                                        \
    " 'inputs': [{'name': 'x', 'shape': ['B', 'C']}, {'name': 'y', 'shape': ['B', 'C']}],"      \
    " 'nodes': [{'name': 'up', 'op': 'linear', 'out': 'W', 'frozen': true, 'inputs': ['x']},"   \
    " {'name': 'act', 'op': 'gelu', 'inputs': ['up']},"                                          \
    " {'name': 'down', 'op': 'linear', 'out': 'C', 'inputs': ['act']},"                         \
    " {'name': 'loss', 'op': 'mse', 'inputs': ['down', 'y']}]}"

START_TEST(frozen_parameters_are_gathered_only_where_used)
{
    ck_model *m = fx_load(FROZEN_UP);
    const uint64_t trainable = 16448 / 8 * 4, all = trainable + 16640 / 8 * 4;
    ck_assert_uint_eq(dp_of(m, 8, 0, 1).gradients, 2 * 7 * trainable);
    ck_assert_uint_eq(dp_of(m, 8, 1, 1).parameters, 7 * trainable);
    ck_assert_uint_eq(dp_of(m, 8, 2, 1).parameters, 7 * trainable);
    ck_assert_uint_eq(dp_of(m, 8, 3, 1).parameters, 2 * 7 * all);
    ck_assert_uint_eq(dp_of(m, 8, 3, 1).gradients, 7 * trainable);
    ck_model_free(m);
}
END_TEST

/* Megatron's per-layer volume (Korthikanti et al. 2022, section 4.2.2): four all-reduces of
 * the s·b·h activation (2 bytes a value) a layer and microbatch, each 2(t-1)/t of it per
 * rank; sequence parallelism's all-gathers and reduce-scatters add up to the same; full
 * recompute runs the forward's two again. Checked against a simulated ring as well. */
START_TEST(tensor_parallel_layer_volume)
{
    const uint64_t s = 8192, b = 1, h = 4096, a = 2 * s * b * h;
    for (uint64_t t = 1; t <= 8; t *= 2) {
        uint64_t plain, sp, again, sp_again;
        ck_assert(ck_comm_tensor_parallel_layer(t, a, false, false, &plain));
        ck_assert(ck_comm_tensor_parallel_layer(t, a, true, false, &sp));
        ck_assert(ck_comm_tensor_parallel_layer(t, a, false, true, &again));
        ck_assert(ck_comm_tensor_parallel_layer(t, a, true, true, &sp_again));
        ck_assert_uint_eq(plain, 4 * 2 * (t - 1) * a / t);
        ck_assert_uint_eq(sp, plain);
        ck_assert_uint_eq(again, 6 * 2 * (t - 1) * a / t);
        ck_assert_uint_eq(sp_again, again);
    }
    for (uint64_t t = 2; t <= 5; t++) { /* activations that t does not divide: padded chunks */
        uint64_t plain, sp;
        ck_assert(ck_comm_tensor_parallel_layer(t, 37, false, false, &plain));
        ck_assert(ck_comm_tensor_parallel_layer(t, 37, true, false, &sp));
        ck_assert_uint_eq(plain, 4 * brute_ring_all_reduce(t, 37, false));
        ck_assert_uint_eq(sp, 4 * 2 * brute_ring_all_reduce(t, 37, true));
    }
}
END_TEST

/* Every send of a pipeline step, one by one: chunk c of p·v on rank c mod p sends each
 * microbatch's activation to chunk c + 1 and its gradient to chunk c - 1. */
START_TEST(pipeline_sends_against_every_message)
{
    for (uint64_t p = 1; p <= 5; p++)
        for (uint64_t v = 1; v <= 3; v++) {
            const uint64_t m = 7, boundary = 1000;
            uint64_t sent[5] = {0};
            for (uint64_t mb = 0; mb < m; mb++)
                for (uint64_t c = 0; c < p * v; c++) {
                    uint64_t r = c % p;
                    if (c + 1 < p * v && (c + 1) % p != r)
                        sent[r] += boundary;
                    if (c > 0 && (c - 1) % p != r)
                        sent[r] += boundary;
                }
            for (uint64_t r = 0; r < p; r++) {
                uint64_t got;
                ck_assert(ck_comm_pipeline_rank(p, v, r, m, boundary, &got));
                ck_assert_uint_eq(got, sent[r]);
            }
        }
    uint64_t out;
    ck_assert(!ck_comm_pipeline_rank(4, 1, 4, 1, 1, &out));
    ck_assert(!ck_comm_pipeline_rank(4, 0, 0, 1, 1, &out));
}
END_TEST

/* The index in l of the layout with tp, sp over tp > 1, pp stages of one chunk, dp ranks
 * and stage zero; l.n when none is; fails when two are. */
static size_t find_layout(const ck_layout_list *l, uint64_t tp, uint64_t pp, uint64_t dp, unsigned zero)
{
    size_t at = l->n;
    for (size_t i = 0; i < l->n; i++) {
        const ck_layout *x = &l->items[i];
        if (ck_layout_tp(x) == tp && x->sp == (tp > 1) && ck_layout_pp(x) == pp &&
            ck_layout_virtual(x) == 1 && ck_layout_ranks(x) == dp && x->zero == zero) {
            ck_assert_uint_eq(at, l->n);
            at = i;
        }
    }
    return at;
}

START_TEST(layouts_use_exactly_n_gpus_each_once)
{
    for (uint64_t n = 1; n <= 96; n++) {
        ck_layout_list l;
        ck_err err = {{0}};
        ck_assert_int_eq(ck_layouts_for(n, &l, &err), CK_OK);
        for (size_t i = 0; i < l.n; i++) {
            ck_assert_uint_eq(ck_layouts_gpus(&l.items[i]), n);
            ck_assert(!ck_layout_pipelined(&l.items[i]) || ck_layout_pp(&l.items[i]) > 1);
            ck_assert(ck_layout_model_parallel_given(&l.items[i]) == (ck_layout_tp(&l.items[i]) > 1));
            ck_assert_uint_eq(ck_layout_cp(&l.items[i]), 1);
        }
        /* every factorisation tp x pp x dp = n, at every stage that shards over dp > 1, once;
         * no other layout, since each uses n GPUs (above) and they are counted (below). Only
         * divisors are looked up: over every tp, pp <= n the sanitizers' build took 13 s. */
        size_t expected = 0, last = 0;
        for (uint64_t tp = 1; tp <= n; tp++)
            for (uint64_t pp = 1; pp <= n / tp; pp++)
                for (unsigned z = 0; z <= CK_LAYOUT_MAX_ZERO && n % (tp * pp) == 0; z++) {
                    uint64_t dp = n / tp / pp;
                    bool is = dp > 1 || z == 0;
                    size_t at = find_layout(&l, tp, pp, is ? dp : n + 1, z);
                    ck_assert_uint_eq(at < l.n, is);
                    if (is) /* in the documented order: tp, then pp, then the stage */
                        ck_assert(expected == 0 || at > last);
                    last = is ? at : last;
                    expected += is;
                }
        ck_assert_uint_eq(l.n, expected);
        ck_layouts_free(&l);
    }
    ck_layout_list l;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_layouts_for(0, &l, &err), CK_ERR_INPUT);
    ck_assert_int_eq(ck_layouts_for(CK_LAYOUT_MAX_DP + 1, &l, &err), CK_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "--gpus"));
}
END_TEST

START_TEST(microbatches_divide_the_global_batch)
{
    uint64_t m = 0;
    ck_layout dp8 = {.dp = 8, .zero = 3}, one = {.dp = 0};
    ck_layout dp2_tp2_pp2 = {.dp = 2, .zero = 1, .tp = 2, .sp = true, .pp = 2, .virtual_stages = 1};
    ck_assert(ck_layouts_microbatches(&dp8, 64, 2, &m));
    ck_assert_uint_eq(m, 4);
    ck_assert(ck_layouts_microbatches(&one, 3, 1, &m));
    ck_assert_uint_eq(m, 3);
    ck_assert(!ck_layouts_microbatches(&dp8, 60, 2, &m)); /* 60 / 16 */
    ck_assert(!ck_layouts_microbatches(&dp8, 4, 1, &m));  /* fewer sequences than ranks */
    ck_assert(!ck_layouts_microbatches(&dp8, 8, 0, &m));
    /* tensor-parallel and pipeline ranks share their data-parallel rank's sequences */
    ck_assert(ck_layouts_microbatches(&dp2_tp2_pp2, 8, 1, &m));
    ck_assert_uint_eq(m, 4);
    char name[64];
    ck_layouts_name(&dp8, name, sizeof name);
    ck_assert_str_eq(name, "dp=8 zero=3");
    ck_layouts_name(&dp2_tp2_pp2, name, sizeof name);
    ck_assert_str_eq(name, "dp=2 zero=1 tp=2 sp pp=2");
}
END_TEST

static Suite *comm_suite(void)
{
    Suite *s = suite_create("comm");
    TCase *tc = tcase_create("comm");
    tcase_add_test(tc, ring_collectives_against_a_simulated_ring);
    tcase_add_test(tc, zero_volumes_are_the_papers);
    tcase_add_test(tc, a_part_sends_its_own_shards);
    tcase_add_test(tc, microbatches_repeat_what_each_stage_does_per_microbatch);
    tcase_add_test(tc, frozen_parameters_are_gathered_only_where_used);
    tcase_add_test(tc, tensor_parallel_layer_volume);
    tcase_add_test(tc, pipeline_sends_against_every_message);
    tcase_add_test(tc, layouts_use_exactly_n_gpus_each_once);
    tcase_add_test(tc, microbatches_divide_the_global_batch);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(comm_suite)
