#include "planner/graph_chain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/graph_planners.h"
#include "planner/plan_dp.h"
#include "planner/planner.h"
#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"

/* A random chain made graph-shaped: x_0 of 0 bytes and x̄ = x. */
static ck_chain random_chain(ck_rng *rng, size_t L)
{
    ck_chain c;
    ck_err err;
    ck_assert_int_eq(ck_chaingen_random(&c, L, 8, 5, rng, &err), CK_OK);
    c.input_bytes = 0;
    for (size_t i = 0; i < L; i++)
        c.stages[i].saved_bytes = c.stages[i].out_bytes;
    return c;
}

static void set_node(ck_graph_node *v, bool backward, double cost, uint64_t bytes, uint64_t tmp,
                     size_t n, const size_t *inputs)
{
    *v = (ck_graph_node){.name = strdup(backward ? "b" : "f"), .backward = backward, .cost = cost,
                         .bytes = bytes, .transient_bytes = tmp, .n_inputs = n,
                         .inputs = malloc((n ? n : 1) * sizeof *inputs)};
    memcpy(v->inputs, inputs, n * sizeof *inputs);
}

/* The graph of c, written from graph_chain.h's description. */
static ck_graph graph_of(const ck_chain *c)
{
    size_t L = c->n_stages;
    ck_graph g = {.name = strdup("chain"), .n_nodes = 2 * L + 1};
    g.nodes = calloc(g.n_nodes, sizeof *g.nodes);
    for (size_t i = 0; i < L; i++) {
        const ck_stage *st = &c->stages[i];
        set_node(&g.nodes[i], false, st->fwd_time, st->out_bytes, st->fwd_tmp_bytes, i > 0,
                 (size_t[]){i - 1});
        size_t grad = i + 1 == L ? L : 2 * L - i - 1;
        size_t three[] = {i - 1, i, grad};
        set_node(&g.nodes[2 * L - i], true, st->bwd_time, i ? c->stages[i - 1].out_bytes : 0,
                 st->bwd_tmp_bytes, i ? 3 : 2, i ? three : three + 1);
    }
    set_node(&g.nodes[L], true, c->loss_bwd_time, c->stages[L - 1].out_bytes, c->loss_bwd_tmp_bytes,
             1, (size_t[]){L - 1});
    ck_err err;
    ck_assert_msg(ck_graph_finish(&g, &err) == CK_OK, "%s", err.msg);
    return g;
}

START_TEST(recognised_and_read_back)
{
    ck_rng rng;
    ck_rng_seed(&rng, 5);
    for (unsigned k = 0; k < 50; k++) {
        ck_chain c = random_chain(&rng, 1 + k % 7), back;
        ck_graph g = graph_of(&c);
        bool is = false;
        ck_err err;
        ck_assert_int_eq(ck_graph_chain_of(&g, &is, &back, &err), CK_OK);
        ck_assert(is);
        ck_assert_uint_eq(back.n_stages, c.n_stages);
        ck_assert_uint_eq(back.input_bytes, 0);
        for (size_t i = 0; i < c.n_stages; i++) {
            ck_assert_uint_eq(back.stages[i].out_bytes, c.stages[i].out_bytes);
            ck_assert_uint_eq(back.stages[i].saved_bytes, c.stages[i].saved_bytes);
            ck_assert_uint_eq(back.stages[i].fwd_tmp_bytes, c.stages[i].fwd_tmp_bytes);
            ck_assert_uint_eq(back.stages[i].bwd_tmp_bytes, c.stages[i].bwd_tmp_bytes);
            ck_assert(back.stages[i].fwd_time == c.stages[i].fwd_time);
            ck_assert(back.stages[i].bwd_time == c.stages[i].bwd_time);
        }
        ck_assert(back.loss_bwd_time == c.loss_bwd_time);
        ck_chain_free(&back);
        /* one more link, or a backward node of another size: no longer a chain */
        size_t L = c.n_stages, *in = g.nodes[2 * L].inputs;
        g.nodes[2 * L].bytes += 1;
        ck_assert_int_eq(ck_graph_chain_of(&g, &is, &back, &err), CK_OK);
        ck_assert(!is);
        g.nodes[2 * L].bytes -= 1;
        if (L > 1) {
            g.nodes[L].inputs = realloc(g.nodes[L].inputs, 2 * sizeof *in);
            g.nodes[L].inputs[0] = 0;
            g.nodes[L].inputs[1] = L - 1;
            g.nodes[L].n_inputs = 2;
            ck_assert_int_eq(ck_graph_chain_of(&g, &is, &back, &err), CK_OK);
            ck_assert(!is);
        }
        ck_graph_free(&g);
        ck_chain_free(&c);
    }
}
END_TEST

/* dp's schedules, turned into graph schedules, replay valid, no higher and no slower. */
static void check_converted(const ck_graph *g, const ck_chain *c, const ck_schedule *s)
{
    ck_replay cr;
    ck_graph_replay gr;
    ck_graph_schedule gs = {0};
    ck_err err;
    ck_assert_int_eq(ck_schedule_replay(c, s, &cr, NULL, NULL, &err), CK_OK);
    ck_assert_int_eq(ck_graph_chain_schedule(g, c, s, &gs, &err), CK_OK);
    ck_assert_msg(ck_graph_replay_schedule(g, &gs, &gr, &err) == CK_OK, "%s", err.msg);
    ck_assert_uint_le(gr.peak_bytes, cr.peak_bytes);
    ck_assert(gr.time <= cr.time + 1e-9);
    ck_graph_schedule_free(&gs);
}

/* On the graph of a chain, fast is never worse than dp: at every budget from dp's smallest
 * to the baseline's peak, it fits whenever dp does and takes no longer than dp's replay; its
 * smallest budget is at most dp's. */
START_TEST(fast_never_worse_than_dp)
{
    ck_rng rng;
    ck_rng_seed(&rng, 11);
    for (unsigned k = 0; k < 40; k++) {
        ck_chain c = random_chain(&rng, 2 + k % 5);
        ck_graph g = graph_of(&c);
        ck_schedule base = {0}, low = {0};
        uint64_t dp_min = 0;
        ck_err err;
        ck_assert_int_eq(ck_schedule_baseline(&c, &base, &err), CK_OK);
        ck_assert_int_eq(ck_plan_dp_min_peak(&c, &dp_min, &low, &err), CK_OK);
        check_converted(&g, &c, &base);
        check_converted(&g, &c, &low);
        ck_replay br;
        ck_assert_int_eq(ck_schedule_replay(&c, &base, &br, NULL, NULL, &err), CK_OK);
        ck_graph_plan_result fr;
        ck_graph_replay frr;
        uint64_t fast_min = 0;
        int rc = ck_graph_planners_run(&g, &ck_graph_planner_fast, 0, NULL, &fr, &frr, &fast_min, &err);
        ck_graph_plan_result_free(&fr);
        ck_assert_msg(rc == CK_ERR_INFEASIBLE ? fast_min <= dp_min : rc == CK_OK,
                      "chain %u: fast's smallest %llu, dp's %llu", k,
                      (unsigned long long)fast_min, (unsigned long long)dp_min);
        for (uint64_t b = dp_min; b <= br.peak_bytes; b++) {
            ck_planner_opts po = {.slots = CK_DEFAULT_SLOTS};
            ck_plan_result dr;
            ck_replay drr;
            uint64_t m;
            ck_assert_int_eq(ck_planner_run(&c, &ck_planner_dp, b, &po, &dr, &drr, &m, &err), CK_OK);
            check_converted(&g, &c, &dr.schedule);
            ck_assert_msg(ck_graph_planners_run(&g, &ck_graph_planner_fast, b, NULL, &fr, &frr, &m,
                                                &err) == CK_OK, "chain %u budget %llu: %s", k,
                          (unsigned long long)b, err.msg);
            ck_assert_msg(frr.time <= drr.time + 1e-9, "chain %u budget %llu: fast %g, dp %g", k,
                          (unsigned long long)b, frr.time, drr.time);
            ck_graph_plan_result_free(&fr);
            ck_planner_result_free(&dr);
        }
        ck_schedule_free(&base);
        ck_schedule_free(&low);
        ck_graph_free(&g);
        ck_chain_free(&c);
    }
}
END_TEST

static Suite *graph_chain_suite(void)
{
    Suite *s = suite_create("graph_chain");
    TCase *tc = tcase_create("graph_chain");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, recognised_and_read_back);
    tcase_add_test(tc, fast_never_worse_than_dp);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(graph_chain_suite)
