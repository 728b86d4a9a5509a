/* planner/layers: which stages are decoder layers, a schedule seen per layer, and the
 * schedules of checkpointing segments as units (what `ckplan emit` expresses). */
#include "planner/layers.h"

#include <stdlib.h>
#include <string.h>

#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/plan_run.h"

static ck_replay replay_ok(const ck_chain *c, const ck_schedule *s)
{
    ck_replay r;
    ck_err err;
    ck_assert_msg(ck_schedule_replay(c, s, &r, NULL, NULL, &err) == CK_OK, "%s", err.msg);
    return r;
}

/* Every stage of an L-stage chain its own layer. */
static void one_layer_a_stage(ck_layers *l, size_t L, size_t *stage_layer, size_t *first, size_t *end)
{
    static const char *names[8] = {"h.0", "h.1", "h.2", "h.3", "h.4", "h.5", "h.6", "h.7"};
    for (size_t i = 0; i < L; i++) {
        stage_layer[i] = first[i] = i;
        end[i] = i + 1;
    }
    *l = (ck_layers){.n_stages = L, .n_layers = L, .block = "h", .block_len = 1,
                     .stage_layer = stage_layer, .first = first, .end = end, .names = names};
}

/* Every set of disjoint segments of chains of up to 6 stages (each stage: outside, the start
 * of a segment, or inside the one before) gives a valid schedule: every stage stored once
 * and run backward once, F_ck once a segment, F_none on the rest of it, the segments' forward
 * time spent again. Seen per layer (one a stage), it checkpoints exactly the segments' stages,
 * is exact when every segment is one stage, and otherwise drops as many layer inputs as the
 * segments' stages after their first. */
START_TEST(every_segmentation_is_valid_and_seen_as_it_is)
{
    ck_rng rng;
    ck_rng_seed(&rng, 12);
    for (size_t L = 1; L <= 6; L++) {
        ck_chain c;
        ck_assert_int_eq(ck_chaingen_random(&c, L, 6, 10, &rng, NULL), CK_OK);
        size_t codes = 1;
        for (size_t i = 0; i < L; i++)
            codes *= 3;
        for (size_t code = 0; code < codes; code++) {
            size_t first[8], end[8], n = 0, inside = 0, x = code;
            bool in_segment[8] = {false}, valid = true;
            double extra = 0;
            for (size_t i = 0; i < L; i++, x /= 3) {
                if (x % 3 == 1) {
                    first[n] = i;
                    end[n++] = i + 1;
                } else if (x % 3 == 2) {
                    valid &= n > 0 && end[n - 1] == i;
                    if (n > 0)
                        end[n - 1] = i + 1;
                    inside++;
                }
                in_segment[i] = x % 3 != 0;
                extra += in_segment[i] ? c.stages[i].fwd_time : 0;
            }
            if (!valid)
                continue;
            ck_schedule s;
            ck_assert_int_eq(ck_layers_segments_schedule(&c, first, end, n, &s, NULL), CK_OK);
            ck_replay r = replay_ok(&c, &s);
            ck_assert_uint_eq(r.count[CK_F_ALL], L);
            ck_assert_uint_eq(r.count[CK_F_CK], n);
            ck_assert_uint_eq(r.count[CK_F_NONE], inside);
            ck_assert_uint_eq(r.count[CK_B], L);
            ck_assert_double_eq_tol(r.time, ck_test_baseline(&c).time + extra, 1e-9);

            ck_layers l;
            size_t sl[8], lf[8], le[8];
            one_layer_a_stage(&l, L, sl, lf, le);
            ck_layers_view v;
            ck_assert_int_eq(ck_layers_view_of(&l, &c, &s, &v, NULL), CK_OK);
            for (size_t i = 0; i < L; i++)
                ck_assert_int_eq(v.checkpointed[i], in_segment[i]);
            ck_assert_int_eq(v.exact, inside == 0);
            ck_assert_uint_eq(v.count[CK_LAYERS_INPUT_DROPPED], inside);
            ck_assert_uint_eq(v.count[CK_LAYERS_NESTED] + v.count[CK_LAYERS_NON_LAYER], 0);
            ck_layers_view_free(&v);
            ck_schedule_free(&s);
        }
        ck_chain_free(&c);
    }
}
END_TEST

/* gpt2-tiny: embed..drop_embed (the embedding's output, which dropout does not save, is
 * no stage's end), h.0..h.3, ln_f, lm_head at block granularity; two stages a
 * layer at op granularity. */
START_TEST(gpt2_tiny_layers_are_its_block_instances)
{
    ck_workload w;
    fx_workload_load("models/gpt2-tiny.json", &w);
    ck_layers l;
    ck_err err;
    ck_assert_msg(ck_layers_find(w.model, w.chain.n_stages, w.stage_first, &l, &err) == CK_OK, "%s", err.msg);
    ck_assert_uint_eq(l.n_layers, 4);
    ck_assert_uint_eq(l.block_len, 1);
    ck_assert_int_eq(l.block[0], 'h');
    const size_t want[7] = {CK_LAYERS_NO_LAYER, 0, 1, 2, 3, CK_LAYERS_NO_LAYER, CK_LAYERS_NO_LAYER};
    ck_assert_uint_eq(w.chain.n_stages, 7);
    for (size_t i = 0; i < 7; i++)
        ck_assert_uint_eq(l.stage_layer[i], want[i]);
    ck_assert_str_eq(l.names[3], "h.3");
    ck_layers_free(&l);
    ck_workload_free(&w);

    ck_workload_opts o;
    ck_workload_opts_default(&o);
    o.granularity = CK_GRAN_OP;
    ck_assert_int_eq(ck_workload_load("models/gpt2-tiny.json", &o, &w, &err), CK_OK);
    ck_assert_msg(ck_layers_find(w.model, w.chain.n_stages, w.stage_first, &l, &err) == CK_OK, "%s", err.msg);
    ck_assert_uint_eq(l.n_layers, 4);
    for (size_t k = 0; k < 4; k++)
        ck_assert_uint_eq(l.end[k] - l.first[k], 2);

    /* Recomputing everything as one Chen segment: embed recomputed, inputs dropped, and no
     * layer stored. */
    ck_schedule s;
    size_t first = 0, end = w.chain.n_stages - 1;
    ck_assert_int_eq(ck_layers_segments_schedule(&w.chain, &first, &end, 1, &s, NULL), CK_OK);
    ck_layers_view v;
    ck_assert_int_eq(ck_layers_view_of(&l, &w.chain, &s, &v, NULL), CK_OK);
    ck_assert_uint_eq(v.n_checkpointed, 4);
    ck_assert_uint_eq(v.count[CK_LAYERS_NON_LAYER], 2); /* embed..drop_embed, ln_f */
    ck_assert_uint_eq(v.first[CK_LAYERS_NON_LAYER], 0);
    ck_assert_uint_eq(v.count[CK_LAYERS_INPUT_DROPPED], 4);
    ck_assert_int_eq(v.exact, false);
    char what[1024];
    ck_layers_describe(&l, &w.chain, &v, CK_LAYERS_NON_LAYER, what, sizeof what);
    ck_assert_msg(strstr(what, "2 stages that are no decoder layer (the first: embed..drop_embed)"), "%s", what);
    ck_layers_view_free(&v);
    ck_schedule_free(&s);
    ck_layers_free(&l);
    ck_workload_free(&w);
}
END_TEST

START_TEST(no_layers_are_refused)
{
    ck_layers l;
    ck_err err;
    size_t first[2] = {0, 1};
    ck_assert_int_eq(ck_layers_find(NULL, 1, first, &l, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "model.path: expected a model file") && strstr(err.msg, "chain file"),
                  "%s", err.msg);
    ck_model *flat = fx_load("{'format': 'ckplan-model/1', 'name': 'flat', 'dtype': 'f32', 'dims': {'B': 2, 'W': 4},"
                             " 'inputs': [{'name': 'x', 'shape': ['B', 'W'], 'dtype': 'f32'},"
                             "            {'name': 'y', 'shape': ['B', 'W'], 'dtype': 'f32'}],"
                             " 'nodes': [{'name': 'fc', 'op': 'linear', 'out': 'W', 'inputs': ['x']},"
                             "           {'name': 'loss', 'op': 'mse', 'inputs': ['fc', 'y']}]}");
    ck_assert_int_eq(ck_layers_find(flat, 1, first, &l, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "stage_info: expected stages that are instances of a repeated block") &&
                  strstr(err.msg, "model flat repeats no block"), "%s", err.msg);
    ck_model_free(flat);
}
END_TEST

/* Two repeated blocks: which are the decoder layers is ambiguous. */
START_TEST(two_blocks_are_refused)
{
    ck_model *m = fx_load("{'format': 'ckplan-model/1', 'name': 'two', 'dtype': 'f32', 'dims': {'B': 2, 'W': 4},"
                          " 'inputs': [{'name': 'x', 'shape': ['B', 'W'], 'dtype': 'f32'},"
                          "            {'name': 'y', 'shape': ['B', 'W'], 'dtype': 'f32'}],"
                          " 'blocks': {'l': {'input': 'i', 'nodes': [{'name': 'fc', 'op': 'linear', 'out': 'W', 'inputs': ['i']}]}},"
                          " 'nodes': [{'name': 'a', 'block': 'l', 'repeat': 2, 'inputs': ['x']},"
                          "           {'name': 'b', 'block': 'l', 'repeat': 2, 'inputs': ['a']},"
                          "           {'name': 'loss', 'op': 'mse', 'inputs': ['b', 'y']}]}");
    ck_layers l;
    ck_err err;
    size_t first[5] = {0, 1, 2, 3, 4};
    ck_assert_int_eq(ck_layers_find(m, 4, first, &l, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "got two blocks (a and b)"), "%s", err.msg);
    ck_model_free(m);
}
END_TEST

static Suite *layers_suite(void)
{
    Suite *s = suite_create("layers");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, every_segmentation_is_valid_and_seen_as_it_is);
    tcase_add_test(tc, gpt2_tiny_layers_are_its_block_instances);
    tcase_add_test(tc, no_layers_are_refused);
    tcase_add_test(tc, two_blocks_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(layers_suite)
