#include "planner/segments.h"

#include <stdlib.h>

#include "planner/rangemax.h"

/* Calls visit for each operation of the segment schedule in order, while it returns true. */
static bool walk_segments(const ck_chain *c, const size_t *starts, size_t n,
                          bool (*visit)(void *ctx, ck_action_kind kind, size_t stage), void *ctx)
{
    size_t L = c->n_stages;
    bool ok = true;
    for (size_t k = 0; ok && k + 1 < n; k++)
        for (size_t i = starts[k]; ok && i < starts[k + 1]; i++)
            ok = visit(ctx, i == starts[k] ? CK_F_CK : CK_F_NONE, i);
    for (size_t i = starts[n - 1]; ok && i < L; i++)
        ok = visit(ctx, CK_F_ALL, i);
    ok = ok && visit(ctx, CK_LOSS, 0);
    for (size_t k = n; ok && k-- > 0;) {
        size_t end = k + 1 < n ? starts[k + 1] : L;
        for (size_t i = starts[k]; ok && k + 1 < n && i < end; i++)
            ok = visit(ctx, CK_F_ALL, i);
        for (size_t i = end; ok && i-- > starts[k];)
            ok = visit(ctx, CK_B, i);
    }
    return ok;
}

static bool push_op(void *schedule, ck_action_kind kind, size_t stage)
{
    return ck_schedule_push(schedule, kind, stage);
}

int ck_segments_of(const ck_chain *c, const size_t *starts, size_t n, ck_schedule *out,
                         ck_err *err)
{
    return walk_segments(c, starts, n, push_op, out) ? CK_OK : ck_err_oom(err);
}

typedef struct {
    const ck_chain *chain;
    double time;
} time_sum;

/* Adds the operation's time as ck_schedule_replay does. */
static bool add_time(void *ctx, ck_action_kind kind, size_t stage)
{
    time_sum *sum = ctx;
    const ck_chain *c = sum->chain;
    sum->time += kind == CK_LOSS ? c->loss_bwd_time
                 : kind == CK_B  ? c->stages[stage].bwd_time
                                 : c->stages[stage].fwd_time;
    return true;
}

double ck_segments_time(const ck_chain *c, const size_t *starts, size_t n)
{
    time_sum sum = {c, 0};
    walk_segments(c, starts, n, add_time, &sum);
    return sum.time;
}

/* Segment k, stages [s, e), is priced with K, the bytes of x_0 and of the checkpoints
 * x_{starts[1]} .. x_s, live throughout its forward and its backward (chain-model.md,
 * section 2):
 *   F_ck s             K + x_{s+1} + fwd_tmp_s
 *   F_none i, s<i<e    K + x_i + x_{i+1} + fwd_tmp_i
 *   F_all i, s<=i<e    K + [y_e, unless last] + saved_s + .. + saved_i + fwd_tmp_i
 *   loss (last)        K + saved_s + .. + saved_{L-1} + y_L + loss tmp
 *   B i, s<=i<e        K + saved_s + .. + saved_i + y_{i+1} + y_i + bwd_tmp_i
 * where the first forward of every segment but the last is F_ck and F_none, and its F_all
 * are the recomputation, with y_e live. */
struct ck_segments_pricer {
    const ck_chain *chain;
    uint64_t *saved_before; /* saved_before[i]: saved_0 + .. + saved_{i-1} */
    ck_rangemax advance;    /* x_i + x_{i+1} + fwd_tmp_i */
    ck_rangemax all;        /* saved_before[i+1] + fwd_tmp_i */
    ck_rangemax back;       /* saved_before[i+1] + y_{i+1} + y_i + bwd_tmp_i */
};

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static int build_tables(ck_segments_pricer *p, ck_err *err)
{
    const ck_chain *c = p->chain;
    size_t L = c->n_stages;
    uint64_t *advance = malloc(L * sizeof *advance), *all = malloc(L * sizeof *all),
             *back = malloc(L * sizeof *back);
    int rc = advance && all && back ? CK_OK : ck_err_oom(err);
    for (size_t i = 0; rc == CK_OK && i < L; i++) {
        const ck_stage *st = &c->stages[i];
        uint64_t in = ck_chain_x_bytes(c, i);
        p->saved_before[i + 1] = ck_rangemax_sat_add(p->saved_before[i], st->saved_bytes);
        advance[i] = ck_rangemax_sat_add(ck_rangemax_sat_add(in, st->out_bytes), st->fwd_tmp_bytes);
        all[i] = ck_rangemax_sat_add(p->saved_before[i + 1], st->fwd_tmp_bytes);
        back[i] = ck_rangemax_sat_add(ck_rangemax_sat_add(p->saved_before[i + 1], st->out_bytes),
                             ck_rangemax_sat_add(in, st->bwd_tmp_bytes));
    }
    if (rc == CK_OK)
        rc = ck_rangemax_init(&p->advance, advance, L, err);
    if (rc == CK_OK)
        rc = ck_rangemax_init(&p->all, all, L, err);
    if (rc == CK_OK)
        rc = ck_rangemax_init(&p->back, back, L, err);
    free(advance);
    free(all);
    free(back);
    return rc;
}

int ck_segments_pricer_new(const ck_chain *c, ck_segments_pricer **out, ck_err *err)
{
    ck_segments_pricer *p = calloc(1, sizeof *p);
    if (!p)
        return ck_err_oom(err);
    p->chain = c;
    p->saved_before = calloc(c->n_stages + 1, sizeof *p->saved_before);
    int rc = p->saved_before ? build_tables(p, err) : ck_err_oom(err);
    if (rc != CK_OK) {
        ck_segments_pricer_free(p);
        return rc;
    }
    *out = p;
    return CK_OK;
}

void ck_segments_pricer_free(ck_segments_pricer *p)
{
    if (!p)
        return;
    ck_rangemax_free(&p->advance);
    ck_rangemax_free(&p->all);
    ck_rangemax_free(&p->back);
    free(p->saved_before);
    free(p);
}

/* The largest peak of segment [s, e), less K. */
static uint64_t segment_peak(const ck_segments_pricer *p, size_t s, size_t e)
{
    const ck_chain *c = p->chain;
    size_t L = c->n_stages;
    uint64_t before = p->saved_before[s];
    uint64_t peak = ck_rangemax_sat_sub(ck_rangemax_query(&p->back, s, e - 1), before);
    uint64_t recompute = ck_rangemax_sat_sub(ck_rangemax_query(&p->all, s, e - 1), before);
    if (e == L) {
        uint64_t loss = ck_rangemax_sat_add(ck_rangemax_sat_sub(p->saved_before[L], before),
                                   ck_rangemax_sat_add(ck_chain_x_bytes(c, L), c->loss_bwd_tmp_bytes));
        return max_u64(peak, max_u64(recompute, loss));
    }
    const ck_stage *first = &c->stages[s];
    uint64_t forward = max_u64(ck_rangemax_sat_add(first->out_bytes, first->fwd_tmp_bytes),
                               ck_rangemax_query(&p->advance, s + 1, e - 1));
    recompute = ck_rangemax_sat_add(recompute, c->stages[e - 1].out_bytes); /* y_e */
    return max_u64(peak, max_u64(forward, recompute));
}

uint64_t ck_segments_peak(const ck_segments_pricer *p, const size_t *starts, size_t n)
{
    const ck_chain *c = p->chain;
    uint64_t held = c->input_bytes, peak = held;
    for (size_t k = 0; k < n; k++) {
        if (k > 0) /* the checkpoint x_{starts[k]} */
            held = ck_rangemax_sat_add(held, c->stages[starts[k] - 1].out_bytes);
        size_t end = k + 1 < n ? starts[k + 1] : c->n_stages;
        peak = max_u64(peak, ck_rangemax_sat_add(held, segment_peak(p, starts[k], end)));
    }
    return peak;
}
