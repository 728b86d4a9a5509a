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

/* milp on g at budget * scale (every byte of g taken scale times), against the brute force
 * of Checkmate's class at budget: the same time, proven optimal, replayed within the
 * budget; or infeasible, exactly where the brute force finds nothing. */
static void check_budget(const ck_graph *g, const ck_graph *scaled, uint64_t scale,
                         uint64_t budget, unsigned graph_no)
{
    ck_err err = {{0}}, berr;
    ck_graph_plan_result r;
    uint64_t min_budget = 1;
    double best = 0;
    int want = ck_graph_brute_best(g, CK_GRAPH_BRUTE_STAGED, budget, &best, &berr);
    int rc = ck_graph_planner_milp.plan(scaled, budget * scale, NULL, &r, &min_budget, &err);
    ck_assert_msg(rc == want, "graph %u budget %llu: milp %d (%s), brute force %d", graph_no,
                  (unsigned long long)budget, rc, err.msg, want);
    if (rc != CK_OK) {
        ck_assert_uint_eq(r.schedule.n, 0);
        ck_assert_ptr_null(r.status);
        ck_assert_uint_eq(min_budget, 0);
        return;
    }
    ck_graph_replay rp = replay_of(scaled, &r.schedule);
    ck_assert_msg(rp.peak_bytes <= budget * scale, "graph %u budget %llu: peak %llu", graph_no,
                  (unsigned long long)budget, (unsigned long long)rp.peak_bytes);
    ck_assert_msg(same_time(rp.time, best), "graph %u budget %llu: milp %.17g, brute force %.17g",
                  graph_no, (unsigned long long)budget, rp.time, best);
    ck_assert_str_eq(r.status, "optimal");
    ck_assert_msg(r.bound <= rp.time && r.gap >= 0 && r.gap <= 1e-6, "bound %g gap %g", r.bound,
                  r.gap);
    ck_graph_schedule_free(&r.schedule);
}

/* Every budget from one below the least peak of all schedules to the baseline's peak. */
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
    for (uint64_t b = least_all - 1; b <= top; b++)
        check_budget(g, scaled, scale, b, no);
}

START_TEST(matches_brute_force_on_random_graphs)
{
    ck_rng rng;
    ck_rng_seed(&rng, 13);
    for (unsigned k = 0; k < 36; k++) {
        ck_graph g;
        ck_err err;
        ck_assert_int_eq(ck_graphgen_random(&g, 3 + k % 3, 8, &rng, &err), CK_OK);
        check_graph(&g, &g, 1, k);
        ck_graph_free(&g);
    }
}
END_TEST

TCase *milp_tcase(void)
{
    TCase *tc = tcase_create("milp");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, matches_brute_force_on_random_graphs);
    return tc;
}

static Suite *graph_milp_suite(void)
{
    Suite *s = suite_create("graph_milp");
    suite_add_tcase(s, milp_tcase());
    return s;
}

CK_TEST_MAIN(graph_milp_suite)
