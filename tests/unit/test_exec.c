#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/lower.h"
#include "planner/planner.h"
#include "planner/workload.h"
#include "sim/exec.h"
#include "sim/mem.h"
#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"
#include "tests/unit/plan_run.h"

/* A step's results kept for comparison. */
typedef struct {
    ck_step_stats stats;
    float *grads;
    size_t n;
} run_result;

static void run_free(run_result *r)
{
    free(r->grads);
}

static run_result run(ck_exec *e, const ck_schedule *s, uint64_t step)
{
    run_result r = {0};
    ck_err err = {{0}};
    ck_assert_msg(ck_exec_step(e, s, step, &r.stats, NULL, &err) == CK_OK, "%s", err.msg);
    const float *g = ck_exec_gradients(e, &r.n);
    r.grads = malloc(r.n * sizeof *r.grads + 1);
    ck_assert_ptr_nonnull(r.grads);
    memcpy(r.grads, g, r.n * sizeof *g);
    return r;
}

static bool same_grads(const run_result *a, const run_result *b)
{
    return a->n == b->n && memcmp(a->grads, b->grads, a->n * sizeof *a->grads) == 0 &&
           memcmp(&a->stats.loss, &b->stats.loss, sizeof a->stats.loss) == 0;
}

static void assert_only_static_live(const ck_exec *e)
{
    const ck_mem *mem = ck_exec_memory(e);
    ck_assert_uint_eq(mem->live_activation_total, 0);
    ck_assert_uint_eq(mem->live[CK_MEM_ACTIVATION] + mem->live[CK_MEM_GRADIENT] +
                          mem->live[CK_MEM_WORKSPACE], 0);
}

/* The smallest budget dp accepts. */
static uint64_t dp_minimum(const ck_chain *c)
{
    ck_plan_result r;
    ck_replay replay;
    uint64_t min = 0;
    ck_err err = {{0}};
    ck_planner_opts opts = {.slots = CK_DEFAULT_SLOTS};
    ck_assert_int_eq(ck_planner_run(c, &ck_planner_dp, 0, &opts, &r, &replay, &min, &err),
                     CK_ERR_INFEASIBLE);
    ck_planner_result_free(&r);
    return min;
}

/* Plans c with p under budget; false when p cannot meet it. */
static bool plan(const ck_chain *c, const ck_planner *p, uint64_t budget, ck_plan_result *r,
                 ck_replay *replay)
{
    uint64_t min = 0;
    ck_err err = {{0}};
    ck_planner_opts opts = {.slots = CK_DEFAULT_SLOTS};
    int rc = ck_planner_run(c, p, budget, &opts, r, replay, &min, &err);
    ck_assert_msg(rc == CK_OK || rc == CK_ERR_INFEASIBLE, "%s: %s", p->name, err.msg);
    if (rc != CK_OK)
        ck_planner_result_free(r);
    return rc == CK_OK;
}

/* ---- the tracking allocator ---- */

START_TEST(memory_counts_by_kind)
{
    ck_mem m = {0};
    void *a = ck_mem_alloc(&m, CK_MEM_ACTIVATION, 100);
    void *g = ck_mem_alloc(&m, CK_MEM_GRADIENT, 30);
    void *s = ck_mem_alloc(&m, CK_MEM_STATIC, 1000);
    void *z = ck_mem_alloc(&m, CK_MEM_WORKSPACE, 0);
    ck_assert(a && g && s && z);
    ck_assert_int_eq(((unsigned char *)a)[99], 0);
    ck_assert_uint_eq(m.live_activation_total, 130);
    ck_mem_free(&m, CK_MEM_ACTIVATION, a, 100);
    void *w = ck_mem_alloc(&m, CK_MEM_WORKSPACE, 50);
    ck_assert_uint_eq(m.peak_activation_total, 130);
    ck_assert_uint_eq(m.live_activation_total, 80);
    ck_assert_uint_eq(m.peak[CK_MEM_ACTIVATION], 100);
    ck_assert_uint_eq(m.peak[CK_MEM_STATIC], 1000);
    ck_mem_reset_peaks(&m);
    ck_assert_uint_eq(m.peak_activation_total, 80);
    ck_assert_uint_eq(m.peak[CK_MEM_ACTIVATION], 0);
    ck_mem_free(&m, CK_MEM_GRADIENT, g, 30);
    ck_mem_free(&m, CK_MEM_WORKSPACE, w, 50);
    ck_mem_free(&m, CK_MEM_WORKSPACE, z, 0);
    ck_mem_free(&m, CK_MEM_STATIC, s, 1000);
    ck_assert_uint_eq(m.live_activation_total + m.live[CK_MEM_STATIC], 0);
}
END_TEST

/* After a reset, touching 64 MiB raises the resident high-water mark by about that much
 * (where clear_refs is refused, the reset must say so). */
START_TEST(rss_peak_follows_touched_memory)
{
    ck_err err = {{0}};
    uint64_t before, after;
    int reset = ck_mem_rss_reset_peak(&err);
    ck_assert_msg(reset == CK_OK || strstr(err.msg, "clear_refs"), "%s", err.msg);
    ck_assert_msg(ck_mem_rss_peak(&before, &err) == CK_OK, "%s", err.msg);
    size_t n = 64u << 20;
    /* volatile: stores to memory about to be freed are otherwise dropped. */
    unsigned char *block = malloc(n);
    ck_assert_ptr_nonnull(block);
    volatile unsigned char *p = block;
    for (size_t j = 0; j < n; j += 4096)
        p[j] = 1;
    ck_assert_int_eq(ck_mem_rss_peak(&after, &err), CK_OK);
    ck_assert_uint_ge(after, reset == CK_OK ? before + n / 2 : before);
    free(block);
}
END_TEST

/* ---- chain files ---- */

START_TEST(chain_peak_equals_replay)
{
    ck_rng rng;
    ck_rng_seed(&rng, 7);
    size_t plans = 0;
    for (int n = 0; n < 12; n++) {
        ck_chain c;
        ck_err err = {{0}};
        size_t L = 2 + (size_t)ck_rng_below(&rng, 10);
        ck_assert_int_eq(ck_chaingen_random(&c, L, 4000, 10, &rng, &err), CK_OK);
        ck_exec *e;
        ck_exec_opts opts = {.seed = 3, .skip_chain_work = true};
        ck_assert_msg(ck_exec_create(NULL, &c, NULL, &opts, &e, &err) == CK_OK, "%s", err.msg);
        ck_schedule base = {0};
        ck_assert_int_eq(ck_schedule_baseline(&c, &base, &err), CK_OK);
        ck_replay base_replay;
        ck_assert_int_eq(ck_schedule_replay(&c, &base, &base_replay, NULL, NULL, &err), CK_OK);
        run_result want = run(e, &base, 0);
        ck_assert_uint_eq(want.stats.activation_peak_bytes, base_replay.peak_bytes);
        uint64_t lo = dp_minimum(&c), hi = base_replay.peak_bytes;
        uint64_t budgets[] = {lo, lo + (hi - lo) / 3, lo + 2 * (hi - lo) / 3};
        for (size_t b = 0; b < 3; b++)
            for (const ck_planner *const *p = ck_planners; *p; p++) {
                ck_plan_result r;
                ck_replay replay;
                if (!plan(&c, *p, budgets[b], &r, &replay))
                    continue;
                run_result got = run(e, &r.schedule, 0);
                ck_assert_msg(got.stats.activation_peak_bytes == replay.peak_bytes,
                              "chain %d, %s at %llu: tracked %llu, replayed %llu", n, (*p)->name,
                              (unsigned long long)budgets[b],
                              (unsigned long long)got.stats.activation_peak_bytes,
                              (unsigned long long)replay.peak_bytes);
                ck_assert_msg(same_grads(&want, &got), "chain %d, %s: y_0 differs", n, (*p)->name);
                assert_only_static_live(e);
                run_free(&got);
                ck_planner_result_free(&r);
                plans++;
            }
        run_free(&want);
        ck_schedule_free(&base);
        ck_exec_free(e);
        ck_chain_free(&c);
    }
    ck_assert_uint_gt(plans, 100);
}
END_TEST

/* y_0 follows its inputs: a step on other input data gives other gradients. */
START_TEST(chain_gradient_depends_on_data)
{
    ck_chain c;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chaingen_hetero3(&c, &err), CK_OK);
    c.input_bytes = 64;
    ck_exec *e;
    ck_exec_opts opts = {.seed = 1, .skip_chain_work = true};
    ck_assert_int_eq(ck_exec_create(NULL, &c, NULL, &opts, &e, &err), CK_OK);
    ck_schedule base = {0};
    ck_assert_int_eq(ck_schedule_baseline(&c, &base, &err), CK_OK);
    run_result a = run(e, &base, 0), b = run(e, &base, 1), a2 = run(e, &base, 0);
    ck_assert_uint_eq(a.n, 64 / 4 + 1);
    ck_assert(!same_grads(&a, &b));
    ck_assert(same_grads(&a, &a2));
    run_free(&a);
    run_free(&b);
    run_free(&a2);
    ck_schedule_free(&base);
    ck_exec_free(e);
    ck_chain_free(&c);
}
END_TEST

/* Operations take about their declared time: the baseline of a chain about 0.2 s. */
START_TEST(chain_step_takes_its_time)
{
    ck_chain c;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chaingen_uniform(&c, 8, 1000, &err), CK_OK);
    ck_exec *e;
    ck_exec_opts opts = {.seed = 1};
    ck_assert_int_eq(ck_exec_create(NULL, &c, NULL, &opts, &e, &err), CK_OK);
    ck_schedule base = {0};
    ck_assert_int_eq(ck_schedule_baseline(&c, &base, &err), CK_OK);
    double op_seconds[17];
    ck_step_stats stats;
    ck_assert_int_eq(ck_exec_step(e, &base, 0, &stats, &(ck_exec_trace){.seconds = op_seconds}, &err), CK_OK);
    ck_assert_msg(stats.seconds > 0.05 && stats.seconds < 2.0, "baseline step %g s", stats.seconds);
    double sum = 0;
    for (size_t k = 0; k < base.n; k++)
        sum += op_seconds[k];
    ck_assert(sum <= stats.seconds);
    ck_assert_msg(op_seconds[0] > 0.002, "F_all 0 took %g s", op_seconds[0]);
    ck_schedule_free(&base);
    ck_exec_free(e);
    ck_chain_free(&c);
}
END_TEST


/* Runs s with a trace and compares every operation's measured memory with the replay's
 * prediction: live bytes after each operation must match to the byte, peaks must too except,
 * when forward_under, those of F_all operations, which may stay under (a model's block frees
 * some forward internals before it has made all it saves, and the chain's fwd_tmp_bytes is
 * an upper bound of that). Returns how many operation peaks differ. */
/* The executor's trace of schedule s against its replays, operation by operation. For a
 * chain file (lower NULL) the chain's replay is exact. For a model the replay of the
 * compiled program is (lower: the model's stages), to the byte, and the chain's replay
 * agrees on what stays live and bounds each peak: it is below only for F_all, whose own
 * transient the chain's one fwd_tmp cannot hold, for B, and from the loss on by x_L where
 * the loss frees it (planner/lower). Returns how many peaks are below. */
static size_t trace_matches_replay(ck_exec *e, const ck_chain *c, const ck_schedule *s,
                                   const char *what, const ck_lower *lower)
{
    ck_err err = {{0}};
    size_t n = s->n;
    uint64_t *chain_live = calloc(n + 1, sizeof *chain_live);
    uint64_t *chain_peak = calloc(n + 1, sizeof *chain_peak);
    uint64_t *want_live = calloc(n + 1, sizeof *want_live);
    uint64_t *want_peak = calloc(n + 1, sizeof *want_peak);
    uint64_t *live = calloc(n + 1, sizeof *live), *peak = calloc(n + 1, sizeof *peak);
    double *sec = calloc(n + 1, sizeof *sec), *start = calloc(n + 1, sizeof *start);
    ck_assert(chain_live && chain_peak && want_live && want_peak && live && peak && sec && start);
    ck_replay replay;
    ck_assert_int_eq(ck_schedule_replay(c, s, &replay, chain_live, chain_peak, &err), CK_OK);
    if (lower)
        ck_assert_msg(ck_lower_replay(lower, c, s, &replay, want_live, want_peak, &err) == CK_OK,
                      "%s", err.msg);
    else
        ck_assert_int_eq(ck_schedule_replay(c, s, &replay, want_live, want_peak, &err), CK_OK);
    ck_exec_trace trace = {.seconds = sec, .start = start, .live_after = live, .peak = peak};
    ck_step_stats st;
    ck_assert_msg(ck_exec_step(e, s, 0, &st, &trace, &err) == CK_OK, "%s", err.msg);
    size_t under = 0;
    uint64_t max_peak = 0, x_L = ck_chain_x_bytes(c, c->n_stages), freed = 0;
    for (size_t k = 0; k < n; k++) {
        const ck_action *a = &s->actions[k];
        if (lower && a->kind == CK_LOSS && live[k] + x_L == chain_live[k])
            freed = x_L;
        ck_assert_msg(live[k] == want_live[k] && (live[k] == chain_live[k] || live[k] + freed == chain_live[k]),
                      "%s: op %zu (%s %zu) live %llu, replayed %llu, chain %llu", what, k,
                      ck_action_name(a->kind), a->stage, (unsigned long long)live[k],
                      (unsigned long long)want_live[k], (unsigned long long)chain_live[k]);
        ck_assert_msg(peak[k] == want_peak[k], "%s: op %zu (%s %zu) peak %llu, replayed %llu", what,
                      k, ck_action_name(a->kind), a->stage, (unsigned long long)peak[k],
                      (unsigned long long)want_peak[k]);
        ck_assert_msg(peak[k] == chain_peak[k] ||
                          ((a->kind == CK_F_ALL || a->kind == CK_B || a->kind == CK_LOSS) &&
                           peak[k] < chain_peak[k]),
                      "%s: op %zu (%s %zu) peak %llu, the chain's %llu", what, k,
                      ck_action_name(a->kind), a->stage, (unsigned long long)peak[k],
                      (unsigned long long)chain_peak[k]);
        under += peak[k] != chain_peak[k];
        ck_assert(sec[k] >= 0 && start[k] >= 0);
        if (k > 0)
            ck_assert(start[k] >= start[k - 1] + sec[k - 1]);
        if (peak[k] > max_peak)
            max_peak = peak[k];
    }
    /* The per-operation peaks account for the whole step's peak. */
    ck_assert_uint_eq(max_peak, st.activation_peak_bytes);
    free(chain_live);
    free(chain_peak);
    free(want_live);
    free(want_peak);
    free(live);
    free(peak);
    free(sec);
    free(start);
    return under;
}

/* Operation by operation, a chain's measured memory is the replay's, to the byte. */
START_TEST(chain_trace_equals_replay)
{
    ck_rng rng;
    ck_rng_seed(&rng, 11);
    size_t schedules = 0;
    for (int n = 0; n < 8; n++) {
        ck_chain c;
        ck_err err = {{0}};
        ck_assert_int_eq(ck_chaingen_random(&c, 2 + (size_t)ck_rng_below(&rng, 8), 4000, 10,
                                            &rng, &err), CK_OK);
        ck_exec *e;
        ck_exec_opts opts = {.seed = 3, .skip_chain_work = true};
        ck_assert_msg(ck_exec_create(NULL, &c, NULL, &opts, &e, &err) == CK_OK, "%s", err.msg);
        ck_schedule base = {0};
        ck_assert_int_eq(ck_schedule_baseline(&c, &base, &err), CK_OK);
        ck_assert_uint_eq(trace_matches_replay(e, &c, &base, "baseline", NULL), 0);
        ck_replay base_replay = ck_test_baseline(&c);
        uint64_t lo = dp_minimum(&c), mid = lo + (base_replay.peak_bytes - lo) / 2;
        for (const ck_planner *const *p = ck_planners; *p; p++) {
            ck_plan_result r;
            ck_replay replay;
            if (!plan(&c, *p, mid, &r, &replay))
                continue;
            ck_assert_uint_eq(trace_matches_replay(e, &c, &r.schedule, (*p)->name, NULL), 0);
            ck_planner_result_free(&r);
            schedules++;
        }
        ck_schedule_free(&base);
        ck_exec_free(e);
        ck_chain_free(&c);
    }
    ck_assert_uint_gt(schedules, 20);
}
END_TEST

/* ---- models ---- */

typedef struct {
    ck_workload w;
    ck_exec *e;
    ck_lower *lower;
} loaded;

/* In place: the executor keeps pointers to the workload's model and chain. */
static void load_at(loaded *lp, const char *path, ck_granularity g, bool stateful)
{
    ck_err err = {{0}};
    ck_workload_opts wo;
    ck_workload_opts_default(&wo);
    wo.granularity = g;
    ck_assert_msg(ck_workload_load(path, &wo, &lp->w, &err) == CK_OK, "%s", err.msg);
    ck_assert_ptr_nonnull(lp->w.stage_first);
    ck_exec_opts opts = {.seed = 42, .stateful_rng = stateful};
    ck_assert_msg(ck_exec_create(lp->w.model, &lp->w.chain, lp->w.stage_first, &opts, &lp->e,
                                 &err) == CK_OK, "%s", err.msg);
    ck_assert_uint_eq(ck_exec_memory(lp->e)->live[CK_MEM_STATIC], lp->w.statics.total);
    ck_assert_msg(ck_lower_create(lp->w.model, lp->w.stage_first, lp->w.chain.n_stages, &lp->lower,
                                  &err) == CK_OK, "%s", err.msg);
}

static void load(loaded *lp, const char *path, bool stateful)
{
    load_at(lp, path, CK_GRAN_BLOCK, stateful);
}

static void unload(loaded *l)
{
    ck_lower_free(l->lower);
    ck_exec_free(l->e);
    ck_workload_free(&l->w);
}

static run_result run_baseline(loaded *l)
{
    ck_schedule base = {0};
    ck_err err = {{0}};
    ck_assert_int_eq(ck_schedule_baseline(&l->w.chain, &base, &err), CK_OK);
    ck_replay replay;
    ck_assert_int_eq(ck_schedule_replay(&l->w.chain, &base, &replay, NULL, NULL, &err), CK_OK);
    ck_exec_reset(l->e);
    run_result r = run(l->e, &base, 0);
    fprintf(stderr, "%s baseline: tracked %llu, replayed %llu, %.3f s\n", l->w.model->name,
            (unsigned long long)r.stats.activation_peak_bytes,
            (unsigned long long)replay.peak_bytes, r.stats.seconds);
    ck_replay exact;
    ck_assert_msg(ck_lower_replay(l->lower, &l->w.chain, &base, &exact, NULL, NULL, &err) == CK_OK,
                  "%s", err.msg);
    ck_assert_uint_eq(r.stats.activation_peak_bytes, exact.peak_bytes);
    ck_assert_uint_le(r.stats.activation_peak_bytes, replay.peak_bytes);
    ck_assert_uint_eq(r.stats.static_bytes, l->w.statics.total);
    ck_schedule_free(&base);
    return r;
}

static uint64_t middle_budget(const loaded *l)
{
    ck_replay base = ck_test_baseline(&l->w.chain);
    uint64_t lo = dp_minimum(&l->w.chain);
    return lo + (base.peak_bytes - lo) / 2;
}

/* A step `got` of schedule s (whose chain replay is `replay`) gave the baseline's loss and
 * gradients bit for bit, its tracked peak is the compiled program's replay to the byte and
 * at most the chain's, and it left only static memory; frees got. */
static void expect_as_baseline(loaded *l, const run_result *want, run_result *got,
                               const ck_schedule *s, const ck_replay *replay, const char *what)
{
    ck_assert_msg(same_grads(want, got), "%s: %s changes the gradients", l->w.path, what);
    ck_replay exact;
    ck_err err = {{0}};
    ck_assert_msg(ck_lower_replay(l->lower, &l->w.chain, s, &exact, NULL, NULL, &err) == CK_OK,
                  "%s", err.msg);
    ck_assert_uint_eq(got->stats.activation_peak_bytes, exact.peak_bytes);
    ck_assert_uint_le(got->stats.activation_peak_bytes, replay->peak_bytes);
    assert_only_static_live(l->e);
    run_free(got);
}

/* Every planner's plan at the middle budget gives the baseline's loss and gradients, bit for
 * bit, with the tracked peak that of the compiled program's replay, to the byte, and at
 * most the chain's. */
static void model_matches_baseline(const char *path, ck_granularity g)
{
    loaded l;
    load_at(&l, path, g, false);
    run_result want = run_baseline(&l);
    uint64_t budget = middle_budget(&l);
    const ck_planner *planners[] = {&ck_planner_dp, &ck_planner_revolve, &ck_planner_chen,
                                    &ck_planner_sqrt};
    for (size_t p = 0; p < 4; p++) {
        ck_plan_result r;
        ck_replay replay;
        if (!plan(&l.w.chain, planners[p], budget, &r, &replay)) {
            fprintf(stderr, "%s %s: infeasible at %llu\n", l.w.model->name, planners[p]->name,
                    (unsigned long long)budget);
            continue;
        }
        ck_exec_reset(l.e);
        run_result got = run(l.e, &r.schedule, 0);
        fprintf(stderr, "%s (%s stages) %s at %llu: tracked %llu, replayed %llu (%.4f), %.3f s\n",
                l.w.model->name, ck_workload_granularity_name(g), planners[p]->name,
                (unsigned long long)budget,
                (unsigned long long)got.stats.activation_peak_bytes,
                (unsigned long long)replay.peak_bytes,
                (double)got.stats.activation_peak_bytes / (double)replay.peak_bytes,
                got.stats.seconds);
        size_t variants = 0; /* an F_all in a variant other than "all" recomputes inside B */
        for (size_t a = 0; a < r.schedule.n; a++)
            variants += r.schedule.actions[a].variant > 0;
        ck_assert_msg(replay.count[CK_F_CK] + replay.count[CK_F_NONE] + variants > 0,
                      "%s recomputes nothing", planners[p]->name);
        expect_as_baseline(&l, &want, &got, &r.schedule, &replay, planners[p]->name);
        ck_planner_result_free(&r);
    }
    run_free(&want);
    unload(&l);
}


/* Each variant kind (planner/lower) on every stage that has it, in the store-everything
 * schedule: B recomputes what F_all dropped, and the step gives the baseline's loss and
 * gradients bit for bit, with the tracked peak the compiled program's replay to the byte
 * and at most the chain's; every kind keeps less than "all" somewhere, so the chain's peak
 * falls. */
static void variants_match_baseline(const char *path)
{
    loaded l;
    load(&l, path, false);
    run_result want = run_baseline(&l);
    ck_replay base = ck_test_baseline(&l.w.chain);
    for (ck_keep k = CK_KEEP_MATMUL; k < CK_N_KEEPS; k++) {
        ck_schedule s = {0};
        ck_err err = {{0}};
        ck_assert_int_eq(ck_schedule_baseline(&l.w.chain, &s, &err), CK_OK);
        size_t used = 0;
        for (size_t a = 0; a < s.n; a++) {
            ck_keep keeps[CK_N_KEEPS];
            size_t n = s.actions[a].kind == CK_F_ALL ? ck_lower_variants(l.lower, s.actions[a].stage, keeps) : 0;
            for (size_t v = 1; v < n; v++)
                if (keeps[v] == k) {
                    s.actions[a].variant = v;
                    used++;
                }
        }
        ck_replay replay;
        ck_assert_msg(ck_schedule_replay(&l.w.chain, &s, &replay, NULL, NULL, &err) == CK_OK, "%s", err.msg);
        ck_exec_reset(l.e);
        run_result got = run(l.e, &s, 0);
        fprintf(stderr, "%s %s on %zu stages: tracked %llu, replayed %llu (baseline %llu)\n",
                l.w.model->name, ck_lower_keep_name(k), used,
                (unsigned long long)got.stats.activation_peak_bytes,
                (unsigned long long)replay.peak_bytes, (unsigned long long)base.peak_bytes);
        ck_assert_uint_gt(used, 0);
        ck_assert_uint_lt(replay.peak_bytes, base.peak_bytes);
        expect_as_baseline(&l, &want, &got, &s, &replay, ck_lower_keep_name(k));
        ck_schedule_free(&s);
    }
    run_free(&want);
    unload(&l);
}

START_TEST(variants_run_as_the_baseline)
{
    variants_match_baseline("models/gpt2-tiny.json");
    variants_match_baseline("models/llama-tiny.json");
    variants_match_baseline("models/gpt2-tiny-bf16.json");
}
END_TEST

/* gpt2-tiny: live bytes after every operation are the replay's; so are the peaks of every
 * operation but F_all, whose measured peak may stay under the prediction. */
START_TEST(gpt2_tiny_trace_equals_replay)
{
    loaded l;
    load(&l, "models/gpt2-tiny.json", false);
    ck_schedule base = {0};
    ck_err err = {{0}};
    ck_assert_int_eq(ck_schedule_baseline(&l.w.chain, &base, &err), CK_OK);
    size_t differ = trace_matches_replay(l.e, &l.w.chain, &base, "gpt2-tiny baseline", l.lower);
    uint64_t budget = middle_budget(&l);
    for (const ck_planner *const *p = ck_planners; *p; p++) {
        ck_plan_result r;
        ck_replay replay;
        if (!plan(&l.w.chain, *p, budget, &r, &replay))
            continue;
        ck_exec_reset(l.e);
        differ += trace_matches_replay(l.e, &l.w.chain, &r.schedule, (*p)->name, l.lower);
        ck_planner_result_free(&r);
    }
    fprintf(stderr, "gpt2-tiny trace: %zu F_all peaks under the replay's\n", differ);
    ck_schedule_free(&base);
    unload(&l);
}
END_TEST

START_TEST(mlp_deep_plans_match_baseline)
{
    model_matches_baseline("models/mlp-deep.json", CK_GRAN_BLOCK);
}
END_TEST

START_TEST(gpt2_tiny_plans_match_baseline)
{
    model_matches_baseline("models/gpt2-tiny.json", CK_GRAN_BLOCK);
}
END_TEST

/* Stages inside a layer: the residual stream crosses each half. */
START_TEST(gpt2_tiny_op_stages_match_baseline)
{
    model_matches_baseline("models/gpt2-tiny.json", CK_GRAN_OP);
}
END_TEST

START_TEST(llama_tiny_plans_match_baseline)
{
    model_matches_baseline("models/llama-tiny.json", CK_GRAN_BLOCK);
}
END_TEST

/* Recomputed dropout draws the first pass's masks again only with the counter-based
 * generator; a sequential one gives other masks, hence other gradients. */
START_TEST(dropout_under_recompute)
{
    for (int stateful = 0; stateful <= 1; stateful++) {
        loaded l;
    load(&l, "models/gpt2-tiny.json", stateful);
        run_result want = run_baseline(&l);
        ck_plan_result r;
        ck_replay replay;
        ck_assert(plan(&l.w.chain, &ck_planner_dp, middle_budget(&l), &r, &replay));
        ck_assert_uint_gt(replay.count[CK_F_CK] + replay.count[CK_F_NONE], 0);
        ck_exec_reset(l.e);
        run_result got = run(l.e, &r.schedule, 0);
        ck_assert_int_eq(same_grads(&want, &got), !stateful);
        /* The first forward draws what the baseline drew: only the gradients move. */
        ck_assert(memcmp(&want.stats.loss, &got.stats.loss, sizeof got.stats.loss) == 0);
        run_free(&got);
        run_free(&want);
        ck_planner_result_free(&r);
        unload(&l);
    }
}
END_TEST

START_TEST(missing_tensor_is_refused)
{
    loaded l;
    load(&l, "models/gpt2-tiny.json", false);
    size_t L = l.w.chain.n_stages;
    ck_schedule s = {0};
    for (size_t i = 0; i < L; i++)
        ck_assert(ck_schedule_push(&s, i + 1 == L ? CK_F_CK : CK_F_ALL, i));
    ck_assert(ck_schedule_push(&s, CK_LOSS, 0));
    for (size_t i = L; i-- > 0;)
        ck_assert(ck_schedule_push(&s, CK_B, i));
    ck_err err = {{0}};
    ck_step_stats stats;
    ck_assert_int_eq(ck_exec_step(l.e, &s, 0, &stats, NULL, &err), CK_ERR_INPUT);
    char want[64];
    snprintf(want, sizeof want, "schedule[%zu] (B %zu): needs x̄_%zu", L + 1, L - 1, L);
    ck_assert_msg(strstr(err.msg, want), "%s", err.msg);
    assert_only_static_live(l.e);
    /* Still usable afterwards. */
    run_result r = run_baseline(&l);
    run_free(&r);
    ck_schedule_free(&s);
    unload(&l);
}
END_TEST

START_TEST(chain_refuses_out_of_range_stage)
{
    ck_chain c;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chaingen_hetero3(&c, &err), CK_OK);
    ck_exec *e;
    ck_exec_opts opts = {.seed = 1, .skip_chain_work = true};
    ck_assert_int_eq(ck_exec_create(NULL, &c, NULL, &opts, &e, &err), CK_OK);
    ck_schedule s = {0};
    ck_assert(ck_schedule_push(&s, CK_F_ALL, 0) && ck_schedule_push(&s, CK_F_ALL, 0));
    ck_assert_int_eq(ck_exec_step(e, &s, 0, NULL, NULL, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "schedule[1] (F_all 0)"), "%s", err.msg);
    s.n = 0;
    ck_assert(ck_schedule_push(&s, CK_F_CK, 7));
    ck_assert_int_eq(ck_exec_step(e, &s, 0, NULL, NULL, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "schedule[0] (F_ck 7)"), "%s", err.msg);
    assert_only_static_live(e);
    ck_schedule_free(&s);
    ck_exec_free(e);
    ck_chain_free(&c);
}
END_TEST

/* Two steps move the parameters (the same step's data gives other gradients); a reset puts
 * them back exactly. */
static void optimizer_trains(const char *path)
{
    loaded l;
    load(&l, path, false);
    ck_schedule base = {0};
    ck_err err = {{0}};
    ck_assert_int_eq(ck_schedule_baseline(&l.w.chain, &base, &err), CK_OK);
    run_result first = run(l.e, &base, 0), second = run(l.e, &base, 0);
    ck_assert(!same_grads(&first, &second));
    ck_exec_reset(l.e);
    run_result again = run(l.e, &base, 0);
    ck_assert(same_grads(&first, &again));
    run_free(&first);
    run_free(&second);
    run_free(&again);
    ck_schedule_free(&base);
    unload(&l);
}

START_TEST(optimizer_adam_and_reset)
{
    optimizer_trains("models/gpt2-tiny.json");
}
END_TEST

START_TEST(optimizer_momentum_and_reset)
{
    optimizer_trains("models/mlp-deep.json");
}
END_TEST

/* Inputs are drawn as floats or token ids; any other dtype is refused by name. */
START_TEST(refuses_inputs_it_cannot_draw)
{
    ck_workload w;
    ck_err err = {{0}};
    ck_workload_opts wo;
    ck_workload_opts_default(&wo);
    ck_assert_int_eq(ck_workload_load("models/mlp-deep.json", &wo, &w, &err), CK_OK);
    w.model->tensors[1].type.dtype = CK_U8;
    ck_exec *e = NULL;
    ck_exec_opts opts = {.seed = 1};
    ck_assert_int_eq(ck_exec_create(w.model, &w.chain, w.stage_first, &opts, &e, &err),
                     CK_ERR_INPUT);
    ck_assert_ptr_null(e);
    ck_assert_msg(strstr(err.msg, "is u8; the executor takes float and int32 inputs only"), "%s",
                  err.msg);
    ck_workload_free(&w);
}
END_TEST

/* 16-bit models: bf16 everything with f32 master weights, the amp recipe (bf16
 * activations, f32 parameters), f16 everything without master weights. */
START_TEST(gpt2_tiny_bf16_plans_match_baseline)
{
    model_matches_baseline("models/gpt2-tiny-bf16.json", CK_GRAN_BLOCK);
}
END_TEST

START_TEST(gpt2_tiny_amp_op_stages_match_baseline)
{
    model_matches_baseline("models/gpt2-tiny-amp.json", CK_GRAN_OP);
}
END_TEST

START_TEST(llama_tiny_f16_plans_match_baseline)
{
    model_matches_baseline("models/llama-tiny-f16.json", CK_GRAN_BLOCK);
}
END_TEST

static Suite *exec_suite(void)
{
    Suite *s = suite_create("exec");
    TCase *tc = tcase_create("exec");
    tcase_set_timeout(tc, 600);
    /* In the parent, before each test's process is forked: steps are timed and the
     * resident peak read with freed memory kept, as ckplan's main sets it. */
    tcase_add_unchecked_fixture(tc, ck_mem_keep_freed_memory, NULL);
    tcase_add_test(tc, memory_counts_by_kind);
    tcase_add_test(tc, rss_peak_follows_touched_memory);
    tcase_add_test(tc, chain_peak_equals_replay);
    tcase_add_test(tc, chain_gradient_depends_on_data);
    tcase_add_test(tc, chain_step_takes_its_time);
    tcase_add_test(tc, chain_trace_equals_replay);
    tcase_add_test(tc, gpt2_tiny_trace_equals_replay);
    tcase_add_test(tc, variants_run_as_the_baseline);
    tcase_add_test(tc, chain_refuses_out_of_range_stage);
    tcase_add_test(tc, mlp_deep_plans_match_baseline);
    tcase_add_test(tc, gpt2_tiny_plans_match_baseline);
    tcase_add_test(tc, gpt2_tiny_op_stages_match_baseline);
    tcase_add_test(tc, llama_tiny_plans_match_baseline);
    tcase_add_test(tc, dropout_under_recompute);
    tcase_add_test(tc, missing_tensor_is_refused);
    tcase_add_test(tc, optimizer_adam_and_reset);
    tcase_add_test(tc, optimizer_momentum_and_reset);
    tcase_add_test(tc, refuses_inputs_it_cannot_draw);
    tcase_add_test(tc, gpt2_tiny_bf16_plans_match_baseline);
    tcase_add_test(tc, gpt2_tiny_amp_op_stages_match_baseline);
    tcase_add_test(tc, llama_tiny_f16_plans_match_baseline);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(exec_suite)
