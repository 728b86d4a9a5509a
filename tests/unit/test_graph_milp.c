#include "planner/graph_milp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check_main.h"
#include "tests/unit/graph_brute.h"
#include "tests/unit/graphgen.h"

static bool same_time(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(1, fmax(fabs(a), fabs(b)));
}

static ck_graph_replay replay_of(const ck_graph *g, const ck_graph_schedule *s)
{
    ck_graph_replay r;
    ck_err err;
    ck_assert_msg(ck_graph_replay_schedule(g, s, &r, &err) == CK_OK, "%s", err.msg);
    return r;
}

static ck_graph_replay baseline(const ck_graph *g)
{
    ck_graph_schedule s;
    ck_err err;
    ck_assert_msg(ck_graph_schedule_baseline(g, &s, &err) == CK_OK, "%s", err.msg);
    ck_graph_replay r = replay_of(g, &s);
    ck_graph_schedule_free(&s);
    return r;
}

/* milp on `scaled` (g with every byte taken some number of times) at big_budget, against the
 * brute force of Checkmate's class on g at budget (the same schedules fit): the same time,
 * proven optimal, replayed within the budget; or infeasible, exactly where the brute force
 * finds nothing. */
static void check_budget(const ck_graph *g, const ck_graph *scaled, uint64_t budget,
                         uint64_t big_budget, unsigned graph_no)
{
    ck_err err = {{0}}, berr;
    ck_graph_plan_result r;
    uint64_t min_budget = 1;
    double best = 0;
    int want = ck_graph_brute_best(g, CK_GRAPH_BRUTE_STAGED, budget, &best, &berr);
    int rc = ck_graph_planner_milp.plan(scaled, big_budget, NULL, &r, &min_budget, &err);
    ck_assert_msg(rc == want, "graph %u budget %llu: milp %d (%s), brute force %d", graph_no,
                  (unsigned long long)budget, rc, err.msg, want);
    if (rc != CK_OK) {
        ck_assert_uint_eq(r.schedule.n, 0);
        ck_assert_ptr_null(r.status);
        ck_assert_uint_eq(min_budget, 0);
        return;
    }
    ck_graph_replay rp = replay_of(scaled, &r.schedule);
    ck_assert_msg(rp.peak_bytes <= big_budget, "graph %u budget %llu: peak %llu", graph_no,
                  (unsigned long long)budget, (unsigned long long)rp.peak_bytes);
    ck_assert_msg(same_time(rp.time, best), "graph %u budget %llu: milp %.17g, brute force %.17g",
                  graph_no, (unsigned long long)budget, rp.time, best);
    ck_assert_str_eq(r.status, "optimal");
    ck_assert_msg(r.bound <= rp.time && r.gap >= 0 && r.gap <= 1e-6, "bound %g gap %g", r.bound,
                  r.gap);
    ck_graph_schedule_free(&r.schedule);
}

/* Every budget from one below the least peak of all schedules to the baseline's peak; on a
 * scaled graph, each also one byte below (where only the schedules of one unit less fit). */
static void check_graph(const ck_graph *g, const ck_graph *scaled, uint64_t scale, unsigned no)
{
    ck_err err;
    uint64_t least_all = 0, least_staged = 0;
    ck_assert_int_eq(ck_graph_brute_min_peak(g, CK_GRAPH_BRUTE_ALL, &least_all, &err), CK_OK);
    ck_assert_int_eq(ck_graph_brute_min_peak(g, CK_GRAPH_BRUTE_STAGED, &least_staged, &err),
                     CK_OK);
    ck_assert_uint_le(least_all, least_staged);
    uint64_t top = baseline(g).peak_bytes;
    ck_assert_uint_ge(top, least_staged);
    for (uint64_t b = least_all - 1; b <= top; b++) {
        check_budget(g, scaled, b, b * scale, no);
        if (scale > 1)
            check_budget(g, scaled, b - 1, b * scale - 1, no);
    }
}

static ck_graph graph_from(ck_rng *rng, size_t forward)
{
    ck_graph g;
    ck_err err;
    ck_assert_msg(ck_graphgen_random(&g, forward, 8, rng, &err) == CK_OK, "%s", err.msg);
    return g;
}

/* The k-th random graph of a test: 3, 4 or 5 forward nodes in turn (6 to 10 nodes). */
static ck_graph random_graph(ck_rng *rng, unsigned k)
{
    return graph_from(rng, 3 + k % 3);
}

static ck_graph seeded_graph(uint64_t seed, size_t forward)
{
    ck_rng rng;
    ck_rng_seed(&rng, seed);
    return graph_from(&rng, forward);
}

/* Loop test: _i is the number of forward nodes less 3, each a test of its own. */
START_TEST(matches_brute_force_on_random_graphs)
{
    ck_rng rng;
    ck_rng_seed(&rng, 13 + (uint64_t)_i);
    for (unsigned k = 0; k < 8; k++) {
        ck_graph g = graph_from(&rng, 3 + (size_t)_i);
        check_graph(&g, &g, 1, k);
        ck_graph_free(&g);
    }
}
END_TEST

/* Nodes with transient bytes (a kernel's workspace, as in the graphs of models): the peak
 * right after a compute adds them, in the MILP as in the brute force. */
START_TEST(transients_match_brute_force)
{
    ck_rng rng;
    ck_rng_seed(&rng, 29);
    for (unsigned k = 0; k < 6; k++) {
        ck_graph g = random_graph(&rng, k);
        for (size_t v = 0; v < g.n_nodes; v++)
            g.nodes[v].transient_bytes = ck_rng_below(&rng, 4) == 0 ? 1 + ck_rng_below(&rng, 6) : 0;
        check_graph(&g, &g, 1, k);
        ck_graph_free(&g);
    }
}
END_TEST

/* Bytes in the gigabytes, budgets to the byte: a budget one byte below a schedule's peak must
 * refuse it although the two differ by 1e-10 of the budget, below CBC's tolerances. */
START_TEST(exact_to_the_byte_at_tens_of_gigabytes)
{
    ck_rng rng, again;
    ck_rng_seed(&rng, 1013);
    for (unsigned k = 0; k < 6; k++) {
        again = rng;
        ck_graph g = random_graph(&rng, k), big = random_graph(&again, k);
        for (size_t v = 0; v < big.n_nodes; v++)
            big.nodes[v].bytes *= 2000000000;
        check_graph(&g, &big, 2000000000, k);
        ck_graph_free(&g);
        ck_graph_free(&big);
    }
}
END_TEST

/* A graph where some schedule fits a smaller budget than any of Checkmate's class: milp
 * says infeasible there, and names the class. */
START_TEST(infeasible_where_only_schedules_outside_the_class_fit)
{
    ck_rng rng;
    ck_rng_seed(&rng, 7);
    for (unsigned k = 0;; k++) {
        ck_err err;
        uint64_t all, staged;
        ck_assert_uint_lt(k, 3000);
        ck_graph g = random_graph(&rng, k);
        ck_assert_int_eq(ck_graph_brute_min_peak(&g, CK_GRAPH_BRUTE_ALL, &all, &err), CK_OK);
        ck_assert_int_eq(ck_graph_brute_min_peak(&g, CK_GRAPH_BRUTE_STAGED, &staged, &err), CK_OK);
        if (all < staged) {
            ck_graph_plan_result r;
            uint64_t min_budget;
            ck_assert_int_eq(ck_graph_planner_milp.plan(&g, staged - 1, NULL, &r, &min_budget, &err),
                             CK_ERR_INFEASIBLE);
            ck_assert_msg(strstr(err.msg, "Checkmate's class"), "%s", err.msg);
            ck_assert_int_eq(ck_graph_planner_milp.plan(&g, staged, NULL, &r, &min_budget, &err),
                             CK_OK);
            ck_graph_schedule_free(&r.schedule);
            ck_graph_free(&g);
            return;
        }
        ck_graph_free(&g);
    }
}
END_TEST

static ck_graph_plan_result plan_ok(const ck_graph *g, uint64_t budget,
                                    const ck_graph_planner_opts *opts)
{
    ck_graph_plan_result r;
    ck_err err;
    uint64_t min_budget;
    ck_assert_msg(ck_graph_planner_milp.plan(g, budget, opts, &r, &min_budget, &err) == CK_OK,
                  "%s", err.msg);
    ck_assert_uint_le(replay_of(g, &r.schedule).peak_bytes, budget);
    return r;
}

/* Warm-started from its own schedule at the least budget (which fits every larger one, and
 * is the optimum at some), milp still finds the optimum and proves it; from a schedule
 * outside the class (a compute after the last stage) too, which it leaves out. */
START_TEST(warm_starts_keep_it_exact)
{
    ck_rng rng;
    ck_rng_seed(&rng, 31);
    for (unsigned k = 0; k < 6; k++) {
        ck_err err;
        uint64_t least;
        ck_graph g = random_graph(&rng, k);
        ck_assert_int_eq(ck_graph_brute_min_peak(&g, CK_GRAPH_BRUTE_STAGED, &least, &err), CK_OK);
        ck_graph_plan_result first = plan_ok(&g, least, NULL);
        ck_graph_schedule outside;
        ck_assert_int_eq(ck_graph_schedule_baseline(&g, &outside, &err), CK_OK);
        ck_assert(ck_graph_schedule_push(&outside, CK_GRAPH_COMPUTE, 0));
        uint64_t top = baseline(&g).peak_bytes + g.nodes[0].bytes;
        ck_assert_uint_le(replay_of(&g, &outside).peak_bytes, top);
        for (uint64_t b = least; b <= top; b++)
            for (int w = 0; w < 2; w++) {
                ck_graph_planner_opts opts = {.warm_start = w ? &outside : &first.schedule};
                ck_graph_plan_result r = plan_ok(&g, b, &opts);
                double best;
                ck_assert_int_eq(ck_graph_brute_best(&g, CK_GRAPH_BRUTE_STAGED, b, &best, &err),
                                 CK_OK);
                ck_assert_msg(same_time(replay_of(&g, &r.schedule).time, best),
                              "graph %u budget %llu warm %d", k, (unsigned long long)b, w);
                ck_assert_str_eq(r.status, "optimal");
                ck_assert(same_time(r.bound, best));
                ck_graph_schedule_free(&r.schedule);
            }
        ck_graph_schedule_free(&outside);
        ck_graph_schedule_free(&first.schedule);
        ck_graph_free(&g);
    }
}
END_TEST

/* With no time to search, a warm start is the answer (never anything slower), and without
 * one there is none: milp does not call either optimal unless CBC proved it. */
START_TEST(time_limit_keeps_the_warm_start)
{
    ck_graph g = seeded_graph(77, 8);
    ck_err err;
    ck_graph_schedule base;
    ck_assert_int_eq(ck_graph_schedule_baseline(&g, &base, &err), CK_OK);
    ck_graph_replay br = replay_of(&g, &base);
    ck_graph_planner_opts opts = {.time_limit_s = 1e-6, .warm_start = &base};
    ck_graph_plan_result r = plan_ok(&g, br.peak_bytes, &opts);
    ck_assert_double_le(replay_of(&g, &r.schedule).time, br.time);
    ck_assert_msg(!strcmp(r.status, "time limit") || !strcmp(r.status, "optimal"), "%s", r.status);
    ck_graph_schedule_free(&r.schedule);
    opts.warm_start = NULL;
    uint64_t min_budget;
    ck_assert_int_eq(ck_graph_planner_milp.plan(&g, br.peak_bytes, &opts, &r, &min_budget, &err),
                     CK_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "time limit"), "%s", err.msg);
    ck_assert_uint_eq(r.schedule.n, 0);
    ck_graph_schedule_free(&base);
    ck_graph_free(&g);
}
END_TEST

START_TEST(stops_when_asked)
{
    ck_graph g = seeded_graph(3, 4);
    ck_err err;
    atomic_int stop = 1;
    ck_graph_planner_opts opts = {.stop = &stop};
    ck_graph_plan_result r;
    uint64_t min_budget;
    ck_assert_int_eq(ck_graph_planner_milp.plan(&g, UINT64_MAX / 2, &opts, &r, &min_budget, &err),
                     CK_INTERRUPTED);
    ck_assert_uint_eq(r.schedule.n, 0);
    ck_graph_free(&g);
}
END_TEST

START_TEST(an_empty_graph_is_planned_empty)
{
    ck_graph g = {.name = "", .loss = 0};
    ck_graph_plan_result r = plan_ok(&g, 0, NULL);
    ck_assert_uint_eq(r.schedule.n, 0);
    ck_assert_str_eq(r.status, "optimal");
    ck_assert(r.bound == 0 && r.gap == 0);
}
END_TEST

/* ckplan's stdout is data: CBC must write nothing there. */
START_TEST(cbc_writes_nothing_to_stdout)
{
    ck_graph g = seeded_graph(5, 5);
    ck_err err;
    fflush(stdout);
    FILE *capture = tmpfile();
    ck_assert_ptr_nonnull(capture);
    int saved = dup(STDOUT_FILENO);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(dup2(fileno(capture), STDOUT_FILENO), 0);
    ck_graph_planner_opts opts = {.time_limit_s = 10};
    ck_graph_plan_result r;
    uint64_t min_budget;
    int rc = ck_graph_planner_milp.plan(&g, baseline(&g).peak_bytes * 3 / 4, &opts, &r, &min_budget,
                                        &err);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    ck_assert_int_eq(fseek(capture, 0, SEEK_END), 0);
    long written = ftell(capture);
    fclose(capture);
    ck_assert_msg(rc == CK_OK || rc == CK_ERR_INFEASIBLE, "%s", err.msg);
    ck_assert_int_eq(written, 0);
    ck_graph_schedule_free(&r.schedule);
    ck_graph_free(&g);
}
END_TEST

static TCase *milp_tcase(void)
{
    TCase *tc = tcase_create("milp");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, matches_brute_force_on_random_graphs, 0, 3);
    tcase_add_test(tc, transients_match_brute_force);
    tcase_add_test(tc, exact_to_the_byte_at_tens_of_gigabytes);
    tcase_add_test(tc, infeasible_where_only_schedules_outside_the_class_fit);
    tcase_add_test(tc, warm_starts_keep_it_exact);
    tcase_add_test(tc, time_limit_keeps_the_warm_start);
    tcase_add_test(tc, stops_when_asked);
    tcase_add_test(tc, an_empty_graph_is_planned_empty);
    tcase_add_test(tc, cbc_writes_nothing_to_stdout);
    return tc;
}

static Suite *graph_milp_suite(void)
{
    Suite *s = suite_create("graph_milp");
    suite_add_tcase(s, milp_tcase());
    return s;
}

CK_TEST_MAIN(graph_milp_suite)
