/* The replayed peak of a revolve schedule, priced without building it (revolve.h).
 *
 * The walk follows ck_revolve_schedule's subproblems (persistent.h) but prices each
 * operation by the spec's replay rule (chain-model.md, section 2) from prefix sums and
 * range maxima, so that whole stretches cost O(1):
 *   - a run of subproblems whose split is 1 (a snapshot at each of k consecutive stages,
 *     which is all of a subproblem that has a snapshot for every stage) is its k F_ck, its
 *     k bases and what follows it;
 *   - with one snapshot, the rounds of advances are priced in one pass over the stages.
 * Peaks are counted inside a subproblem Seg(a, t) as persistent.h defines them (its
 * ambient x_a left out, y_{t+1} counted), plus `off`, what is held outside it besides x_0. */
#include <stdlib.h>

#include "planner/rangemax.h"
#include "planner/revolve.h"

typedef struct {
    size_t a, t;
    uint64_t snapshots, off;
} peak_task;

struct ck_revolve_pricer {
    const ck_chain *chain;
    uint64_t *held_x;   /* held_x[i]: sizes of x_1 .. x_i together (x_0 is ambient) */
    uint64_t *base;     /* base[q]: the peak inside the base Seg(q, q) */
    ck_rangemax fck;    /* held_x[q+1] + fwd_tmp_q: F_ck q after snapshots since the run began */
    ck_rangemax bases;  /* held_x[q] + base[q]: base q under the snapshots x_1 .. x_q */
    ck_rangemax advance; /* F_none k: x_k, x_{k+1} and fwd_tmp_k */
    peak_task *stack;
};

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static uint64_t x_bytes(const ck_revolve_pricer *p, size_t i)
{
    return ck_chain_x_bytes(p->chain, i);
}

/* y_{t+1}, live on entry to Seg(., t): none for the last stage, whose subproblem makes it. */
static uint64_t entry_gradient(const ck_revolve_pricer *p, size_t t)
{
    return t + 1 < p->chain->n_stages ? x_bytes(p, t + 1) : 0;
}

static uint64_t base_peak(const ck_chain *c, size_t q)
{
    const ck_stage *st = &c->stages[q];
    uint64_t out = st->out_bytes, saved = st->saved_bytes;
    uint64_t bwd = ck_rangemax_sat_add(ck_rangemax_sat_add(saved, out),
                              ck_rangemax_sat_add(ck_chain_x_bytes(c, q), st->bwd_tmp_bytes));
    if (q + 1 < c->n_stages) /* F_all q next to y_{q+1}, then B q */
        return max_u64(ck_rangemax_sat_add(ck_rangemax_sat_add(out, saved), st->fwd_tmp_bytes), bwd);
    uint64_t loss = ck_rangemax_sat_add(ck_rangemax_sat_add(saved, out), c->loss_bwd_tmp_bytes);
    return max_u64(max_u64(ck_rangemax_sat_add(saved, st->fwd_tmp_bytes), loss), bwd);
}

static int build_tables(ck_revolve_pricer *p, ck_err *err)
{
    const ck_chain *c = p->chain;
    size_t L = c->n_stages;
    uint64_t *fck = malloc(L * sizeof *fck), *bases = malloc(L * sizeof *bases),
             *advance = malloc(L * sizeof *advance);
    int rc = fck && bases && advance ? CK_OK : ck_err_oom(err);
    for (size_t i = 0; rc == CK_OK && i < L; i++) {
        const ck_stage *st = &c->stages[i];
        p->held_x[i + 1] = ck_rangemax_sat_add(p->held_x[i], st->out_bytes);
        p->base[i] = base_peak(c, i);
        fck[i] = ck_rangemax_sat_add(p->held_x[i + 1], st->fwd_tmp_bytes);
        bases[i] = ck_rangemax_sat_add(p->held_x[i], p->base[i]);
        advance[i] = ck_rangemax_sat_add(ck_rangemax_sat_add(x_bytes(p, i), st->out_bytes), st->fwd_tmp_bytes);
    }
    if (rc == CK_OK)
        rc = ck_rangemax_init(&p->fck, fck, L, err);
    if (rc == CK_OK)
        rc = ck_rangemax_init(&p->bases, bases, L, err);
    if (rc == CK_OK)
        rc = ck_rangemax_init(&p->advance, advance, L, err);
    free(fck);
    free(bases);
    free(advance);
    return rc;
}

int ck_revolve_pricer_new(const ck_chain *c, ck_revolve_pricer **out, ck_err *err)
{
    size_t L = c->n_stages;
    ck_revolve_pricer *p = calloc(1, sizeof *p);
    if (!p)
        return ck_err_oom(err);
    p->chain = c;
    p->held_x = calloc(L + 1, sizeof *p->held_x);
    p->base = malloc(L * sizeof *p->base);
    p->stack = malloc(L * sizeof *p->stack);
    int rc = p->held_x && p->base && p->stack ? build_tables(p, err) : ck_err_oom(err);
    if (rc != CK_OK) {
        ck_revolve_pricer_free(p);
        return rc;
    }
    *out = p;
    return CK_OK;
}

void ck_revolve_pricer_free(ck_revolve_pricer *p)
{
    if (!p)
        return;
    ck_rangemax_free(&p->fck);
    ck_rangemax_free(&p->bases);
    ck_rangemax_free(&p->advance);
    free(p->held_x);
    free(p->base);
    free(p->stack);
    free(p);
}

/* How many subproblems in a row, from (n stages, c snapshots), split at 1: while c >= 2,
 * n >= 2 and the rest, n-1 stages with c-1 snapshots, needs at most two advances per stage
 * (n-1 <= C(c+1, 2)), which is when ck_revolve_split returns 1. Each step lowers n and c
 * by one, and the condition, once false, stays false. */
static uint64_t split_one_run(uint64_t n, uint64_t c)
{
    uint64_t lo = 0, hi = (n < c ? n : c) - 1; /* the run has lo .. hi steps */
    while (lo < hi) {
        uint64_t k = hi - (hi - lo) / 2, cc = c - (k - 1); /* does step k-1 (0-based) split at 1? */
        bool one = n - k <= cc * (cc + 1) / 2; /* n-(k-1)-1 <= C(cc+1, 2) */
        if (one)
            lo = k;
        else
            hi = k - 1;
    }
    return lo;
}

/* One snapshot on [a, t]: for t' = t, t-1, ..., a+1, advance from x_a to x_{t'} (F_ck a,
 * F_none a+1 .. t'-1) next to y_{t'+1}, then the base t' beside x_{t'}; finally the base a. */
static uint64_t one_snapshot_peak(const ck_revolve_pricer *p, size_t a, size_t t)
{
    const ck_stage *first = &p->chain->stages[a];
    uint64_t start = ck_rangemax_sat_add(first->out_bytes, first->fwd_tmp_bytes), advances = start;
    uint64_t peak = p->base[a];
    for (size_t u = a + 1; u <= t; u++) {
        if (u > a + 1)
            advances = max_u64(advances, ck_rangemax_query(&p->advance, u - 1, u - 1));
        uint64_t gradient = u == t ? entry_gradient(p, t) : x_bytes(p, u + 1);
        peak = max_u64(peak, ck_rangemax_sat_add(gradient, advances));
        peak = max_u64(peak, ck_rangemax_sat_add(x_bytes(p, u), p->base[u]));
    }
    return peak;
}

/* Prices one task, pushing its parts; returns its own operations' largest peak. */
static uint64_t price_task(ck_revolve_pricer *p, peak_task task, size_t *depth)
{
    size_t a = task.a, t = task.t;
    uint64_t n = t - a + 1, c = task.snapshots, off = task.off;
    if (n == 1)
        return ck_rangemax_sat_add(off, p->base[a]);
    if (c == 1)
        return ck_rangemax_sat_add(off, one_snapshot_peak(p, a, t));
    uint64_t y = entry_gradient(p, t), run = split_one_run(n, c);
    if (run > 0) { /* F_ck a .. a+run-1, then Seg(a+run, t), then the bases a+run-1 .. a */
        uint64_t before = p->held_x[a];
        uint64_t fwd = ck_rangemax_sat_sub(ck_rangemax_query(&p->fck, a, a + run - 1), before);
        uint64_t back = ck_rangemax_sat_sub(ck_rangemax_query(&p->bases, a, a + run - 1), before);
        uint64_t held = ck_rangemax_sat_sub(p->held_x[a + run], before);
        p->stack[(*depth)++] = (peak_task){a + run, t, c - run, ck_rangemax_sat_add(off, held)};
        return ck_rangemax_sat_add(off, max_u64(ck_rangemax_sat_add(y, fwd), back));
    }
    uint64_t m = ck_revolve_split(n, c); /* F_ck a, F_none a+1 .. a+m-1, Seg(a+m, t), Seg(a, a+m-1) */
    const ck_stage *first = &p->chain->stages[a];
    uint64_t fwd = max_u64(ck_rangemax_sat_add(first->out_bytes, first->fwd_tmp_bytes),
                           ck_rangemax_query(&p->advance, a + 1, a + m - 1));
    p->stack[(*depth)++] = (peak_task){a, a + m - 1, c, off};
    p->stack[(*depth)++] = (peak_task){a + m, t, c - 1, ck_rangemax_sat_add(off, x_bytes(p, a + m))};
    return ck_rangemax_sat_add(off, ck_rangemax_sat_add(y, fwd));
}

uint64_t ck_revolve_peak(ck_revolve_pricer *p, uint64_t snapshots)
{
    const ck_chain *c = p->chain;
    size_t depth = 0;
    uint64_t inside = 0;
    /* Pending tasks cover disjoint ranges of stages: at most L of them. */
    p->stack[depth++] = (peak_task){0, c->n_stages - 1, snapshots, 0};
    while (depth > 0) {
        peak_task task = p->stack[--depth];
        inside = max_u64(inside, price_task(p, task, &depth));
    }
    return ck_rangemax_sat_add(c->input_bytes, inside);
}
