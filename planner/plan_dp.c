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
 * times the unit, is never below the same peak in bytes. A stage's variants (planner/chain.h)
 * are numbered first[s] + v, "all" (v = 0) first. */
typedef struct {
    size_t L;
    uint64_t *x;    /* |x_i| = |y_i|, 0 <= i <= L */
    uint64_t *ftmp; /* stage i's forward transient: F_ck and F_none */
    size_t *first;  /* L + 1 entries */
    uint64_t *xbar, *vftmp, *btmp; /* per variant: |x̄_{i+1}|, F_all's and B's transients */
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
    free(z->ftmp);
    free(z->first);
    free(z->xbar);
    free(z->vftmp);
    free(z->btmp);
}

/* Variants dp chooses among for stage i: all of them, or "all" alone. */
static size_t stage_variants(const ck_chain *c, size_t i, bool variants)
{
    return 1 + (variants ? c->stages[i].n_variants : 0);
}

static size_t count_variants(const ck_chain *c, bool variants)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_stages; i++)
        n += stage_variants(c, i, variants);
    return n;
}

static int sizes_init(unit_sizes *z, const ck_chain *c, uint64_t unit, bool variants, ck_err *err)
{
    size_t L = c->n_stages, V = count_variants(c, variants);
    *z = (unit_sizes){.L = L,
                      .x = malloc((L + 1) * sizeof *z->x),
                      .ftmp = malloc(L * sizeof *z->ftmp),
                      .first = malloc((L + 1) * sizeof *z->first),
                      .xbar = malloc(V * sizeof *z->xbar),
                      .vftmp = malloc(V * sizeof *z->vftmp),
                      .btmp = malloc(V * sizeof *z->btmp),
                      .loss_tmp = ck_size_ceil_div(c->loss_bwd_tmp_bytes, unit)};
    if (!z->x || !z->ftmp || !z->first || !z->xbar || !z->vftmp || !z->btmp) {
        sizes_free(z);
        return ck_err_oom(err);
    }
    for (size_t i = 0; i <= L; i++)
        z->x[i] = ck_size_ceil_div(ck_chain_x_bytes(c, i), unit);
    z->first[0] = 0;
    for (size_t i = 0; i < L; i++) {
        z->ftmp[i] = ck_size_ceil_div(c->stages[i].fwd_tmp_bytes, unit);
        z->first[i + 1] = z->first[i] + stage_variants(c, i, variants);
        for (size_t v = 0; v < stage_variants(c, i, variants); v++) {
            ck_variant var = ck_chain_variant(c, i, v);
            z->xbar[z->first[i] + v] = ck_size_ceil_div(var.saved_bytes, unit);
            z->vftmp[z->first[i] + v] = ck_size_ceil_div(var.fwd_tmp_bytes, unit);
            z->btmp[z->first[i] + v] = ck_size_ceil_div(var.bwd_tmp_bytes, unit);
        }
    }
    return CK_OK;
}

static size_t variants_of(const unit_sizes *z, size_t s)
{
    return z->first[s + 1] - z->first[s];
}

/* Peaks of the operations of each shape, counting only the subproblem's own memory (x_s is
 * outside it), with stage s's F_all in variant v. All sums saturate: a saturated peak
 * exceeds every budget. */

/* y_{t+1}, live from the start of Seg(s, t) until its F_all t; absent for the last stage. */
static uint64_t later_grad(const unit_sizes *z, size_t t)
{
    return t + 1 < z->L ? z->x[t + 1] : 0;
}

/* B s, with x̄_{s+1}, y_{s+1} and the new y_s held. */
static uint64_t backward_peak(const unit_sizes *z, size_t s, size_t v)
{
    size_t sv = z->first[s] + v;
    return sat_add(sat_add(z->xbar[sv], z->x[s + 1]), sat_add(z->x[s], z->btmp[sv]));
}

static uint64_t base_peak(const unit_sizes *z, size_t s, size_t v)
{
    size_t sv = z->first[s] + v;
    uint64_t fwd = sat_add(sat_add(later_grad(z, s), z->xbar[sv]), z->vftmp[sv]);
    uint64_t peak = max2(fwd, backward_peak(z, s, v));
    if (s + 1 == z->L)
        peak = max2(peak, sat_add(sat_add(z->xbar[sv], z->x[s + 1]), z->loss_tmp));
    return peak;
}

/* F_all s and B s of a chain; Seg(s+1, t) runs between them with x̄_{s+1} held. */
static uint64_t chain_peak(const unit_sizes *z, size_t s, size_t t, size_t v)
{
    size_t sv = z->first[s] + v;
    uint64_t fwd = sat_add(sat_add(later_grad(z, t), z->xbar[sv]), z->vftmp[sv]);
    return max2(fwd, backward_peak(z, s, v));
}

/* The k-th forward of a leaf of Seg(s, t): F_ck s holds x_{s+1}; F_none k holds x_k and
 * x_{k+1} until it frees x_k. */
static uint64_t advance_peak(const unit_sizes *z, size_t s, size_t k, size_t t)
{
    uint64_t held = sat_add(later_grad(z, t), z->x[k + 1]);
    return sat_add(k == s ? held : sat_add(held, z->x[k]), z->ftmp[k]);
}

/* F_all s and B s in variant v (and the loss between them for the last stage's base). */
static double saving_time(const ck_chain *c, size_t s, size_t v, bool base)
{
    double loss = base && s + 1 == c->n_stages ? c->loss_bwd_time : 0;
    return c->stages[s].fwd_time + loss + ck_chain_variant(c, s, v).bwd_time;
}

/* Seg(s, t) is row s + t(t+1)/2 of a triangle; rows of equal t are contiguous. */
static size_t pair_index(size_t s, size_t t)
{
    return t * (t + 1) / 2 + s;
}

/* The smallest peak of Seg(s, t) in bytes, exact, the time of that schedule (the faster
 * among equal peaks) and its shape: a leaf, or the variant of its F_all s. */
typedef struct {
    const unit_sizes *z;
    uint64_t *peak;
    double *time;
    uint32_t *leaf;
    uint8_t *variant;
} min_peak_table;

/* The base or chain of Seg(s, t) (base when s == t) with the least peak over s's variants. */
static void min_peak_saving(min_peak_table *mp, const ck_chain *c, size_t s, size_t t)
{
    const unit_sizes *z = mp->z;
    size_t here = pair_index(s, t), sub = s < t ? pair_index(s + 1, t) : 0;
    mp->leaf[here] = 0;
    for (size_t v = 0; v < variants_of(z, s); v++) {
        uint64_t peak = s == t ? base_peak(z, s, v)
                               : max2(chain_peak(z, s, t, v),
                                      sat_add(z->xbar[z->first[s] + v], mp->peak[sub]));
        double time = saving_time(c, s, v, s == t) + (s < t ? mp->time[sub] : 0);
        if (v == 0 || peak < mp->peak[here] || (peak == mp->peak[here] && time < mp->time[here])) {
            mp->peak[here] = peak;
            mp->time[here] = time;
            mp->variant[here] = (uint8_t)v;
        }
    }
}

/* Both fills poll stop once a diagonal: at most a few tens of milliseconds apart. */
static int min_peak_fill(min_peak_table *mp, const ck_chain *c, const atomic_int *stop, ck_err *err)
{
    const unit_sizes *z = mp->z;
    size_t L = z->L;
    int rc = CK_OK;
    for (size_t d = 0; d < L && (rc = ck_err_check_stop(stop, err)) == CK_OK; d++)
        for (size_t s = 0, t = d; t < L; s++, t++) {
            size_t here = pair_index(s, t);
            min_peak_saving(mp, c, s, t);
            uint64_t fwd = 0;
            double fwd_time = 0;
            for (size_t j = s + 1; j <= t; j++) {
                fwd = max2(fwd, advance_peak(z, s, j - 1, t));
                fwd_time += c->stages[j - 1].fwd_time;
                size_t right = pair_index(j, t), left = pair_index(s, j - 1);
                uint64_t peak = max2(max2(fwd, sat_add(z->x[j], mp->peak[right])), mp->peak[left]);
                double time = fwd_time + mp->time[right] + mp->time[left];
                if (peak < mp->peak[here] || (peak == mp->peak[here] && time < mp->time[here])) {
                    mp->peak[here] = peak;
                    mp->time[here] = time;
                    mp->leaf[here] = (uint32_t)j;
                }
            }
        }
    return rc;
}

static void min_peak_decide(void *ctx, size_t s, size_t t, uint64_t value, ck_seg_choice *out)
{
    (void)value;
    const min_peak_table *mp = ctx;
    size_t here = pair_index(s, t);
    *out = (ck_seg_choice){.leaf = mp->leaf[here], .variant = mp->variant[here]};
}

static size_t min_peak_base(void *ctx, size_t s, uint64_t value)
{
    (void)value;
    const min_peak_table *mp = ctx;
    return mp->variant[pair_index(s, s)];
}

/* The fastest time of Seg(s, t) within m units, 0 <= m <= slots (INFINITY when none fits),
 * and its shape: one row of slots + 1 entries per subproblem; the variant of a base's or a
 * chain's F_all s only when the chain has variants (else NULL: all are "all"). */
typedef struct {
    const unit_sizes *z;
    size_t width;
    double *time;
    uint32_t *leaf;
    uint8_t *variant;
} time_table;

/* Row m of Seg(s, t)'s base (s == t) or chain, the fastest over s's variants. */
static void time_saving(time_table *tt, const ck_chain *c, size_t s, size_t t)
{
    const unit_sizes *z = tt->z;
    size_t w = tt->width, here = pair_index(s, t) * w;
    double *row = tt->time + here;
    const double *sub = s < t ? tt->time + pair_index(s + 1, t) * w : NULL;
    for (size_t m = 0; m < w; m++)
        row[m] = INFINITY;
    for (size_t v = 0; v < variants_of(z, s); v++) {
        /* The chain's peak includes x̄_{s+1}, so m - x̄_{s+1} never wraps. */
        uint64_t peak = s == t ? base_peak(z, s, v) : chain_peak(z, s, t, v);
        uint64_t xbar = z->xbar[z->first[s] + v];
        double own = saving_time(c, s, v, s == t);
        for (size_t m = peak; m < w; m++) {
            double time = own + (sub ? sub[m - xbar] : 0);
            if (time < row[m]) {
                row[m] = time;
                if (tt->variant)
                    tt->variant[here + m] = (uint8_t)v;
            }
        }
    }
}

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
            time_saving(tt, c, s, t);
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

static size_t time_variant(const time_table *tt, size_t s, size_t t, uint64_t m)
{
    return tt->variant ? tt->variant[pair_index(s, t) * tt->width + m] : 0;
}

static void time_decide(void *ctx, size_t s, size_t t, uint64_t m, ck_seg_choice *out)
{
    const time_table *tt = ctx;
    size_t j = tt->leaf[pair_index(s, t) * tt->width + m];
    size_t v = time_variant(tt, s, t, m);
    if (j == 0)
        *out = (ck_seg_choice){.leaf = 0, .variant = v,
                               .right = m - tt->z->xbar[tt->z->first[s] + v]};
    else
        *out = (ck_seg_choice){.leaf = j, .right = m - tt->z->x[j], .left = m};
}

static size_t time_base(void *ctx, size_t s, uint64_t m)
{
    return time_variant(ctx, s, s, m);
}

static bool has_variants(const ck_chain *c, bool variants)
{
    return count_variants(c, variants) > c->n_stages;
}

/* Refuses tables above DP_TABLE_LIMIT: the time table (a double and a shape per
 * subproblem and memory value, and a variant when the chain has any) plus the minimum-peak
 * one. */
static int check_table_size(size_t L, uint64_t width, bool variants, ck_err *err)
{
    uint64_t twice_pairs, entries, bytes, peak_bytes;
    size_t entry = sizeof(double) + sizeof(uint32_t) + (variants ? sizeof(uint8_t) : 0);
    bool ok = ck_size_mul(L, L + 1, &twice_pairs) && ck_size_mul(twice_pairs / 2, width, &entries) &&
              ck_size_mul(entries, entry, &bytes) &&
              ck_size_mul(twice_pairs / 2,
                          sizeof(uint64_t) + sizeof(double) + sizeof(uint32_t) + sizeof(uint8_t),
                          &peak_bytes) &&
              ck_size_add(bytes, peak_bytes, &bytes);
    if (ok && bytes <= DP_TABLE_LIMIT)
        return CK_OK;
    return ck_err_fail(err, CK_ERR_INPUT,
                   "dp: %zu stages with %llu memory slots need a table of more than 1 GiB; "
                   "use fewer --slots or --granularity block",
                   L, (unsigned long long)(width - 1));
}

static int min_peak_alloc(min_peak_table *mp, const unit_sizes *z, ck_err *err)
{
    size_t pairs = z->L * (z->L + 1) / 2;
    *mp = (min_peak_table){z, malloc(pairs * sizeof *mp->peak), malloc(pairs * sizeof *mp->time),
                           malloc(pairs * sizeof *mp->leaf), malloc(pairs * sizeof *mp->variant)};
    return mp->peak && mp->time && mp->leaf && mp->variant ? CK_OK : ck_err_oom(err);
}

static void min_peak_free(min_peak_table *mp)
{
    free(mp->peak);
    free(mp->time);
    free(mp->leaf);
    free(mp->variant);
}

/* The fastest schedule in tt's slots if there is one, else the minimum-peak schedule (with
 * a 1-byte unit) when it fits in bytes, else CK_ERR_INFEASIBLE. */
static int plan_tables(const ck_chain *c, uint64_t budget, const ck_planner_opts *opts,
                       min_peak_table *mp, time_table *tt, ck_plan_result *result,
                       uint64_t *min_budget, ck_err *err)
{
    const atomic_int *stop = opts->stop;
    bool variants = has_variants(c, opts->variants);
    size_t L = c->n_stages, pairs = L * (L + 1) / 2, top = pair_index(0, L - 1);
    int rc = min_peak_fill(mp, c, stop, err);
    if (rc != CK_OK)
        return rc;
    bool fits = budget >= sat_add(c->input_bytes, mp->peak[top]);
    if (fits) {
        tt->time = malloc(pairs * tt->width * sizeof *tt->time);
        tt->leaf = malloc(pairs * tt->width * sizeof *tt->leaf);
        tt->variant = variants ? calloc(pairs * tt->width, sizeof *tt->variant) : NULL;
        if (!tt->time || !tt->leaf || (variants && !tt->variant))
            return ck_err_oom(err);
        if ((rc = time_fill(tt, c, stop, err)) != CK_OK)
            return rc;
        if (isfinite(tt->time[top * tt->width + tt->width - 1]))
            return ck_persistent_emit(c, time_decide, time_base, tt, tt->width - 1,
                                      &result->schedule, err);
    }
    /* Either the budget is below the smallest peak, or rounding sizes up to units lost all
     * the schedules that fit in bytes: the minimum-peak schedule answers both. */
    rc = ck_persistent_emit(c, min_peak_decide, min_peak_base, mp, 0, &result->schedule, err);
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
    bool variants = opts->variants;
    int rc = check_table_size(L, slots + 1, has_variants(c, variants), err);
    if (rc != CK_OK)
        return rc;
    unit_sizes bytes, units;
    rc = sizes_init(&bytes, c, 1, variants, err);
    if (rc != CK_OK)
        return rc;
    rc = sizes_init(&units, c, unit, variants, err);
    if (rc != CK_OK) {
        sizes_free(&bytes);
        return rc;
    }
    min_peak_table mp;
    time_table tt = {&units, slots + 1, NULL, NULL, NULL};
    rc = min_peak_alloc(&mp, &bytes, err);
    if (rc == CK_OK)
        rc = plan_tables(c, budget, opts, &mp, &tt, result, min_budget, err);
    min_peak_free(&mp);
    free(tt.time);
    free(tt.leaf);
    free(tt.variant);
    sizes_free(&bytes);
    sizes_free(&units);
    return rc;
}

int ck_plan_dp_min_peak(const ck_chain *c, uint64_t *peak, ck_schedule *out, ck_err *err)
{
    unit_sizes bytes;
    int rc = sizes_init(&bytes, c, 1, true, err);
    if (rc != CK_OK)
        return rc;
    min_peak_table mp;
    rc = min_peak_alloc(&mp, &bytes, err);
    if (rc == CK_OK)
        rc = min_peak_fill(&mp, c, NULL, err);
    if (rc == CK_OK) {
        *peak = sat_add(c->input_bytes, mp.peak[pair_index(0, c->n_stages - 1)]);
        rc = ck_persistent_emit(c, min_peak_decide, min_peak_base, &mp, 0, out, err);
    }
    min_peak_free(&mp);
    sizes_free(&bytes);
    return rc;
}

const ck_planner ck_planner_dp = {
    "dp", "fastest persistent schedule within the budget (Beaumont et al. 2019)", plan_dp};
