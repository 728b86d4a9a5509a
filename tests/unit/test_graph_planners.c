#include "planner/graph_planners.h"

#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_main.h"

/* A random training graph: f forward nodes, each reading one to three earlier ones (a
 * chain with skips), the loss reading the last, and per forward node v in reverse a
 * gradient reading v, v's inputs and the previous gradient. Sizes 1..50, costs 1..9. */
static void random_graph(unsigned seed, size_t f, ck_graph *g)
{
    size_t n = 2 * f + 1;
    srand(seed);
    *g = (ck_graph){.name = strdup("random"), .n_nodes = n, .nodes = calloc(n, sizeof(ck_graph_node))};
    ck_assert(g->name && g->nodes);
    for (size_t v = 0; v < n; v++) {
        ck_graph_node *nd = &g->nodes[v];
        nd->name = strdup("v");
        nd->bytes = 1 + (uint64_t)(rand() % 50);
        nd->cost = 1 + rand() % 9;
        nd->backward = v >= f;
        nd->inputs = calloc(5, sizeof *nd->inputs);
        ck_assert(nd->name && nd->inputs);
        bool in[2 * 64 + 1] = {false};
        if (v > 0 && v < f) {
            in[v - 1] = true;
            for (int k = rand() % 3; k > 0; k--)
                in[(size_t)rand() % v] = true;
        } else if (v == f) {
            in[f - 1] = true;
        } else if (v > f) {
            size_t fw = n - 1 - v; /* the forward node this is the gradient of */
            in[fw] = in[v - 1] = true;
            if (fw > 0)
                in[fw - 1] = true;
        }
        for (size_t u = 0; u < v; u++)
            if (in[u] && nd->n_inputs < 5)
                nd->inputs[nd->n_inputs++] = u;
    }
    ck_err err;
    ck_assert_msg(ck_graph_finish(g, &err) == CK_OK, "%s", err.msg);
}

static ck_graph_replay baseline_of(const ck_graph *g)
{
    ck_graph_schedule s;
    ck_graph_replay r;
    ck_err err;
    ck_assert_int_eq(ck_graph_schedule_baseline(g, &s, &err), CK_OK);
    ck_assert_int_eq(ck_graph_replay_schedule(g, &s, &r, &err), CK_OK);
    ck_graph_schedule_free(&s);
    return r;
}

/* fast's promise at every budget up to the baseline's peak: its smallest budget L (what it
 * says at budget 0) is met, and so is every budget above it, each by a valid schedule
 * within the budget; below L it either still plans within the budget or says L. */
START_TEST(fast_fits_every_budget_from_its_smallest)
{
    for (unsigned seed = 1; seed <= 8; seed++) {
        ck_graph g;
        random_graph(seed, 4 + seed % 5, &g);
        ck_graph_replay base = baseline_of(&g);
        ck_graph_plan_result res;
        ck_graph_replay r;
        uint64_t least = 0, mb;
        ck_err err;
        ck_assert_int_eq(ck_graph_planners_run(&g, &ck_graph_planner_fast, 0, NULL, &res, &r, &least,
                                               &err), CK_ERR_INFEASIBLE);
        ck_graph_plan_result_free(&res);
        ck_assert(least > 0 && least <= base.peak_bytes);
        for (uint64_t b = 1; b <= base.peak_bytes; b += 1 + base.peak_bytes / 97) {
            mb = 0;
            int rc = ck_graph_planners_run(&g, &ck_graph_planner_fast, b, NULL, &res, &r, &mb, &err);
            if (rc == CK_OK) {
                ck_assert_uint_le(r.peak_bytes, b);
                ck_assert(r.time >= base.time);
            } else {
                ck_assert_msg(rc == CK_ERR_INFEASIBLE && b < least && mb == least,
                              "seed %u budget %llu: status %d, smallest %llu of %llu: %s", seed,
                              (unsigned long long)b, rc, (unsigned long long)mb,
                              (unsigned long long)least, err.msg);
            }
            ck_graph_plan_result_free(&res);
        }
        ck_assert_int_eq(ck_graph_planners_run(&g, &ck_graph_planner_fast, least, NULL, &res, &r, &mb,
                                               &err), CK_OK);
        ck_graph_plan_result_free(&res);
        ck_graph_free(&g);
    }
}
END_TEST

/* At the baseline's peak fast schedules nothing twice: the fastest schedule fits. */
START_TEST(fast_recomputes_nothing_when_everything_fits)
{
    for (unsigned seed = 1; seed <= 6; seed++) {
        ck_graph g;
        random_graph(seed, 6, &g);
        ck_graph_replay base = baseline_of(&g), r;
        ck_graph_plan_result res;
        uint64_t mb;
        ck_err err;
        ck_assert_int_eq(ck_graph_planners_run(&g, &ck_graph_planner_fast, base.peak_bytes, NULL,
                                               &res, &r, &mb, &err), CK_OK);
        ck_assert_uint_eq(r.computes, g.n_nodes);
        ck_assert_double_eq(r.time, base.time);
        ck_graph_plan_result_free(&res);
        ck_graph_free(&g);
    }
}
END_TEST

/* none is the baseline, and says its peak when it does not fit. */
START_TEST(none_is_the_baseline)
{
    ck_graph g;
    random_graph(3, 6, &g);
    ck_graph_replay base = baseline_of(&g), r;
    ck_graph_plan_result res;
    uint64_t mb = 0;
    ck_err err;
    ck_assert_int_eq(ck_graph_planners_run(&g, &ck_graph_planner_none, base.peak_bytes - 1, NULL,
                                           &res, &r, &mb, &err), CK_ERR_INFEASIBLE);
    ck_assert_uint_eq(mb, base.peak_bytes);
    ck_graph_plan_result_free(&res);
    ck_assert_int_eq(ck_graph_planners_run(&g, &ck_graph_planner_none, base.peak_bytes, NULL, &res,
                                           &r, &mb, &err), CK_OK);
    ck_assert_uint_eq(r.peak_bytes, base.peak_bytes);
    ck_graph_plan_result_free(&res);
    ck_graph_free(&g);
}
END_TEST

/* A planner that breaks its promise is caught by the replay. */
static int plan_over_budget(const ck_graph *g, uint64_t budget, const ck_graph_planner_opts *opts,
                            ck_graph_plan_result *result, uint64_t *min_budget, ck_err *err)
{
    (void)budget;
    (void)opts;
    (void)min_budget;
    return ck_graph_schedule_baseline(g, &result->schedule, err);
}

START_TEST(run_checks_what_a_planner_returns)
{
    const ck_graph_planner liar = {"liar", "", plan_over_budget, false};
    ck_graph g;
    random_graph(5, 5, &g);
    ck_graph_plan_result res;
    ck_graph_replay r;
    uint64_t mb;
    ck_err err;
    ck_assert_int_eq(ck_graph_planners_run(&g, &liar, 1, NULL, &res, &r, &mb, &err), CK_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "planner liar returned a schedule whose replayed peak"), "%s", err.msg);
    ck_graph_plan_result_free(&res);
    ck_graph_free(&g);
}
END_TEST

START_TEST(registry_finds_by_name)
{
    ck_assert_ptr_eq(ck_graph_planners[0], &ck_graph_planner_fast);
    ck_assert_ptr_eq(ck_graph_planners_find("none"), &ck_graph_planner_none);
    ck_assert_ptr_eq(ck_graph_planners_find("fast"), &ck_graph_planner_fast);
    ck_assert_ptr_null(ck_graph_planners_find("dp"));
}
END_TEST

static Suite *graph_planners_suite(void)
{
    Suite *s = suite_create("graph_planners");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, fast_fits_every_budget_from_its_smallest);
    tcase_add_test(tc, fast_recomputes_nothing_when_everything_fits);
    tcase_add_test(tc, none_is_the_baseline);
    tcase_add_test(tc, run_checks_what_a_planner_returns);
    tcase_add_test(tc, registry_finds_by_name);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(graph_planners_suite)
