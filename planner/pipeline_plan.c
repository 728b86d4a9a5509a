/* pipeline: planning each rank for its microbatches in flight (see pipeline.h). */
#include "planner/pipeline.h"

#include <stdlib.h>

#include "planner/size.h"

/* Replays run->result's schedule on c: its replay, and C, what the microbatch keeps until
 * its backward: the bytes live once the loss has run, less the gradient it made (what the
 * rank receives then), so that a checkpoint segment the forward ended with is held as its
 * shards where checkpoints are partitioned (planner/action.h), as once the checkpoint
 * function has returned. */
static int replay_run(const ck_chain *c, ck_pipeline_run *run, ck_err *err)
{
    const ck_schedule *s = &run->result.schedule;
    uint64_t *live = malloc((s->n ? s->n : 1) * sizeof *live);
    if (!live)
        return ck_err_oom(err);
    int rc = ck_schedule_replay(c, s, &run->replay, live, NULL, err);
    size_t k = 0;
    while (rc == CK_OK && k < s->n && s->actions[k].kind != CK_LOSS)
        k++;
    run->held = rc == CK_OK && k < s->n ? live[k] - ck_chain_x_bytes(c, c->n_stages) : c->input_bytes;
    free(live);
    return rc;
}

/* The rank's total over its chunks' runs (plan or baseline): sum of live x C, plus the
 * largest P - C (the running microbatch's peak in place of what it keeps); *time the sum of
 * the runs' times. False past 64 bits. */
static bool rank_total(const ck_pipeline_rank *r, bool baseline, uint64_t *total, double *time)
{
    uint64_t sum = 0, most = 0;
    *time = 0;
    for (size_t j = 0; j < r->n_chunks; j++) {
        const ck_pipeline_chunk *c = &r->chunks[j];
        const ck_pipeline_run *run = baseline ? &c->baseline : &c->plan;
        uint64_t kept;
        if (!ck_size_mul(c->live, run->held, &kept) || !ck_size_add(sum, kept, &sum))
            return false;
        uint64_t over = run->replay.peak_bytes > run->held ? run->replay.peak_bytes - run->held : 0;
        most = over > most ? over : most;
        *time += run->replay.time;
    }
    return ck_size_add(sum, most, total);
}

static int overflow(ck_err *err)
{
    return ck_err_fail(err, CK_ERR_INPUT, "--pp: a rank's activations overflow 64 bits");
}

int ck_pipeline_plan_rank_at(ck_pipeline_rank *r, const ck_planner *p, uint64_t b,
                             const ck_planner_opts *opts, ck_err *err)
{
    int rc = CK_OK;
    r->min_activation = 0;
    for (size_t j = 0; j < r->n_chunks && (rc == CK_OK || rc == CK_ERR_INFEASIBLE); j++) {
        ck_pipeline_chunk *c = &r->chunks[j];
        ck_replay ignored;
        uint64_t min = 0;
        ck_planner_result_free(&c->plan.result);
        int one = ck_planner_run(&c->chain, p, b, opts, &c->plan.result, &ignored, &min, err);
        if (one == CK_ERR_INFEASIBLE)
            r->min_activation = min > r->min_activation ? min : r->min_activation;
        if (one == CK_OK)
            one = replay_run(&c->chain, &c->plan, err);
        rc = one != CK_OK ? one : rc; /* every chunk's smallest is wanted */
    }
    if (rc == CK_OK && !rank_total(r, false, &r->activation, &r->time))
        rc = overflow(err);
    r->chain_budget = b;
    return rc;
}

/* Every chunk's store-everything schedule, replayed: the rank's baseline. */
static int plan_baseline(ck_pipeline_rank *r, ck_err *err)
{
    int rc = CK_OK;
    for (size_t j = 0; j < r->n_chunks && rc == CK_OK; j++) {
        ck_pipeline_chunk *c = &r->chunks[j];
        ck_planner_result_init(&c->baseline.result);
        rc = ck_schedule_baseline(&c->chain, &c->baseline.result.schedule, err);
        if (rc == CK_OK)
            rc = replay_run(&c->chain, &c->baseline, err);
    }
    if (rc == CK_OK && !rank_total(r, true, &r->baseline_activation, &r->baseline_time))
        rc = overflow(err);
    return rc;
}

/* CK_OK when the rank's chunks planned at b fit `room`, CK_ERR_INFEASIBLE when they do
 * not (or have no schedule under b). */
static int fits_at(ck_pipeline_rank *r, const ck_planner *p, uint64_t b, uint64_t room,
                   const ck_planner_opts *opts, ck_err *err)
{
    int rc = ck_pipeline_plan_rank_at(r, p, b, opts, err);
    return rc == CK_OK && r->activation > room ? CK_ERR_INFEASIBLE : rc;
}

/* The largest chain budget in [lo, hi] found by bisection whose total fits room, given
 * that lo's does (and hi's does not); the rank is left planned at it. */
static int bisect(ck_pipeline_rank *r, const ck_planner *p, uint64_t lo, uint64_t hi,
                  uint64_t room, const ck_planner_opts *opts, ck_err *err)
{
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        int rc = fits_at(r, p, mid, room, opts, err);
        if (rc == CK_OK)
            lo = mid;
        else if (rc == CK_ERR_INFEASIBLE)
            hi = mid;
        else
            return rc;
    }
    return fits_at(r, p, lo, room, opts, err);
}

/* Plans rank r in the budget less its static memory. */
static int plan_rank(ck_pipeline_rank *r, const ck_planner *p, uint64_t budget,
                     const ck_planner_opts *opts, ck_err *err)
{
    uint64_t room = 0, lo = 0;
    int rc = plan_baseline(r, err);
    bool static_fits = ck_planner_activation_budget(budget, r->statics.total, &room);
    if (rc == CK_OK && static_fits && (rc = fits_at(r, p, room, room, opts, err)) != CK_ERR_INFEASIBLE) {
        r->fits = rc == CK_OK;
        return rc;
    }
    if (rc != CK_OK && rc != CK_ERR_INFEASIBLE)
        return rc;
    rc = ck_pipeline_plan_rank_at(r, p, 0, opts, err);
    /* up to the chunks' smallest chain budget, which a planner that rounds (dp's memory
     * units) may put a little higher at a higher budget */
    for (int tries = 0; rc == CK_ERR_INFEASIBLE && tries < 16; tries++) {
        lo = r->min_activation > lo ? r->min_activation : lo + 1;
        rc = ck_pipeline_plan_rank_at(r, p, lo, opts, err);
    }
    if (rc != CK_OK)
        return rc;
    if (!static_fits || r->activation > room) {
        r->min_activation = r->activation;
        r->fits = false;
        return CK_ERR_INFEASIBLE;
    }
    r->fits = true;
    return bisect(r, p, lo, room, room, opts, err);
}

int ck_pipeline_plan(ck_pipeline *pl, const ck_planner *p, uint64_t budget,
                     const ck_planner_opts *opts, ck_err *err)
{
    int status = CK_OK;
    uint64_t worst = 0;
    for (uint64_t i = 0; i < pl->n_ranks; i++) {
        ck_pipeline_rank *r = &pl->ranks[i];
        int rc = plan_rank(r, p, budget, opts, err);
        if (rc != CK_OK && rc != CK_ERR_INFEASIBLE)
            return rc;
        uint64_t total = ck_planner_step_budget(r->statics.total,
                                                rc == CK_OK ? r->activation : r->min_activation);
        /* an infeasible rank is worse than any that fits; among equals, the larger total */
        bool worse = i == 0 || (rc != status ? rc == CK_ERR_INFEASIBLE : total > worst);
        if (worse) {
            worst = total;
            pl->worst = (size_t)i;
        }
        if (rc == CK_ERR_INFEASIBLE)
            status = rc;
    }
    return status;
}
