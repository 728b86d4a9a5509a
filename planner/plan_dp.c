/* dp: the fastest persistent schedule within the budget (Beaumont et al. 2019), by dynamic
 * programming over subproblems Seg(s, t) (see persistent.h) and the memory m they may use.
 * docs/planners.md derives the recurrence and its memory accounting. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "planner/persistent.h"
#include "planner/plan_dp.h"
#include "planner/planner.h"
#include "planner/size.h"

/* Above this the tables are refused rather than allocated. */
#define DP_TABLE_LIMIT (1ULL << 30)

/* Sizes in memory units, each rounded up separately, so that a peak counted in units,
 * times the unit, is never below the same peak in bytes. */
typedef struct {
    size_t L;
    uint64_t *x;    /* |x_i| = |y_i|, 0 <= i <= L */
    uint64_t *xbar; /* |x̄_{i+1}|, stage i */
    uint64_t *ftmp, *btmp;
    uint64_t loss_tmp;
} unit_sizes;

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    uint64_t r;
    return ck_size_add(a, b, &r) ? r : UINT64_MAX;
}

static uint64_t max2(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static void sizes_free(unit_sizes *z)
{
    free(z->x);
    free(z->xbar);
    free(z->ftmp);
    free(z->btmp);
}

static int sizes_init(unit_sizes *z, const ck_chain *c, uint64_t unit, ck_err *err)
{
    size_t L = c->n_stages;
    *z = (unit_sizes){.L = L,
                      .x = malloc((L + 1) * sizeof *z->x),
                      .xbar = malloc(L * sizeof *z->xbar),
                      .ftmp = malloc(L * sizeof *z->ftmp),
                      .btmp = malloc(L * sizeof *z->btmp),
                      .loss_tmp = ck_size_ceil_div(c->loss_bwd_tmp_bytes, unit)};
    if (!z->x || !z->xbar || !z->ftmp || !z->btmp) {
        sizes_free(z);
        return ck_err_oom(err);
    }
    for (size_t i = 0; i <= L; i++)
        z->x[i] = ck_size_ceil_div(ck_chain_x_bytes(c, i), unit);
    for (size_t i = 0; i < L; i++) {
        z->xbar[i] = ck_size_ceil_div(c->stages[i].saved_bytes, unit);
        z->ftmp[i] = ck_size_ceil_div(c->stages[i].fwd_tmp_bytes, unit);
        z->btmp[i] = ck_size_ceil_div(c->stages[i].bwd_tmp_bytes, unit);
    }
    return CK_OK;
}

/* Peaks of the operations of each shape, counting only the subproblem's own memory (x_s is
 * outside it). All sums saturate: a saturated peak exceeds every budget. */

/* y_{t+1}, live from the start of Seg(s, t) until its F_all t; absent for the last stage. */
static uint64_t later_grad(const unit_sizes *z, size_t t)
{
    return t + 1 < z->L ? z->x[t + 1] : 0;
}

/* B s, with x̄_{s+1}, y_{s+1} and the new y_s held. */
static uint64_t backward_peak(const unit_sizes *z, size_t s)
{
    return sat_add(sat_add(z->xbar[s], z->x[s + 1]), sat_add(z->x[s], z->btmp[s]));
}

static uint64_t base_peak(const unit_sizes *z, size_t s)
{
    uint64_t fwd = sat_add(sat_add(later_grad(z, s), z->xbar[s]), z->ftmp[s]);
    uint64_t peak = max2(fwd, backward_peak(z, s));
    if (s + 1 == z->L)
        peak = max2(peak, sat_add(sat_add(z->xbar[s], z->x[s + 1]), z->loss_tmp));
    return peak;
}

/* F_all s and B s of a chain; Seg(s+1, t) runs between them with x̄_{s+1} held. */
static uint64_t chain_peak(const unit_sizes *z, size_t s, size_t t)
{
    uint64_t fwd = sat_add(sat_add(later_grad(z, t), z->xbar[s]), z->ftmp[s]);
    return max2(fwd, backward_peak(z, s));
}

/* The k-th forward of a leaf of Seg(s, t): F_ck s holds x_{s+1}; F_none k holds x_k and
 * x_{k+1} until it frees x_k. */
static uint64_t advance_peak(const unit_sizes *z, size_t s, size_t k, size_t t)
{
    uint64_t held = sat_add(later_grad(z, t), z->x[k + 1]);
    return sat_add(k == s ? held : sat_add(held, z->x[k]), z->ftmp[k]);
}

static double base_time(const ck_chain *c, size_t s)
{
    double loss = s + 1 == c->n_stages ? c->loss_bwd_time : 0;
    return c->stages[s].fwd_time + loss + c->stages[s].bwd_time;
}

/* Seg(s, t) is row s + t(t+1)/2 of a triangle; rows of equal t are contiguous. */
static size_t pair_index(size_t s, size_t t)
{
    return t * (t + 1) / 2 + s;
}

/* The smallest peak of Seg(s, t) in bytes, exact, the time of that schedule (the faster
 * among equal peaks) and its shape. */
typedef struct {
    const unit_sizes *z;
    uint64_t *peak;
    double *time;
    uint32_t *leaf;
} min_peak_table;

/* Both fills poll stop once a diagonal: at most a few tens of milliseconds apart. */
static int min_peak_fill(min_peak_table *mp, const ck_chain *c, const atomic_int *stop, ck_err *err)
{
    const unit_sizes *z = mp->z;
    size_t L = z->L;
    int rc = CK_OK;
    for (size_t d = 0; d < L && (rc = ck_err_check_stop(stop, err)) == CK_OK; d++)
        for (size_t s = 0, t = d; t < L; s++, t++) {
            size_t here = pair_index(s, t);
            if (d == 0) {
                mp->peak[here] = base_peak(z, s);
                mp->time[here] = base_time(c, s);
                mp->leaf[here] = 0;
                continue;
            }
            size_t sub = pair_index(s + 1, t);
            uint64_t best = max2(chain_peak(z, s, t), sat_add(z->xbar[s], mp->peak[sub]));
            double best_time = c->stages[s].fwd_time + c->stages[s].bwd_time + mp->time[sub];
            uint32_t best_leaf = 0;
            uint64_t fwd = 0;
            double fwd_time = 0;
            for (size_t j = s + 1; j <= t; j++) {
                fwd = max2(fwd, advance_peak(z, s, j - 1, t));
                fwd_time += c->stages[j - 1].fwd_time;
                size_t right = pair_index(j, t), left = pair_index(s, j - 1);
                uint64_t peak = max2(max2(fwd, sat_add(z->x[j], mp->peak[right])), mp->peak[left]);
                double time = fwd_time + mp->time[right] + mp->time[left];
                if (peak < best || (peak == best && time < best_time)) {
                    best = peak;
                    best_time = time;
                    best_leaf = (uint32_t)j;
                }
            }
            mp->peak[here] = best;
            mp->time[here] = best_time;
            mp->leaf[here] = best_leaf;
        }
    return rc;
}

static void min_peak_decide(void *ctx, size_t s, size_t t, uint64_t value, ck_seg_choice *out)
{
    (void)value;
    const min_peak_table *mp = ctx;
    *out = (ck_seg_choice){.leaf = mp->leaf[pair_index(s, t)]};
}

/* The fastest time of Seg(s, t) within m units, 0 <= m <= slots (INFINITY when none fits),
 * and its shape: one row of slots + 1 entries per subproblem. */
typedef struct {
    const unit_sizes *z;
    size_t width;
    double *time;
    uint32_t *leaf;
} time_table;

static int time_fill(time_table *tt, const ck_chain *c, const atomic_int *stop, ck_err *err)
{
    const unit_sizes *z = tt->z;
    size_t L = z->L, w = tt->width;
    int rc = CK_OK;
    for (size_t d = 0; d < L && (rc = ck_err_check_stop(stop, err)) == CK_OK; d++)
        for (size_t s = 0, t = d; t < L; s++, t++) {
            double *row = tt->time + pair_index(s, t) * w;
            uint32_t *leaf = tt->leaf + pair_index(s, t) * w;
            for (size_t m = 0; m < w; m++)
                leaf[m] = 0;
            if (d == 0) {
                uint64_t peak = base_peak(z, s);
                for (size_t m = 0; m < w; m++)
                    row[m] = m >= peak ? base_time(c, s) : INFINITY;
                continue;
            }
            /* The chain's peak includes x̄_{s+1}, so m - x̄_{s+1} never wraps. */
            const double *sub = tt->time + pair_index(s + 1, t) * w;
            uint64_t peak = chain_peak(z, s, t);
            double own = c->stages[s].fwd_time + c->stages[s].bwd_time;
            for (size_t m = 0; m < w; m++)
                row[m] = m >= peak ? own + sub[m - z->xbar[s]] : INFINITY;
            uint64_t fwd = 0;
            double fwd_time = 0;
            for (size_t j = s + 1; j <= t; j++) {
                fwd = max2(fwd, advance_peak(z, s, j - 1, t));
                fwd_time += c->stages[j - 1].fwd_time;
                /* The advance's peak includes x_j, so m - x_j never wraps either. */
                const double *right = tt->time + pair_index(j, t) * w;
                const double *left = tt->time + pair_index(s, j - 1) * w;
                uint64_t xj = z->x[j];
                for (size_t m = fwd; m < w; m++) {
                    double time = fwd_time + right[m - xj] + left[m];
                    if (time < row[m]) {
                        row[m] = time;
                        leaf[m] = (uint32_t)j;
                    }
                }
            }
        }
    return rc;
}

static void time_decide(void *ctx, size_t s, size_t t, uint64_t m, ck_seg_choice *out)
{
    const time_table *tt = ctx;
    size_t j = tt->leaf[pair_index(s, t) * tt->width + m];
    if (j == 0)
        *out = (ck_seg_choice){.leaf = 0, .right = m - tt->z->xbar[s]};
    else
        *out = (ck_seg_choice){.leaf = j, .right = m - tt->z->x[j], .left = m};
}

/* Refuses tables above DP_TABLE_LIMIT: the time table (a double and a shape per
 * subproblem and memory value) plus the minimum-peak one. */
static int check_table_size(size_t L, uint64_t width, ck_err *err)
{
    uint64_t twice_pairs, entries, bytes, peak_bytes;
    bool ok = ck_size_mul(L, L + 1, &twice_pairs) && ck_size_mul(twice_pairs / 2, width, &entries) &&
              ck_size_mul(entries, sizeof(double) + sizeof(uint32_t), &bytes) &&
              ck_size_mul(twice_pairs / 2, sizeof(uint64_t) + sizeof(double) + sizeof(uint32_t),
                     &peak_bytes) &&
              ck_size_add(bytes, peak_bytes, &bytes);
    if (ok && bytes <= DP_TABLE_LIMIT)
        return CK_OK;
    return ck_err_fail(err, CK_ERR_INPUT,
                   "dp: %zu stages with %llu memory slots need a table of more than 1 GiB; "
                   "use fewer --slots or --granularity block",
                   L, (unsigned long long)(width - 1));
}

/* The fastest schedule in tt's slots if there is one, else the minimum-peak schedule (with
 * a 1-byte unit) when it fits in bytes, else CK_ERR_INFEASIBLE. */
static int plan_tables(const ck_chain *c, uint64_t budget, const atomic_int *stop,
                       min_peak_table *mp, time_table *tt, ck_plan_result *result,
                       uint64_t *min_budget, ck_err *err)
{
    size_t L = c->n_stages, pairs = L * (L + 1) / 2, top = pair_index(0, L - 1);
    int rc = min_peak_fill(mp, c, stop, err);
    if (rc != CK_OK)
        return rc;
    bool fits = budget >= sat_add(c->input_bytes, mp->peak[top]);
    if (fits) {
        tt->time = malloc(pairs * tt->width * sizeof *tt->time);
        tt->leaf = malloc(pairs * tt->width * sizeof *tt->leaf);
        if (!tt->time || !tt->leaf)
            return ck_err_oom(err);
        if ((rc = time_fill(tt, c, stop, err)) != CK_OK)
            return rc;
        if (isfinite(tt->time[top * tt->width + tt->width - 1]))
            return ck_persistent_emit(c, time_decide, tt, tt->width - 1, &result->schedule, err);
    }
    /* Either the budget is below the smallest peak, or rounding sizes up to units lost all
     * the schedules that fit in bytes: the minimum-peak schedule answers both. */
    rc = ck_persistent_emit(c, min_peak_decide, mp, 0, &result->schedule, err);
    if (rc != CK_OK)
        return rc;
    if (fits) {
        result->memory_unit = 1;
        return CK_OK;
    }
    ck_replay replay;
    rc = ck_schedule_replay(c, &result->schedule, &replay, NULL, NULL, err);
    ck_schedule_free(&result->schedule);
    if (rc != CK_OK)
        return rc;
    *min_budget = replay.peak_bytes;
    return ck_err_fail(err, CK_ERR_INFEASIBLE,
                   "dp: no persistent schedule fits in %llu bytes; the smallest peak is %llu bytes",
                   (unsigned long long)budget, (unsigned long long)replay.peak_bytes);
}

static int plan_dp(const ck_chain *c, uint64_t budget, const ck_planner_opts *opts,
                   ck_plan_result *result, uint64_t *min_budget, ck_err *err)
{
    if (opts->slots == 0)
        return ck_err_fail(err, CK_ERR_INPUT, "dp: --slots must be at least 1");
    size_t L = c->n_stages;
    uint64_t avail = budget > c->input_bytes ? budget - c->input_bytes : 0;
    uint64_t unit = avail > opts->slots ? ck_size_ceil_div(avail, opts->slots) : 1;
    uint64_t slots = avail / unit;
    result->memory_unit = unit;
    int rc = check_table_size(L, slots + 1, err);
    if (rc != CK_OK)
        return rc;
    unit_sizes bytes, units;
    rc = sizes_init(&bytes, c, 1, err);
    if (rc != CK_OK)
        return rc;
    rc = sizes_init(&units, c, unit, err);
    if (rc != CK_OK) {
        sizes_free(&bytes);
        return rc;
    }
    size_t pairs = L * (L + 1) / 2;
    min_peak_table mp = {&bytes, malloc(pairs * sizeof *mp.peak), malloc(pairs * sizeof *mp.time),
                         malloc(pairs * sizeof *mp.leaf)};
    time_table tt = {&units, slots + 1, NULL, NULL};
    if (!mp.peak || !mp.time || !mp.leaf)
        rc = ck_err_oom(err);
    else
        rc = plan_tables(c, budget, opts->stop, &mp, &tt, result, min_budget, err);
    free(mp.peak);
    free(mp.time);
    free(mp.leaf);
    free(tt.time);
    free(tt.leaf);
    sizes_free(&bytes);
    sizes_free(&units);
    return rc;
}

int ck_plan_dp_min_peak(const ck_chain *c, uint64_t *peak, ck_schedule *out, ck_err *err)
{
    unit_sizes bytes;
    int rc = sizes_init(&bytes, c, 1, err);
    if (rc != CK_OK)
        return rc;
    size_t pairs = c->n_stages * (c->n_stages + 1) / 2;
    min_peak_table mp = {&bytes, malloc(pairs * sizeof *mp.peak), malloc(pairs * sizeof *mp.time),
                         malloc(pairs * sizeof *mp.leaf)};
    rc = mp.peak && mp.time && mp.leaf ? min_peak_fill(&mp, c, NULL, err) : ck_err_oom(err);
    if (rc == CK_OK) {
        *peak = sat_add(c->input_bytes, mp.peak[pair_index(0, c->n_stages - 1)]);
        rc = ck_persistent_emit(c, min_peak_decide, &mp, 0, out, err);
    }
    free(mp.peak);
    free(mp.time);
    free(mp.leaf);
    sizes_free(&bytes);
    return rc;
}

const ck_planner ck_planner_dp = {
    "dp", "fastest persistent schedule within the budget (Beaumont et al. 2019)", plan_dp};
