/* Pipeline layouts: the in-flight counts of 1F1B and interleaved 1F1B against a walk of
 * each rank's order of forwards and backwards (an oracle that never uses the closed form),
 * Korthikanti et al. 2022's first-stage figure, each rank's static memory against its
 * layers' parameters, each rank's activations against a replay of its schedules, and what
 * the chain budget search guarantees. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/pipeline.h"
#include "planner/size.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

#define MAX_ITEMS 512

/* Rank i's operations in Megatron-LM's order: the forward and backward of (microbatch,
 * chunk) pairs. Forward k of the rank runs microbatch (k / (n v)) n + k mod n of chunk
 * (k / n) mod v; backward k the same microbatch of chunk v - 1 - (k / n) mod v. The rank
 * runs w forwards first (w = n - i - 1, or (n - i - 1) 2 + (v - 1) n interleaved, at most
 * m v), then a forward and a backward in turn, then the remaining backwards. */
typedef struct {
    bool backward;
    unsigned mb, chunk;
} op;

static unsigned order(unsigned n, unsigned m, unsigned v, unsigned i, op *ops)
{
    unsigned total = m * v, w = v == 1 ? n - i - 1 : (n - i - 1) * 2 + (v - 1) * n;
    w = w < total ? w : total;
    unsigned f = 0, b = 0, k = 0;
#define FWD() (ops[k++] = (op){false, f / (n * v) * n + f % n, f / n % v}, f++)
#define BWD() (ops[k++] = (op){true, b / (n * v) * n + b % n, v - 1 - b / n % v}, b++)
    while (f < w)
        FWD();
    while (f < total) {
        FWD();
        BWD();
    }
    while (b < total)
        BWD();
#undef FWD
#undef BWD
    return k;
}

/* Walks the order, holding each forward's (microbatch, chunk) until its backward: the most
 * held at once, and per chunk at the first moment of that many. Every backward must find
 * its forward held, and nothing is left. */
static unsigned walk(unsigned n, unsigned m, unsigned v, unsigned i, unsigned *per_chunk)
{
    static op ops[2 * MAX_ITEMS];
    bool held[MAX_ITEMS] = {false};
    unsigned k = order(n, m, v, i, ops), live = 0, most = 0, now[8] = {0};
    for (unsigned j = 0; j < k; j++) {
        unsigned id = ops[j].mb * v + ops[j].chunk;
        ck_assert_int_eq(held[id], ops[j].backward);
        held[id] = !ops[j].backward;
        live += ops[j].backward ? -1u : 1u;
        now[ops[j].chunk] += ops[j].backward ? -1u : 1u;
        if (live > most) {
            most = live;
            memcpy(per_chunk, now, v * sizeof *now);
        }
    }
    ck_assert_uint_eq(live, 0);
    return most;
}

START_TEST(in_flight_is_the_walk_of_each_schedule)
{
    for (unsigned n = 1; n <= 6; n++)
        for (unsigned v = 1; v <= 3; v++)
            for (unsigned m = v == 1 ? 1 : n; m <= 12 && m * v <= MAX_ITEMS; m += v == 1 ? 1 : n)
                for (unsigned i = 0; i < n; i++) {
                    unsigned per[8];
                    unsigned most = walk(n, m, v, i, per);
                    ck_assert_msg(ck_pipeline_in_flight(n, m, v, i) == most,
                                  "n %u m %u v %u rank %u: %u in flight by the walk", n, m, v, i, most);
                    for (unsigned j = 0; j < v; j++)
                        ck_assert_uint_eq(ck_pipeline_chunk_live(n, m, v, i, j), per[j]);
                }
}
END_TEST

/* Section 4.2.3: with enough microbatches the first stage holds the activations of
 * L (1 + (p - 1) / (p m)) layers interleaved (m its virtual stages), L without. */
START_TEST(first_stage_is_korthikanti_figure)
{
    for (unsigned p = 2; p <= 8; p++)
        for (unsigned v = 1; v <= 4; v++) {
            unsigned layers = 4 * p * v, per_chunk = layers / (p * v), m = 4 * p;
            uint64_t held = ck_pipeline_in_flight(p, m, v, 0) * per_chunk;
            /* L (1 + (p - 1) / (p v)) = L + (p - 1) * per_chunk */
            uint64_t paper = v == 1 ? layers : layers + (p - 1) * per_chunk;
            ck_assert_msg(held == paper, "p %u v %u: %llu layers held, the paper's %llu", p, v,
                          (unsigned long long)held, (unsigned long long)paper);
        }
}
END_TEST

/* llama-tiny with `layers` layers under --pp n --microbatches m --virtual-stages v. */
static int load(unsigned layers, uint64_t n, uint64_t m, uint64_t v, uint64_t dp, unsigned zero,
                ck_workload *w, ck_err *err)
{
    ck_workload_opts o;
    ck_workload_opts_default(&o);
    o.pipelines = true;
    ck_model_opts_set(&o.model, "L", 1, layers);
    o.model.layout = (ck_layout){.dp = dp, .zero = zero, .pp = n, .microbatches = m,
                                 .virtual_stages = v};
    return ck_workload_load("models/llama-tiny.json", &o, w, err);
}

static void split(unsigned layers, uint64_t n, uint64_t m, uint64_t v, uint64_t dp, unsigned zero,
                  ck_workload *w, ck_pipeline *p)
{
    ck_err err = {{0}};
    ck_assert_msg(load(layers, n, m, v, dp, zero, w, &err) == CK_OK, "%s", err.msg);
    ck_assert_msg(ck_pipeline_split(w, p, &err) == CK_OK, "%s", err.msg);
}

/* Each rank's parameters are those of its layers, the embeddings on the first rank and
 * the head on the last; the ranks together hold the model, once. */
START_TEST(static_memory_is_each_ranks_layers)
{
    static const uint64_t ns[] = {1, 2, 4, 4}, vs[] = {1, 1, 1, 2};
    for (size_t t = 0; t < 4; t++) {
        ck_workload w;
        ck_pipeline p;
        split(8, ns[t], 8, vs[t], 0, 0, &w, &p);
        const ck_param_parts *parts = &w.statics.parts;
        uint64_t per_rank = 8 / ns[t], sum = 0, inputs = 0;
        for (uint64_t i = 0; i < p.n_ranks; i++) {
            const ck_static_mem *s = &p.ranks[i].statics;
            uint64_t count = per_rank * parts->per_layer + (i == 0 ? parts->embeddings : 0) +
                             (i == p.n_ranks - 1 ? parts->head : 0);
            ck_assert_uint_eq(s->params, 4 * count); /* f32 */
            ck_assert_uint_eq(s->grads, 4 * count);
            sum += s->params;
            inputs += s->held_inputs;
            ck_assert_uint_eq(s->total, s->params + s->grads + s->optimizer + s->master + s->held_inputs);
        }
        ck_assert_uint_eq(sum, w.statics.params);
        ck_assert_uint_eq(inputs, w.statics.held_inputs);
        ck_pipeline_free(&p);
        ck_workload_free(&w);
    }
}
END_TEST

/* ZeRO over the data-parallel ranks shards each pipeline rank's own state. */
START_TEST(zero_shards_each_ranks_own)
{
    ck_workload w1, w8;
    ck_pipeline p1, p8;
    split(8, 2, 4, 1, 0, 0, &w1, &p1);
    split(8, 2, 4, 1, 8, 1, &w8, &p8);
    for (uint64_t i = 0; i < 2; i++) {
        const ck_static_mem *a = &p1.ranks[i].statics, *b = &p8.ranks[i].statics;
        ck_assert_uint_eq(b->params, a->params);
        ck_assert_uint_lt(b->optimizer, a->optimizer / 8 + 4096);
        ck_assert_uint_ge(8 * b->optimizer, a->optimizer);
    }
    ck_pipeline_free(&p1);
    ck_pipeline_free(&p8);
    ck_workload_free(&w1);
    ck_workload_free(&w8);
}
END_TEST

/* (k - 1) C + P, chunk by chunk, from the test's own replay of the rank's schedules. */
static uint64_t replayed_total(const ck_pipeline_rank *r)
{
    uint64_t sum = 0, most = 0;
    for (size_t j = 0; j < r->n_chunks; j++) {
        const ck_pipeline_chunk *c = &r->chunks[j];
        const ck_schedule *s = &c->plan.result.schedule;
        uint64_t *live = calloc(s->n, sizeof *live);
        ck_replay rep;
        ck_err err;
        ck_assert_int_eq(ck_schedule_replay(&c->chain, s, &rep, live, NULL, &err), CK_OK);
        size_t loss = 0;
        while (s->actions[loss].kind != CK_LOSS)
            loss++;
        uint64_t held = live[loss - 1];
        free(live);
        sum += c->live * held;
        most = rep.peak_bytes - held > most ? rep.peak_bytes - held : most;
    }
    return sum + most;
}

/* A chunk's chain is the model chain's stages, its input the stage before's output. */
static void check_chunk_chain(const ck_workload *w, const ck_pipeline_chunk *c)
{
    ck_assert_uint_eq(c->chain.n_stages, c->end - c->first);
    ck_assert_uint_eq(c->chain.input_bytes, ck_chain_x_bytes(&w->chain, c->first));
    for (size_t k = c->first; k < c->end; k++) {
        ck_assert_uint_eq(c->chain.stages[k - c->first].saved_bytes, w->chain.stages[k].saved_bytes);
        ck_assert_uint_eq(c->chain.stages[k - c->first].out_bytes, w->chain.stages[k].out_bytes);
    }
}

/* At a budget that makes every rank recompute: each rank fits, its activations are the
 * replay's, and one byte more of chain budget would not have fit. */
START_TEST(ranks_fit_by_replay_and_the_search_is_tight)
{
    static const uint64_t ns[] = {2, 4, 2}, vs[] = {1, 1, 2};
    for (size_t t = 0; t < 3; t++) {
        ck_workload w;
        ck_pipeline p;
        ck_err err = {{0}};
        ck_planner_opts o = {.slots = CK_DEFAULT_SLOTS};
        split(8, ns[t], 8, vs[t], 0, 0, &w, &p);
        /* nothing fits in 0: each rank's smallest total and its baseline's; then a budget
         * halfway between, for the rank where that is the most */
        ck_assert_int_eq(ck_pipeline_plan(&p, &ck_planner_dp, 0, &o, &err), CK_ERR_INFEASIBLE);
        uint64_t budget = 0;
        for (uint64_t i = 0; i < p.n_ranks; i++) {
            const ck_pipeline_rank *r = &p.ranks[i];
            ck_assert(!r->fits);
            ck_assert_uint_lt(r->min_activation, r->baseline_activation);
            uint64_t need = r->statics.total + (r->min_activation + r->baseline_activation) / 2;
            budget = need > budget ? need : budget;
        }
        ck_pipeline_free(&p);
        ck_pipeline q;
        ck_assert_int_eq(ck_pipeline_split(&w, &q, &err), CK_OK);
        int prc = ck_pipeline_plan(&q, &ck_planner_dp, budget, &o, &err);
        ck_assert_msg(prc == CK_OK, "case %zu: budget %llu: %d %s", t, (unsigned long long)budget, prc, err.msg);
        uint64_t worst = 0, searched = 0;
        for (uint64_t i = 0; i < q.n_ranks; i++) {
            const ck_pipeline_rank *r = &q.ranks[i];
            worst = r->statics.total + r->activation > worst ? r->statics.total + r->activation : worst;
        }
        ck_assert_uint_eq(q.ranks[q.worst].statics.total + q.ranks[q.worst].activation, worst);
        for (uint64_t i = 0; i < q.n_ranks; i++) { /* replanning a rank below changes it */
            ck_pipeline_rank *r = &q.ranks[i];
            for (size_t j = 0; j < r->n_chunks; j++)
                check_chunk_chain(&w, &r->chunks[j]);
            ck_assert_uint_eq(r->activation, replayed_total(r));
            ck_assert_uint_le(r->statics.total + r->activation, budget);
            uint64_t room = budget - r->statics.total;
            if (r->chain_budget < room) { /* it searched: B' + 1 does not fit */
                searched++;
                ck_assert_uint_gt(r->baseline_activation, room);
                int rc = ck_pipeline_plan_rank_at(r, &ck_planner_dp, r->chain_budget + 1, &o, &err);
                ck_assert(rc == CK_ERR_INFEASIBLE || r->activation > room);
            }
        }
        ck_assert_uint_gt(searched, 0);
        ck_pipeline_free(&q);
        ck_workload_free(&w);
    }
}
END_TEST

/* A planner of one schedule, whatever the budget: checkpoint x_0 alone, recompute from it. */
static ck_schedule one_checkpoint;

static int one_checkpoint_plan(const ck_chain *c, uint64_t budget, const ck_planner_opts *opts,
                               ck_plan_result *result, uint64_t *min_budget, ck_err *err)
{
    (void)opts;
    for (size_t k = 0; k < one_checkpoint.n; k++)
        ck_assert(ck_schedule_append(&result->schedule, one_checkpoint.actions[k]));
    return ck_planner_check_fit(c, &result->schedule, budget, min_budget, err);
}

static const ck_planner one_checkpoint_planner = {"one", "x_0 alone", one_checkpoint_plan, NULL, false};

/* With partitioned checkpoints (planner/action.h) what a microbatch keeps, C, is what its
 * forward left once its checkpoint functions have returned: F_ck 0, F_none 1 .. L-1 keep
 * x_0's shard and x_L, not x_0 whole besides, though that segment is open until the loss. */
START_TEST(partitioned_checkpoints_kept_in_flight)
{
    ck_workload w;
    ck_pipeline p;
    ck_err err = {{0}};
    ck_planner_opts o = {.slots = CK_DEFAULT_SLOTS};
    split(8, 2, 8, 1, 0, 0, &w, &p);
    ck_pipeline_rank *r = &p.ranks[1];
    ck_chain *c = &r->chunks[0].chain;
    size_t L = c->n_stages;
    bool ok = ck_schedule_push(&one_checkpoint, CK_F_CK, 0);
    for (size_t i = 1; i < L; i++)
        ok = ok && ck_schedule_push(&one_checkpoint, CK_F_NONE, i);
    ok = ok && ck_schedule_push(&one_checkpoint, CK_LOSS, 0);
    for (size_t i = L; ok && i-- > 0;) {
        for (size_t j = 0; j < i; j++)
            ok = ok && ck_schedule_push(&one_checkpoint, j ? CK_F_NONE : CK_F_CK, j);
        ok = ok && ck_schedule_push(&one_checkpoint, CK_F_ALL, i) && ck_schedule_push(&one_checkpoint, CK_B, i);
    }
    ck_assert(ok);
    uint64_t x0 = c->input_bytes, xL = ck_chain_x_bytes(c, L), shard = ck_size_ceil_div(x0, 4);
    ck_schedule base = {0};
    ck_replay top;
    ck_assert_int_eq(ck_schedule_baseline(c, &base, &err), CK_OK);
    ck_assert_int_eq(ck_schedule_replay(c, &base, &top, NULL, NULL, &err), CK_OK);
    ck_assert_int_eq(ck_pipeline_plan_rank_at(r, &one_checkpoint_planner, top.peak_bytes - 1, &o, &err), CK_OK);
    ck_assert_uint_eq(r->chunks[0].plan.held, x0 + xL);
    c->stages[0].shard_bytes = shard;
    ck_assert_int_eq(ck_pipeline_plan_rank_at(r, &one_checkpoint_planner, top.peak_bytes - 1, &o, &err), CK_OK);
    ck_assert_uint_eq(r->chunks[0].plan.held, shard + xL);
    ck_schedule_free(&base);
    ck_schedule_free(&one_checkpoint);
    ck_pipeline_free(&p);
    ck_workload_free(&w);
}
END_TEST

/* Under 1F1B with uniform layers the first rank, holding the most, is the worst. */
START_TEST(first_rank_is_worst_for_uniform_layers)
{
    ck_workload w;
    ck_pipeline p;
    ck_err err = {{0}};
    ck_planner_opts o = {.slots = CK_DEFAULT_SLOTS};
    split(8, 4, 8, 1, 0, 0, &w, &p);
    ck_assert_int_eq(ck_pipeline_plan(&p, &ck_planner_dp, UINT64_MAX / 4, &o, &err), CK_OK);
    ck_assert_uint_eq(p.worst, 0);
    for (uint64_t i = 0; i < 4; i++)
        ck_assert_uint_eq(p.ranks[i].in_flight, 4 - i);
    ck_pipeline_free(&p);
    ck_workload_free(&w);
}
END_TEST

START_TEST(uneven_splits_are_refused)
{
    ck_workload w;
    ck_pipeline p;
    ck_err err = {{0}};
    ck_assert_int_eq(load(8, 3, 3, 1, 0, 0, &w, &err), CK_OK);
    ck_assert_int_eq(ck_pipeline_split(&w, &p, &err), CK_ERR_INPUT);
    fx_assert_has(err.msg, "--pp 3", "8 layers", NULL);
    ck_workload_free(&w);
    ck_assert_int_eq(load(8, 2, 3, 2, 0, 0, &w, &err), CK_OK);
    ck_assert_int_eq(ck_pipeline_split(&w, &p, &err), CK_ERR_INPUT);
    fx_assert_has(err.msg, "--microbatches 3", "--pp 2", NULL);
    ck_workload_free(&w);
}
END_TEST

static Suite *pipe_suite(void)
{
    Suite *s = suite_create("pipe");
    TCase *tc = tcase_create("pipe");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, in_flight_is_the_walk_of_each_schedule);
    tcase_add_test(tc, first_stage_is_korthikanti_figure);
    tcase_add_test(tc, static_memory_is_each_ranks_layers);
    tcase_add_test(tc, zero_shards_each_ranks_own);
    tcase_add_test(tc, ranks_fit_by_replay_and_the_search_is_tight);
    tcase_add_test(tc, first_rank_is_worst_for_uniform_layers);
    tcase_add_test(tc, partitioned_checkpoints_kept_in_flight);
    tcase_add_test(tc, uneven_splits_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(pipe_suite)
