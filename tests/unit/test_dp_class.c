/* What dp is optimal over. An exhaustive search over every valid schedule of the five
 * operations (not only persistent ones) on chains of up to four stages: a shortest path
 * over the sets of live tensors, each operation applied by planner/action as the replay
 * applies it, under a bound on every operation's peak. dp's replayed time is never below
 * that optimum, and the budgets at which it is above measure what persistent schedules
 * (with the plain loss) leave out; those at which the usual persistent schedules alone
 * (the brute force's) are above, what dp left out before the plain loss. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "planner/action.h"
#include "planner/planner.h"
#include "tests/unit/brute.h"
#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"
#include "tests/unit/plan_run.h"

/* A state is a set of live tensors: bit i is x_i, bit L+1+i is x̄_i, bit 2L+2+i is y_i. The
 * chains have no variants (every x̄ is "all"s), so that is the whole state. */
static size_t state_bits(size_t L)
{
    return 3 * (L + 1);
}

static void load_state(ck_action_state *st, unsigned state)
{
    const ck_chain *c = st->chain;
    size_t n = c->n_stages + 1;
    st->held = 0;
    for (size_t i = 0; i < n; i++) {
        st->x[i] = state >> i & 1;
        st->xbar[i] = state >> (n + i) & 1;
        st->y[i] = state >> (2 * n + i) & 1;
        if (st->x[i])
            st->held += ck_action_value_bytes(c, (ck_value){CK_VALUE_X, i, 0});
        if (st->xbar[i])
            st->held += ck_action_value_bytes(c, (ck_value){CK_VALUE_XBAR, i, 0});
        if (st->y[i])
            st->held += ck_action_value_bytes(c, (ck_value){CK_VALUE_Y, i, 0});
    }
}

static unsigned save_state(const ck_action_state *st)
{
    size_t n = st->chain->n_stages + 1;
    unsigned state = 0;
    for (size_t i = 0; i < n; i++)
        state |= (unsigned)st->x[i] << i | (unsigned)st->xbar[i] << (n + i) |
                 (unsigned)st->y[i] << (2 * n + i);
    return state;
}

/* A binary heap of (time, state), nearest first; stale entries are skipped when popped. */
typedef struct {
    double time;
    unsigned state;
} entry;

typedef struct {
    entry *e;
    size_t n;
} heap;

static void heap_push(heap *h, double time, unsigned state)
{
    size_t k = h->n++;
    for (; k > 0 && h->e[(k - 1) / 2].time > time; k = (k - 1) / 2)
        h->e[k] = h->e[(k - 1) / 2];
    h->e[k] = (entry){time, state};
}

static entry heap_pop(heap *h)
{
    entry top = h->e[0], last = h->e[--h->n];
    size_t k = 0;
    for (size_t child; (child = 2 * k + 1) < h->n; k = child) {
        if (child + 1 < h->n && h->e[child + 1].time < h->e[child].time)
            child++;
        if (h->e[child].time >= last.time)
            break;
        h->e[k] = h->e[child];
    }
    if (h->n > 0)
        h->e[k] = last;
    return top;
}

/* The least time of a valid schedule whose every operation peaks at most `budget`, or
 * INFINITY (Dijkstra: times are not negative). */
static double least_time(const ck_chain *c, uint64_t budget)
{
    size_t L = c->n_stages, n_states = (size_t)1 << state_bits(L);
    size_t n_ops = 3 * L + 1 + L;
    double *dist = malloc(n_states * sizeof *dist);
    heap h = {malloc((n_states * n_ops + 1) * sizeof *h.e), 0};
    ck_assert(dist && h.e);
    for (size_t k = 0; k < n_states; k++)
        dist[k] = INFINITY;
    ck_action_state st;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_action_state_init(&st, c, &err), CK_OK);
    double found = INFINITY;
    if (budget >= c->input_bytes) {
        dist[save_state(&st)] = 0;
        heap_push(&h, 0, save_state(&st));
    }
    while (h.n > 0) {
        entry at = heap_pop(&h);
        if (at.time > dist[at.state])
            continue;
        load_state(&st, at.state);
        if (st.y[0]) {
            found = at.time;
            break;
        }
        for (int kind = 0; kind < CK_N_ACTIONS; kind++)
            for (size_t i = 0; i < (kind == CK_LOSS ? 1 : L); i++) {
                ck_action a = {(ck_action_kind)kind, i, 0};
                ck_action_effect e;
                uint64_t peak;
                load_state(&st, at.state);
                if (ck_action_describe(&st, 0, &a, &e, NULL) != CK_OK ||
                    ck_action_apply(&st, 0, &a, &e, &peak, NULL) != CK_OK || peak > budget)
                    continue;
                unsigned next = save_state(&st);
                if (at.time + e.time < dist[next]) {
                    dist[next] = at.time + e.time;
                    heap_push(&h, dist[next], next);
                }
            }
    }
    ck_action_state_free(&st);
    free(dist);
    free(h.e);
    return found;
}

START_TEST(dp_is_never_below_the_optimum_of_all_schedules)
{
    ck_rng rng;
    ck_rng_seed(&rng, 4242);
    unsigned points = 0, slower = 0, lost = 0, usual_behind = 0;
    for (unsigned k = 0; k < 120; k++) {
        ck_chain c;
        ck_err err = {{0}};
        ck_assert_int_eq(ck_chaingen_random(&c, 1 + k % 4, 6, 10, &rng, &err), CK_OK);
        if (k % 2)
            c.loss_bwd_tmp_bytes = 6 + ck_rng_below(&rng, 20);
        uint64_t top = ck_test_baseline(&c).peak_bytes;
        ck_brute_set usual;
        ck_assert_int_eq(ck_brute_enumerate(&c, false, &usual, &err), CK_OK);
        for (uint64_t budget = 0; budget <= top; budget++) {
            double best = least_time(&c, budget), usual_best = INFINITY;
            ck_brute_best(&usual, budget, &usual_best);
            usual_behind += usual_best > best + 1e-9 * fmax(1, best);
            ck_plan_result r;
            ck_replay replay;
            uint64_t min_budget = 0;
            int rc = ck_test_plan(&ck_planner_dp, &c, budget, (uint32_t)budget + 1, &r, &replay,
                                  &min_budget, &err);
            points++;
            if (rc == CK_OK) {
                ck_assert_msg(replay.time >= best - 1e-9 * fmax(1, best),
                              "chain %u budget %llu: dp %.17g below the optimum %.17g", k,
                              (unsigned long long)budget, replay.time, best);
                slower += replay.time > best + 1e-9 * fmax(1, best);
            } else {
                ck_assert_int_eq(rc, CK_ERR_INFEASIBLE);
                lost += isfinite(best);
            }
            ck_schedule_free(&r.schedule);
        }
        ck_brute_free(&usual);
        ck_chain_free(&c);
    }
    fprintf(stderr,
            "all schedules: dp slower at %u and infeasible at %u of %u budgets; the usual "
            "persistent schedules alone behind at %u\n", slower, lost, points, usual_behind);
    /* the plain loss closes nearly all of the gap the usual schedules leave */
    ck_assert_uint_lt(slower + lost, usual_behind / 10);
}
END_TEST

static Suite *dp_class_suite(void)
{
    Suite *s = suite_create("dp_class");
    TCase *tc = tcase_create("dp_class");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, dp_is_never_below_the_optimum_of_all_schedules);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(dp_class_suite)
