/* The every planner: every layer checkpointed, each recomputed whole before its backward,
 * the stages in no layer stored; on a chain file, every stage. Checked against the models'
 * stage names, a schedule and its replay worked out by hand, and properties on random
 * chains. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/layers.h"
#include "planner/planner.h"
#include "planner/workload.h"
#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"
#include "tests/unit/plan_run.h"

/* Plans c with every (no budget to meet) and replays the schedule. */
static ck_plan_result plan_every(const ck_chain *c, ck_replay *replay)
{
    ck_plan_result r;
    uint64_t min_budget = 0;
    ck_err err = {{0}};
    int rc = ck_test_plan(&ck_planner_every, c, UINT64_MAX, CK_DEFAULT_SLOTS, &r, replay, &min_budget, &err);
    ck_assert_msg(rc == CK_OK, "%s", err.msg);
    return r;
}

/* The decoder layer a stage of gpt2-tiny or llama-tiny lies in, read off its name ("h.3" or
 * "h.3.ln1..h.3.res1"): its number, or -1 for a stage in none. Independent of
 * planner/layers. */
static long layer_of_name(const char *name)
{
    if (strncmp(name, "h.", 2) != 0)
        return -1;
    return strtol(name + 2, NULL, 10);
}

/* What the schedule does to each stage: before the loss, whether stage i runs F_all and
 * F_ck; after it, how many F_all. */
typedef struct {
    bool stored, checkpoint;
    size_t recomputed;
} stage_ops;

static stage_ops *ops_of(const ck_chain *c, const ck_schedule *s)
{
    stage_ops *ops = calloc(c->n_stages, sizeof *ops);
    ck_assert_ptr_nonnull(ops);
    bool after_loss = false;
    for (size_t k = 0; k < s->n; k++) {
        const ck_action *a = &s->actions[k];
        after_loss |= a->kind == CK_LOSS;
        if (a->kind == CK_LOSS || a->kind == CK_B)
            continue;
        ck_assert_msg(!after_loss || a->kind == CK_F_ALL, "schedule[%zu]: nested recomputation", k);
        if (after_loss)
            ops[a->stage].recomputed++;
        ops[a->stage].stored |= !after_loss && a->kind == CK_F_ALL;
        ops[a->stage].checkpoint |= !after_loss && a->kind == CK_F_CK;
    }
    return ops;
}

/* A model with L layers: exactly the stages of the L layers are checkpointed, each layer's
 * input is its one checkpoint, each layer is recomputed once, whole; the rest is stored. At
 * block granularity a layer is one stage, at op granularity two. Less memory than storing
 * everything, more time. */
static void check_model_layers(const char *path, ck_granularity g, uint64_t layers)
{
    ck_workload_opts o;
    ck_workload_opts_default(&o);
    o.granularity = g;
    ck_assert(ck_model_opts_set(&o.model, "L", 1, layers));
    ck_workload w;
    ck_err err = {{0}};
    ck_assert_msg(ck_workload_load(path, &o, &w, &err) == CK_OK, "%s", err.msg);
    ck_assert_int_eq(w.chain.layers, CK_CHAIN_LAYERS_FOUND);
    ck_replay replay;
    ck_plan_result r = plan_every(&w.chain, &replay);
    stage_ops *ops = ops_of(&w.chain, &r.schedule);
    size_t n_checkpoints = 0, n_layer_stages = 0;
    for (size_t i = 0; i < w.chain.n_stages; i++) {
        const char *name = w.chain.stages[i].name;
        long layer = layer_of_name(name);
        bool first = layer >= 0 && (i == 0 || layer_of_name(w.chain.stages[i - 1].name) != layer);
        ck_assert_msg(ops[i].stored == (layer < 0), "stage %s: stored %d", name, ops[i].stored);
        ck_assert_msg(ops[i].checkpoint == first, "stage %s: F_ck %d", name, ops[i].checkpoint);
        ck_assert_msg(ops[i].recomputed == (layer >= 0), "stage %s: recomputed %zu times", name,
                      ops[i].recomputed);
        n_checkpoints += first;
        n_layer_stages += layer >= 0;
    }
    ck_assert_uint_eq(n_checkpoints, layers);
    ck_assert_int_eq(r.segments, (long)layers);
    ck_assert_uint_eq(n_layer_stages, g == CK_GRAN_OP ? 2 * layers : layers);
    ck_assert_uint_eq(replay.count[CK_F_CK], layers);
    ck_replay base = ck_test_baseline(&w.chain);
    ck_assert_uint_lt(replay.peak_bytes, base.peak_bytes);
    ck_assert(replay.time > base.time);
    free(ops);
    ck_planner_result_free(&r);
    ck_workload_free(&w);
}

START_TEST(every_checkpoints_exactly_the_layers_of_a_model)
{
    static const uint64_t layers[] = {1, 3, 6};
    static const char *const models[] = {"models/gpt2-tiny.json", "models/llama-tiny.json"};
    for (size_t m = 0; m < 2; m++)
        for (size_t k = 0; k < sizeof layers / sizeof layers[0]; k++) {
            check_model_layers(models[m], CK_GRAN_BLOCK, layers[k]);
            check_model_layers(models[m], CK_GRAN_OP, layers[k]);
        }
}
END_TEST

/* A chain of an embedding (stage 0), layer 1 over stages 1 and 2, layer 2 over stage 3, and
 * a head (stage 4), the marks ck_layers_mark would give it. */
static void hand_chain(ck_chain *c)
{
    ck_assert_int_eq(ck_chain_alloc(c, "hand", 5, NULL), CK_OK);
    static const struct {
        uint64_t out, saved, bwd_tmp;
        double fwd, bwd;
        size_t layer;
    } st[5] = {{2, 3, 0, 1, 1, 0}, {2, 5, 0, 2, 3, 1}, {2, 4, 0, 2, 3, 1}, {2, 6, 2, 4, 5, 2},
               {1, 2, 0, 1, 1, 0}};
    c->input_bytes = 1;
    c->loss_bwd_time = 1;
    c->layers = CK_CHAIN_LAYERS_FOUND;
    for (size_t i = 0; i < 5; i++) {
        ck_stage *s = &c->stages[i];
        s->out_bytes = st[i].out;
        s->saved_bytes = st[i].saved;
        s->bwd_tmp_bytes = st[i].bwd_tmp;
        s->fwd_time = st[i].fwd;
        s->bwd_time = st[i].bwd;
        s->layer = st[i].layer;
    }
}

/* The schedule and its figures, worked out by hand from the chain model's rules (live
 * bytes after each operation; peak = live after allocating + transient):
 *   F_all 0 4 | F_ck 1 6 | F_none 2 8 -> 6 | F_ck 3 8 | F_all 4 10 | loss 11
 *   B 4 13 -> 8 | F_all 3 14 | B 3 16 + 2 = 18 -> 6 | F_all 1 11 | F_all 2 15
 *   B 2 17 -> 11 | B 1 13 -> 6 | B 0 7 -> 1
 * peak 18 (B 3); time: forward 10 + loss 1 + backward 13 + recomputed 4 + 2 + 2 = 32. */
START_TEST(every_replays_to_the_figures_worked_out_by_hand)
{
    ck_chain c;
    hand_chain(&c);
    static const ck_action_kind kinds[] = {CK_F_ALL, CK_F_CK, CK_F_NONE, CK_F_CK, CK_F_ALL, CK_LOSS,
                                           CK_B,     CK_F_ALL, CK_B,   CK_F_ALL, CK_F_ALL, CK_B,
                                           CK_B,     CK_B};
    static const size_t stages[] = {0, 1, 2, 3, 4, 0, 4, 3, 3, 1, 2, 2, 1, 0};
    ck_replay replay;
    ck_plan_result r = plan_every(&c, &replay);
    ck_assert_uint_eq(r.schedule.n, sizeof kinds / sizeof kinds[0]);
    for (size_t k = 0; k < r.schedule.n; k++) {
        ck_assert_msg(r.schedule.actions[k].kind == kinds[k], "schedule[%zu]: kind", k);
        if (kinds[k] != CK_LOSS)
            ck_assert_msg(r.schedule.actions[k].stage == stages[k], "schedule[%zu]: stage", k);
    }
    ck_assert_uint_eq(replay.peak_bytes, 18);
    ck_assert_double_eq(replay.time, 32);
    ck_assert_int_eq(r.segments, 2);
    ck_planner_result_free(&r);
    /* a chain file names no layers: each stage is one, stage 0 included, but for the last,
     * the head the loss reads, stored */
    c.layers = CK_CHAIN_NO_LAYERS;
    r = plan_every(&c, &replay);
    ck_assert_int_eq(r.segments, 4);
    ck_assert_uint_eq(replay.count[CK_F_CK], 4);
    ck_assert_uint_eq(replay.count[CK_F_NONE], 0);
    ck_assert_uint_eq(replay.count[CK_F_ALL], 1 + 4);
    ck_planner_result_free(&r);
    ck_chain_free(&c);
}
END_TEST

/* Its smallest budget is its peak; below, ck_planner_run says so (exit 3 on the command
 * line); at it and above, the plan is its schedule, also where storing everything would fit
 * (users compare against every layer checkpointed, not against the baseline). */
START_TEST(every_minimum_is_its_peak)
{
    ck_chain c;
    hand_chain(&c);
    ck_planner_opts opts = {.slots = CK_DEFAULT_SLOTS};
    ck_plan_result r;
    ck_replay replay;
    uint64_t min_budget = 0;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_planner_run(&c, &ck_planner_every, 17, &opts, &r, &replay, &min_budget, &err),
                     CK_ERR_INFEASIBLE);
    ck_assert_uint_eq(min_budget, 18);
    ck_assert_int_eq(ck_planner_run(&c, &ck_planner_every, 18, &opts, &r, &replay, &min_budget, &err),
                     CK_OK);
    ck_assert_uint_eq(replay.peak_bytes, 18);
    ck_assert_uint_eq(replay.count[CK_F_CK], 2);
    ck_planner_result_free(&r);
    ck_assert_int_eq(ck_planner_run(&c, &ck_planner_every, UINT64_MAX, &opts, &r, &replay, &min_budget,
                                    &err), CK_OK);
    ck_assert_uint_eq(replay.peak_bytes, 18);
    ck_assert_uint_eq(replay.count[CK_F_CK], 2);
    ck_planner_result_free(&r);
    ck_chain_free(&c);
}
END_TEST

/* A model whose layers were not found: every refuses it at any budget, even one that holds
 * the baseline, rather than checkpointing something else. */
START_TEST(every_refuses_a_model_without_layers)
{
    ck_chain c;
    hand_chain(&c);
    c.layers = CK_CHAIN_LAYERS_UNKNOWN;
    ck_planner_opts opts = {.slots = CK_DEFAULT_SLOTS};
    ck_plan_result r;
    ck_replay replay;
    uint64_t min_budget = 0;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_planner_run(&c, &ck_planner_every, UINT64_MAX, &opts, &r, &replay, &min_budget,
                                    &err),
                     CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "model hand has no layers"), "%s", err.msg);
    ck_planner_result_free(&r);
    ck_chain_free(&c);
}
END_TEST

/* Random layer marks: runs of stages of one layer, layers adjacent or apart, stages in none
 * between, as ck_layers_mark gives a model's (a layer's stages are consecutive). */
static void mark_random_layers(ck_chain *c, ck_rng *rng)
{
    size_t layer = 0;
    bool open = false; /* the stage before is in a layer that this one may continue */
    c->layers = CK_CHAIN_LAYERS_FOUND;
    for (size_t i = 0; i < c->n_stages; i++) {
        uint64_t pick = ck_rng_below(rng, 3); /* 0: no layer, 1: a new one, 2: the same */
        if (pick != 0 && (pick == 1 || !open))
            layer++;
        open = pick != 0;
        c->stages[i].layer = open ? layer : 0;
    }
}

/* On random chains, with and without layers: every recomputes each stage of a layer
 * exactly once and stores the others, and takes at least the time of storing everything.
 * Its peak may pass the baseline's here: a layer recomputed in the backward runs its
 * forward transient beside live gradients, which random transients can outweigh (models:
 * every_checkpoints_exactly_the_layers_of_a_model). */
START_TEST(every_is_between_storing_everything_and_recomputing)
{
    ck_rng rng;
    ck_rng_seed(&rng, 2016);
    for (int trial = 0; trial < 300; trial++) {
        ck_chain c;
        ck_assert_int_eq(ck_chaingen_random(&c, 1 + (size_t)(trial % 12), 9, 10, &rng, NULL), CK_OK);
        if (trial % 2)
            mark_random_layers(&c, &rng);
        ck_replay replay, base = ck_test_baseline(&c);
        ck_plan_result r = plan_every(&c, &replay);
        size_t L = c.n_stages;
        ck_assert(replay.time >= base.time);
        stage_ops *ops = ops_of(&c, &r.schedule);
        for (size_t i = 0; i < L; i++) {
            bool in_layer = c.layers == CK_CHAIN_NO_LAYERS ? i + 1 < L : c.stages[i].layer > 0;
            ck_assert(ops[i].stored == !in_layer);
            ck_assert_uint_eq(ops[i].recomputed, in_layer);
        }
        free(ops);
        ck_planner_result_free(&r);
        ck_chain_free(&c);
    }
}
END_TEST

static Suite *every_suite(void)
{
    Suite *s = suite_create("every");
    TCase *tc = tcase_create("every");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, every_checkpoints_exactly_the_layers_of_a_model);
    tcase_add_test(tc, every_replays_to_the_figures_worked_out_by_hand);
    tcase_add_test(tc, every_minimum_is_its_peak);
    tcase_add_test(tc, every_refuses_a_model_without_layers);
    tcase_add_test(tc, every_is_between_storing_everything_and_recomputing);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(every_suite)
