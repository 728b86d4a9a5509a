/* dp: the fastest persistent schedule within the budget (Beaumont et al. 2019), by dynamic
 * programming over subproblems Seg(s, t) (see persistent.h) and the memory m they may use.
 * docs/planners.md derives the recurrence and its memory accounting. */
#include <math.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <stdbool.h>
#include <stdlib.h>

#include "planner/dp_rows.h"
#include "planner/persistent.h"
#include "planner/plan_dp.h"
#include "planner/planner.h"
#include "planner/size.h"

/* Above this the tables are refused rather than allocated. */
#define DP_TABLE_LIMIT (1ULL << 30)

/* Sizes in memory units, each rounded up separately, so that a peak counted in units,
 * times the unit, is never below the same peak in bytes. A stage's variants (planner/chain.h)
 * are numbered first[s] + v, "all" (v = 0) first; dp chooses among them with --variants,
 * else every stage has "all" alone. */
typedef struct {
    size_t L;
    uint64_t *x;    /* |x_i| = |y_i|, 0 <= i <= L */
    uint64_t *ftmp; /* stage i's forward transient: F_ck and F_none */
    size_t *first;  /* L + 1 entries */
    uint64_t *xbar, *vftmp, *btmp; /* per variant: |x̄_{i+1}|, F_all's and B's transients */
    double *btime;                 /* per variant: B's time */
    uint64_t loss_tmp;
} unit_sizes;

/* Here rather than ck_size_add, so that the table's inner loops inline it. */
static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return b > UINT64_MAX - a ? UINT64_MAX : a + b;
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
    free(z->btime);
}

/* Variants dp chooses among for stage i: all of them, or "all" alone. */
static size_t stage_variants(const ck_chain *c, size_t i, bool variants)
{
    return 1 + (variants ? c->stages[i].n_variants : 0);
}

static int sizes_init(unit_sizes *z, const ck_chain *c, uint64_t unit, bool variants, ck_err *err)
{
    size_t L = c->n_stages, V = 0;
    for (size_t i = 0; i < L; i++)
        V += stage_variants(c, i, variants);
    *z = (unit_sizes){.L = L,
                      .x = malloc((L + 1) * sizeof *z->x),
                      .ftmp = malloc(L * sizeof *z->ftmp),
                      .first = malloc((L + 1) * sizeof *z->first),
                      .xbar = malloc(V * sizeof *z->xbar),
                      .vftmp = malloc(V * sizeof *z->vftmp),
                      .btmp = malloc(V * sizeof *z->btmp),
                      .btime = malloc(V * sizeof *z->btime),
                      .loss_tmp = ck_size_ceil_div(c->loss_bwd_tmp_bytes, unit)};
    if (!z->x || !z->ftmp || !z->first || !z->xbar || !z->vftmp || !z->btmp || !z->btime) {
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
            size_t iv = z->first[i] + v;
            z->xbar[iv] = ck_size_ceil_div(var.saved_bytes, unit);
            z->vftmp[iv] = ck_size_ceil_div(var.fwd_tmp_bytes, unit);
            z->btmp[iv] = ck_size_ceil_div(var.bwd_tmp_bytes, unit);
            z->btime[iv] = var.bwd_time;
        }
    }
    return CK_OK;
}

static size_t variants_of(const unit_sizes *z, size_t s)
{
    return z->first[s + 1] - z->first[s];
}

/* Peaks of the operations of each shape, counting only the subproblem's own memory (x_s is
 * outside it). All sums saturate: a saturated peak exceeds every budget. */

/* y_{t+1}, live from the start of a usual Seg(s, t) until its F_all t; absent for the last
 * stage, whose gradient the loss makes. */
static uint64_t later_grad(const unit_sizes *z, size_t t)
{
    return t + 1 < z->L ? z->x[t + 1] : 0;
}

/* B s after F_all s in variant v, with x̄_{s+1}, y_{s+1} and the new y_s held. */
static uint64_t backward_peak(const unit_sizes *z, size_t s, size_t v)
{
    size_t sv = z->first[s] + v;
    return sat_add(sat_add(z->xbar[sv], z->x[s + 1]), sat_add(z->x[s], z->btmp[sv]));
}

/* The least backward peak of stage s over its variants: every schedule runs B s in one. */
static uint64_t least_backward_peak(const unit_sizes *z, size_t s)
{
    uint64_t least = UINT64_MAX;
    for (size_t v = 0; v < variants_of(z, s); v++)
        least = backward_peak(z, s, v) < least ? backward_peak(z, s, v) : least;
    return least;
}

/* The most x̄_{s+1} of stage s's variants keeps. */
static uint64_t most_saved(const unit_sizes *z, size_t s)
{
    uint64_t most = 0;
    for (size_t v = 0; v < variants_of(z, s); v++)
        most = max2(most, z->xbar[z->first[s] + v]);
    return most;
}

/* The forward of stage k in a leaf of a subproblem entered with `grad` held: F_ck s holds
 * x_{s+1}; F_none k holds x_k and x_{k+1} until it frees x_k. */
static uint64_t advance_peak(const unit_sizes *z, size_t s, size_t k, uint64_t grad)
{
    uint64_t held = sat_add(grad, z->x[k + 1]);
    return sat_add(k == s ? held : sat_add(held, z->x[k]), z->ftmp[k]);
}

/* Subproblems are rows: the usual Seg(s, t) at s + t(t+1)/2 (rows of equal t are
 * contiguous), then Seg(s, L-1) after the loss, then Seg(s, L-1) with the plain loss. */
static size_t pair_index(size_t s, size_t t)
{
    return t * (t + 1) / 2 + s;
}

static size_t row_count(size_t L)
{
    return L * (L + 1) / 2 + 2 * L;
}

static size_t row_of(size_t L, size_t s, size_t t, ck_seg_kind kind)
{
    if (kind == CK_SEG_USUAL)
        return pair_index(s, t);
    return L * (L + 1) / 2 + (kind == CK_SEG_AFTER_LOSS ? 0 : L) + s;
}

/* The usual Seg(s, t) among usual rows ordered by s, then t: how a shape's left parts,
 * Seg(s, j-1) for j = s+1 .. t, follow each other. */
static size_t by_s(size_t L, size_t s, size_t t)
{
    return s * (2 * L - s + 1) / 2 + (t - s);
}

#define NO_ROW SIZE_MAX

/* One shape of a subproblem: its own operations (their time, and their largest peak inside
 * the subproblem) and its parts, each a row run with `shift` units fewer than the shape
 * has. The shape's time is (time + right) + left, summed in that order everywhere. */
typedef struct {
    size_t leaf;    /* as ck_seg_choice.leaf */
    size_t variant; /* base or chain: its F_all s's */
    double time;
    uint64_t peak;
    size_t right, left; /* rows, or NO_ROW */
    uint64_t right_shift, left_shift;
    size_t left_by_s; /* the left part's place among usual rows ordered by s, then t */
} dp_shape;

/* The base of Seg(s, s) with F_all s in variant v: F_all s, the loss if it is the usual
 * last stage, B s. */
static dp_shape base_shape(const ck_chain *c, const unit_sizes *z, size_t s, size_t v,
                           uint64_t grad, bool loss)
{
    size_t sv = z->first[s] + v;
    uint64_t peak = max2(sat_add(sat_add(grad, z->xbar[sv]), z->vftmp[sv]), backward_peak(z, s, v));
    if (loss)
        peak = max2(peak, sat_add(sat_add(z->xbar[sv], z->x[s + 1]), z->loss_tmp));
    double time = c->stages[s].fwd_time + (loss ? c->loss_bwd_time : 0) + z->btime[sv];
    return (dp_shape){0, v, time, peak, NO_ROW, NO_ROW, 0, 0, NO_ROW};
}

/* The chain of Seg(s, t), s < t, with F_all s in variant v; `kept` units stay held
 * through B s (see shapes_of). */
static dp_shape chain_shape(const ck_chain *c, const unit_sizes *z, size_t s, size_t t,
                            ck_seg_kind kind, size_t v, uint64_t grad, uint64_t kept)
{
    size_t sv = z->first[s] + v;
    uint64_t fwd = sat_add(sat_add(grad, z->xbar[sv]), z->vftmp[sv]);
    return (dp_shape){0, v, c->stages[s].fwd_time + z->btime[sv],
                      max2(fwd, sat_add(backward_peak(z, s, v), kept)),
                      row_of(z->L, s + 1, t, kind), NO_ROW, z->xbar[sv], 0, NO_ROW};
}

/* Room for every shape of a subproblem of a chain of L stages: the base or chain in each
 * variant, the leaves, the plain-loss leaf. */
static size_t shapes_room(size_t L)
{
    return L + CK_STAGE_MAX_VARIANTS;
}

/* Writes the first `room` shapes of Seg(s, t) of the given kind into out (all of them fit
 * in shapes_room) in the order that breaks ties: base or chain by variant, the leaves by j,
 * then the plain-loss leaf. The first variants_of(s) are the ones that store everything
 * they can (one per variant; none for the plain loss's Seg(L-1, L-1)).
 * `grad` is what is held on entry besides x_s: y_{t+1} (usual), y_L (after the loss; x_L
 * is then held too, outside the count, see docs/planners.md), nothing (plain loss: x_L is
 * made inside and stays, so whatever runs after it holds x_L's `kept` units). */
static size_t shapes_of(const ck_chain *c, const unit_sizes *z, size_t s, size_t t,
                        ck_seg_kind kind, size_t room, dp_shape *out)
{
    size_t L = z->L, n = 0;
    bool plain = kind == CK_SEG_PLAIN_LOSS;
    uint64_t grad = kind == CK_SEG_USUAL ? later_grad(z, t) : plain ? 0 : z->x[L];
    uint64_t kept = plain ? z->x[L] : 0;
    if (s == t && !plain) {
        for (size_t v = 0; v < variants_of(z, s) && n < room; v++)
            out[n++] = base_shape(c, z, s, v, grad, kind == CK_SEG_USUAL && s + 1 == L);
        return n;
    }
    for (size_t v = 0; s < t && v < variants_of(z, s) && n < room; v++)
        out[n++] = chain_shape(c, z, s, t, kind, v, grad, kept);
    uint64_t fwd = 0;
    double fwd_time = 0;
    for (size_t j = s + 1; j <= t + plain && n < room; j++) {
        fwd = max2(fwd, advance_peak(z, s, j - 1, grad));
        fwd_time += c->stages[j - 1].fwd_time;
        if (j <= t) {
            out[n++] = (dp_shape){j, 0, fwd_time, fwd, row_of(L, j, t, kind),
                                  row_of(L, s, j - 1, CK_SEG_USUAL), z->x[j], kept,
                                  by_s(L, s, j - 1)};
        } else {
            uint64_t loss = sat_add(sat_add(z->x[L], z->x[L]), z->loss_tmp);
            out[n++] = (dp_shape){L, 0, fwd_time + c->loss_bwd_time, max2(fwd, loss),
                                  row_of(L, s, t, CK_SEG_AFTER_LOSS), NO_ROW, z->x[L], 0, NO_ROW};
        }
    }
    return n;
}

/* The smallest peak of each subproblem in bytes, exact, the time of that schedule (the
 * faster among equal peaks) and its shape's leaf and variant. */
typedef struct {
    const ck_chain *c;
    const unit_sizes *z;
    uint64_t *peak;
    double *time;
    uint32_t *leaf;
    uint8_t *variant;
    size_t workers;
    dp_shape *shapes; /* shapes_room(L) per worker */
} min_peak_table;

static void min_peak_row(void *ctx, size_t worker, size_t s, size_t t, ck_seg_kind kind)
{
    min_peak_table *mp = ctx;
    dp_shape *shapes = mp->shapes + worker * shapes_room(mp->z->L);
    size_t n = shapes_of(mp->c, mp->z, s, t, kind, SIZE_MAX, shapes),
           here = row_of(mp->z->L, s, t, kind);
    uint64_t best = UINT64_MAX;
    double best_time = INFINITY;
    uint32_t best_leaf = 0;
    uint8_t best_variant = 0;
    for (size_t k = 0; k < n; k++) {
        const dp_shape *h = &shapes[k];
        uint64_t peak = h->peak;
        double time = h->time;
        if (h->right != NO_ROW) {
            peak = max2(peak, sat_add(h->right_shift, mp->peak[h->right]));
            time += mp->time[h->right];
        }
        if (h->left != NO_ROW) {
            peak = max2(peak, sat_add(h->left_shift, mp->peak[h->left]));
            time += mp->time[h->left];
        }
        if (k == 0 || peak < best || (peak == best && time < best_time)) {
            best = peak;
            best_time = time;
            best_leaf = (uint32_t)h->leaf;
            best_variant = (uint8_t)h->variant;
        }
    }
    mp->peak[here] = best;
    mp->time[here] = best_time;
    mp->leaf[here] = best_leaf;
    mp->variant[here] = best_variant;
}

static void min_peak_decide(void *ctx, size_t s, size_t t, ck_seg_kind kind, uint64_t value,
                            ck_seg_choice *out)
{
    (void)value;
    const min_peak_table *mp = ctx;
    size_t here = row_of(mp->z->L, s, t, kind);
    *out = (ck_seg_choice){.leaf = mp->leaf[here], .variant = mp->variant[here]};
}

static size_t min_peak_base(void *ctx, size_t s, ck_seg_kind kind, uint64_t value)
{
    (void)value;
    const min_peak_table *mp = ctx;
    return mp->variant[row_of(mp->z->L, s, s, kind)];
}

/* The kind of the whole problem's best schedule: the usual one unless the plain loss
 * is better (smaller, or equal and faster). */
static ck_seg_kind min_peak_top(const min_peak_table *mp, uint64_t *peak)
{
    size_t L = mp->z->L, usual = row_of(L, 0, L - 1, CK_SEG_USUAL),
           plain = row_of(L, 0, L - 1, CK_SEG_PLAIN_LOSS);
    bool p = mp->peak[plain] < mp->peak[usual] ||
             (mp->peak[plain] == mp->peak[usual] && mp->time[plain] < mp->time[usual]);
    *peak = mp->peak[p ? plain : usual];
    return p ? CK_SEG_PLAIN_LOSS : CK_SEG_USUAL;
}

/* The fastest time of each subproblem within m units, 0 <= m <= slots (INFINITY when none
 * fits). A row holds only the memory values [lo, hi] that can matter:
 * - below lo no schedule reaches it: what Seg(s, t) is run with is the budget less what
 *   the subproblems around it hold, and they hold at most x̄_1 .. x̄_s and x_L (reach);
 * - from hi on the time no longer improves: hi is the largest peak of the shapes that
 *   store everything they can (chains down to a base, or to the plain-loss leaf of the last
 *   stage, in every variant), where every one fits and the row has its least time
 *   (saturation). A row is read at min(m, hi).
 * Shapes are not stored: the way down finds them again (time_decide), at most 2L
 * subproblems. */
typedef struct {
    uint64_t lo;
    uint32_t offset; /* into values */
    uint32_t count;  /* values, lo .. hi */
} row_meta;

/* Offsets and counts fit 32 bits in every table that is not refused. */
_Static_assert(DP_TABLE_LIMIT / sizeof(double) <= UINT32_MAX, "row offsets are 32-bit");

static uint64_t row_hi(const row_meta *mt)
{
    return mt->lo + mt->count - 1;
}

typedef struct {
    const ck_chain *c;
    const unit_sizes *z;
    size_t width;      /* memory values, 0 .. slots */
    bool exact;        /* slots are bytes because --slots exact asked for them */
    size_t longest;    /* the most values a row holds */
    row_meta *meta;    /* per row */
    row_meta *by_s;    /* the usual rows' again, in by_s order: shapes read left parts so */
    double *values;
    double *zero;       /* longest zeros: the part a shape does not have, and constant parts */
    size_t workers;     /* filling the rows (planner/dp_rows.h) */
    dp_shape *shapes;   /* shapes_room(L) per worker; the way down uses worker 0's */
} time_table;

/* Sets every row's lo and hi, each after the rows it reads (planner/dp_rows.h). */
typedef struct {
    time_table *tt;
    const uint64_t *least; /* per row, its smallest peak in bytes, or NULL */
    uint64_t unit;
    uint64_t *held;        /* x̄_1 .. x̄_s, summed, per s (each the most its variants keep) */
    uint64_t *sat;         /* per row */
    uint64_t *backward;    /* per row, the largest peak of its backwards, in units */
} layout;

static void layout_row(void *ctx, size_t worker, size_t s, size_t t, ck_seg_kind kind)
{
    (void)worker;
    layout *ly = ctx;
    time_table *tt = ly->tt;
    const unit_sizes *z = tt->z;
    size_t L = z->L, r = row_of(L, s, t, kind);
    uint64_t w = tt->width;
    dp_shape first[CK_STAGE_MAX_VARIANTS];
    size_t n = shapes_of(tt->c, z, s, t, kind, variants_of(z, s), first);
    ly->sat[r] = 0;
    for (size_t k = 0; k < n && (k == 0 || first[k].leaf == 0); k++) {
        bool part = first[k].right != NO_ROW;
        ly->sat[r] = max2(ly->sat[r], part ? max2(first[k].peak, sat_add(first[k].right_shift,
                                                                       ly->sat[first[k].right]))
                                           : first[k].peak);
    }
    uint64_t backward = least_backward_peak(z, s);
    ly->backward[r] = first[0].right != NO_ROW ? max2(backward, ly->backward[first[0].right]) : backward;
    uint64_t most = sat_add(ly->held[s], kind == CK_SEG_PLAIN_LOSS ? 0 : z->x[L]);
    uint64_t reach = most < w - 1 ? w - 1 - most : 0;
    /* in units, each size rounded up, no peak is below the peak in bytes over the unit; and
     * every schedule runs the backward of every stage of the row */
    uint64_t fits = ly->least ? ck_size_ceil_div(ly->least[r], ly->unit) : ly->backward[r];
    uint64_t lo = max2(reach, fits < w - 1 ? fits : w - 1), hi = max2(lo, ly->sat[r]);
    uint64_t count = (hi < w - 1 ? hi : w - 1) - lo + 1;
    /* a count past 32 bits is a table refused for its size */
    tt->meta[r] = (row_meta){lo, 0, count < UINT32_MAX ? (uint32_t)count : UINT32_MAX};
}

/* Sets every row's lo, hi and offset, rows placed in their order (a column's side by
 * side); returns the room for their values, or UINT64_MAX when out of memory. */
static uint64_t time_layout(time_table *tt, const uint64_t *least, uint64_t unit)
{
    size_t L = tt->z->L, rows = row_count(L);
    layout ly = {tt, least, unit, malloc((L + 1) * sizeof *ly.held), malloc(rows * sizeof *ly.sat),
                 malloc(rows * sizeof *ly.backward)};
    bool laid = ly.held && ly.sat && ly.backward;
    if (laid) {
        ly.held[0] = 0;
        for (size_t s = 0; s < L; s++)
            ly.held[s + 1] = sat_add(ly.held[s], most_saved(tt->z, s));
        ck_err ignored; /* out of memory, which the result says */
        laid = ck_dp_rows_fill(L, tt->workers, NULL, &ly, layout_row, &ignored) == CK_OK;
    }
    uint64_t total = laid ? 0 : UINT64_MAX;
    tt->longest = 0;
    for (size_t r = 0; laid && r < rows; r++) {
        tt->meta[r].offset = total <= UINT32_MAX ? (uint32_t)total : 0; /* else refused */
        total += tt->meta[r].count;
        tt->longest = (size_t)max2(tt->longest, tt->meta[r].count);
    }
    for (size_t t = 0; laid && t < L; t++)
        for (size_t s = 0; s <= t; s++)
            tt->by_s[by_s(L, s, t)] = tt->meta[pair_index(s, t)];
    free(ly.held);
    free(ly.sat);
    free(ly.backward);
    return total;
}

/* Row r at m: INFINITY below its lo, its value at min(m, hi) from there. */
static double time_at(const time_table *tt, size_t r, uint64_t m)
{
    if (r == NO_ROW)
        return 0;
    const row_meta *mt = &tt->meta[r];
    if (m < mt->lo)
        return INFINITY;
    return tt->values[mt->offset + ((m < row_hi(mt) ? m : row_hi(mt)) - mt->lo)];
}

/* Memory values in a block of the relaxation; the bound is checked once a block. */
#define RELAX_BLOCK 16
/* Lanes of the innermost loop, written out so that compilers vectorise it at -O2. */
#define RELAX_LANES 8

/* out[i] = min(out[i], ((time + right[i]) + left[i]) + extra) for i < n, until out[i] is at
 * most `least` at a block's start: outs and candidates do not increase with i and no
 * candidate is below least, so nothing after can gain. A block is skipped when its last
 * candidate is not below its first out. False when it stopped. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static bool relax_run(double *restrict out, size_t n, double time, const double *restrict right,
                      const double *restrict left, double extra, double least)
{
    for (size_t b = 0; b < n; b += RELAX_BLOCK) {
        if (out[b] <= least)
            return false;
        size_t e = b + RELAX_BLOCK < n ? b + RELAX_BLOCK : n, i = b;
        if (((time + right[e - 1]) + left[e - 1]) + extra >= out[b])
            continue;
        if (((time + right[e - 1]) + left[e - 1]) + extra >= out[b])
            continue;
        for (; i + RELAX_LANES <= e; i += RELAX_LANES) {
            double v[RELAX_LANES];
            for (size_t k = 0; k < RELAX_LANES; k++)
                v[k] = ((time + right[i + k]) + left[i + k]) + extra;
            for (size_t k = 0; k < RELAX_LANES; k++)
                out[i + k] = v[k] < out[i + k] ? v[k] : out[i + k];
        }
        for (; i < e; i++) {
            double v = ((time + right[i]) + left[i]) + extra;
            out[i] = v < out[i] ? v : out[i];
        }
    }
    return true;
}

/* A part of a shape over the memory values [from, to] of its row: its values where it is
 * below its hi, then its saturated value. `until` is the last m at which it still varies. */
typedef struct {
    const double *values; /* at m, values[m - from] */
    double last;
    uint64_t until;
} part_view;

static part_view part_of(const time_table *tt, const row_meta *mt, uint64_t shift, uint64_t from)
{
    if (!mt)
        return (part_view){tt->zero, 0, 0};
    /* from - shift >= lo: relax starts where the part fits */
    const double *values = tt->values + mt->offset;
    return (part_view){values + (from - shift - mt->lo), values[mt->count - 1], row_hi(mt) + shift};
}

/* row = min(row, the shape's time) over the row's memory values at which the shape fits:
 * (time + right) + left summed as time_decide sums it, in pieces where each part varies or
 * is constant. The shape's least time is at the most memory (rounding is monotonic). */
static void relax(const time_table *tt, const row_meta *mt, const dp_shape *h)
{
    const row_meta *rm = h->right == NO_ROW ? NULL : &tt->meta[h->right];
    const row_meta *lm = h->left == NO_ROW ? NULL : &tt->by_s[h->left_by_s];
    uint64_t lo = mt->lo, hi = row_hi(mt);
    uint64_t from = max2(lo, max2(h->peak, max2(h->right_shift, h->left_shift)));
    from = max2(from, max2(rm ? sat_add(rm->lo, h->right_shift) : 0, lm ? sat_add(lm->lo, h->left_shift) : 0));
    if (from > hi)
        return;
    part_view right = part_of(tt, rm, h->right_shift, from);
    part_view left = part_of(tt, lm, h->left_shift, from);
    double least = (h->time + right.last) + left.last;
    double *row = tt->values + mt->offset + (from - lo);
    uint64_t m = from;
    while (m <= hi) {
        bool r_flat = m > right.until, l_flat = m > left.until;
        uint64_t end = hi;
        if (!r_flat && right.until < end)
            end = right.until;
        if (!l_flat && left.until < end)
            end = left.until;
        size_t n = (size_t)(end - m + 1), at = (size_t)(m - from);
        bool more = relax_run(row + at, n, r_flat ? h->time + right.last : h->time,
                              r_flat ? tt->zero : right.values + at, l_flat ? tt->zero : left.values + at,
                              l_flat ? left.last : 0, least);
        if (!more)
            return;
        m = end + 1;
    }
}

static void time_row(void *ctx, size_t worker, size_t s, size_t t, ck_seg_kind kind)
{
    time_table *tt = ctx;
    dp_shape *shapes = tt->shapes + worker * shapes_room(tt->z->L);
    size_t L = tt->z->L;
    const row_meta *mt = &tt->meta[row_of(L, s, t, kind)];
    double *row = tt->values + mt->offset;
    for (uint32_t i = 0; i < mt->count; i++)
        row[i] = INFINITY;
    size_t n = shapes_of(tt->c, tt->z, s, t, kind, SIZE_MAX, shapes);
    for (size_t k = 0; k < n; k++)
        relax(tt, mt, &shapes[k]);
}

/* The first shape whose time at min(m, hi) is the least: what the fill computed, summed
 * alike. Its parts get what they need there, never more than m allows. */
static void time_decide(void *ctx, size_t s, size_t t, ck_seg_kind kind, uint64_t m,
                        ck_seg_choice *out)
{
    time_table *tt = ctx;
    const row_meta *mt = &tt->meta[row_of(tt->z->L, s, t, kind)];
    if (m > row_hi(mt))
        m = row_hi(mt);
    size_t n = shapes_of(tt->c, tt->z, s, t, kind, SIZE_MAX, tt->shapes);
    double best = INFINITY;
    *out = (ck_seg_choice){0};
    for (size_t k = 0; k < n; k++) {
        const dp_shape *h = &tt->shapes[k];
        if (m < h->peak || m < h->right_shift || m < h->left_shift)
            continue;
        double v = (h->time + time_at(tt, h->right, m - h->right_shift)) +
                   time_at(tt, h->left, m - h->left_shift);
        if (v < best) {
            best = v;
            *out = (ck_seg_choice){h->leaf, h->variant, m - h->right_shift, m - h->left_shift};
        }
    }
}

static size_t time_base(void *ctx, size_t s, ck_seg_kind kind, uint64_t m)
{
    ck_seg_choice ch;
    time_decide(ctx, s, s, kind, m, &ch);
    return ch.variant;
}

/* Frees the table's arrays, leaving them NULL: freeing again does nothing. */
static void time_free(time_table *tt)
{
    free(tt->meta);
    free(tt->by_s);
    free(tt->values);
    free(tt->zero);
    free(tt->shapes);
    tt->meta = tt->by_s = NULL;
    tt->values = tt->zero = NULL;
    tt->shapes = NULL;
}

/* Refuses tables above DP_TABLE_LIMIT, counting what is held at once: the rows' bounds,
 * with the minimum-peak table and the layout's sums while the rows are laid out, then with
 * the values while they are filled. */
static int check_table_size(const time_table *tt, uint64_t values, ck_err *err)
{
    size_t L = tt->z->L;
    uint64_t rows = (uint64_t)row_count(L), bounds, laying, filling, bytes;
    const uint64_t min_peak_row_bytes = sizeof(uint64_t) + sizeof(double) + sizeof(uint32_t) + sizeof(uint8_t);
    const uint64_t layout_row_bytes = 2 * sizeof(uint64_t);
    bool ok = ck_size_mul(rows, 2 * sizeof(row_meta), &bounds) &&
              ck_size_mul(rows, min_peak_row_bytes + layout_row_bytes, &laying) &&
              ck_size_mul(sat_add(values, tt->longest), sizeof(double), &filling) &&
              ck_size_add(bounds, max2(laying, filling), &bytes);
    if (ok && bytes <= DP_TABLE_LIMIT)
        return CK_OK;
    if (tt->exact)
        return ck_err_fail(err, CK_ERR_INPUT,
                       "dp: planning %zu stages exactly in bytes (--slots exact) with %llu bytes "
                       "above the input needs a table of more than 1 GiB; use --slots N to plan "
                       "in N memory units (default %d), or --granularity block",
                       L, (unsigned long long)(tt->width - 1), CK_DEFAULT_SLOTS);
    return ck_err_fail(err, CK_ERR_INPUT,
                   "dp: %zu stages with %llu memory slots need a table of more than 1 GiB; "
                   "use fewer --slots or --granularity block",
                   L, (unsigned long long)(tt->width - 1));
}

/* Lays out tt and checks its size: with least NULL, at once, from bounds of the rows'
 * smallest peaks that cost nothing, to refuse what cannot fit before anything long runs;
 * then with least, each row's smallest peak in bytes, to allocate. */
static int time_layout_check(time_table *tt, const uint64_t *least, uint64_t unit, ck_err *err)
{
    size_t L = tt->z->L, rows = row_count(L);
    int rc = check_table_size(tt, 0, err); /* the rows alone, before they are allocated */
    if (rc != CK_OK)
        return rc;
    if (!tt->meta) {
        tt->meta = malloc(rows * sizeof *tt->meta);
        tt->by_s = malloc(L * (L + 1) / 2 * sizeof *tt->by_s);
        if (!tt->meta || !tt->by_s)
            return ck_err_oom(err);
    }
    uint64_t values = time_layout(tt, least, unit);
    return values == UINT64_MAX ? ck_err_oom(err) : check_table_size(tt, values, err);
}

/* The values of the rows time_layout_check laid out. */
static int time_alloc(time_table *tt, ck_err *err)
{
    size_t L = tt->z->L, rows = row_count(L);
    uint64_t values = (uint64_t)tt->meta[rows - 1].offset + tt->meta[rows - 1].count;
    tt->zero = calloc(tt->longest, sizeof *tt->zero);
    tt->shapes = malloc(tt->workers * shapes_room(L) * sizeof *tt->shapes);
    if (!tt->zero || !tt->shapes)
        return ck_err_oom(err);
    tt->values = malloc((size_t)values * sizeof *tt->values);
    return tt->values ? CK_OK : ck_err_oom(err);
}

/* Frees the table's arrays, leaving them NULL: freeing again does nothing. */
static void min_peak_free(min_peak_table *mp)
{
    free(mp->peak);
    free(mp->time);
    free(mp->leaf);
    free(mp->variant);
    free(mp->shapes);
    *mp = (min_peak_table){.c = mp->c, .z = mp->z, .workers = mp->workers};
}

static int min_peak_alloc(min_peak_table *mp, const ck_chain *c, const unit_sizes *bytes,
                          size_t workers, ck_err *err)
{
    size_t rows = row_count(c->n_stages);
    *mp = (min_peak_table){c, bytes, malloc(rows * sizeof *mp->peak), malloc(rows * sizeof *mp->time),
                           malloc(rows * sizeof *mp->leaf), malloc(rows * sizeof *mp->variant), workers,
                           malloc(workers * shapes_room(c->n_stages) * sizeof *mp->shapes)};
    if (mp->peak && mp->time && mp->leaf && mp->variant && mp->shapes)
        return CK_OK;
    min_peak_free(mp);
    return ck_err_oom(err);
}

/* The minimum-peak table, filled: its rows' smallest peaks lay out the time table, and its
 * schedule is the answer when no fastest one fits. */
static int min_peak_fill(min_peak_table *mp, const ck_chain *c, const unit_sizes *bytes,
                         size_t workers, const atomic_int *stop, ck_err *err)
{
    int rc = min_peak_alloc(mp, c, bytes, workers, err);
    if (rc == CK_OK && (rc = ck_dp_rows_fill(c->n_stages, workers, stop, mp, min_peak_row, err)) != CK_OK)
        min_peak_free(mp);
    return rc;
}

/* The fastest schedule within the budget's slots, if one fits: the usual kind or the
 * plain loss, whichever is faster (the usual one among equals). */
static int time_plan(time_table *tt, const atomic_int *stop, ck_schedule *out, ck_err *err)
{
    size_t L = tt->z->L, w = tt->width;
    int rc = ck_dp_rows_fill(L, tt->workers, stop, tt, time_row, err);
    if (rc != CK_OK)
        return rc;
    double usual = time_at(tt, row_of(L, 0, L - 1, CK_SEG_USUAL), w - 1);
    double plain = time_at(tt, row_of(L, 0, L - 1, CK_SEG_PLAIN_LOSS), w - 1);
    if (!isfinite(usual) && !isfinite(plain))
        return CK_ERR_INFEASIBLE;
    ck_seg_kind kind = plain < usual ? CK_SEG_PLAIN_LOSS : CK_SEG_USUAL;
    return ck_persistent_emit(tt->c, time_decide, time_base, tt, kind, w - 1, out, err);
}

/* The fastest schedule in tt's slots if there is one; CK_ERR_INFEASIBLE if none fits. The
 * minimum-peak table is not held meanwhile: the two tables are never held at once. */
static int time_answer(time_table *tt, min_peak_table *mp, uint64_t unit, const atomic_int *stop,
                       ck_schedule *out, ck_err *err)
{
    int rc = time_layout_check(tt, mp->peak, unit, err);
    min_peak_free(mp);
#if defined(__GLIBC__)
    /* glibc keeps what was freed in its heap resident (after the first large free it serves
     * arrays of megabytes from the heap): given back here, it does not count on top of the
     * values, which can come near DP_TABLE_LIMIT */
    malloc_trim(0);
#endif
    if (rc == CK_OK)
        rc = time_alloc(tt, err);
    if (rc == CK_OK)
        rc = time_plan(tt, stop, out, err);
    time_free(tt);
    return rc;
}

/* The fastest schedule in tt's slots if there is one, else the minimum-peak schedule (with
 * a 1-byte unit) when it fits in bytes, else CK_ERR_INFEASIBLE. */
static int plan_tables(const ck_chain *c, uint64_t budget, const atomic_int *stop,
                       const unit_sizes *bytes, time_table *tt, ck_plan_result *result,
                       uint64_t *min_budget, ck_err *err)
{
    min_peak_table mp;
    int rc = min_peak_fill(&mp, c, bytes, tt->workers, stop, err);
    if (rc != CK_OK)
        return rc;
    uint64_t least;
    min_peak_top(&mp, &least);
    bool fits = budget >= sat_add(c->input_bytes, least);
    if (fits) {
        rc = time_answer(tt, &mp, result->memory_unit, stop, &result->schedule, err);
        /* else rounding sizes up to units lost all the schedules that fit in bytes */
        if (rc != CK_ERR_INFEASIBLE || (rc = min_peak_fill(&mp, c, bytes, tt->workers, stop, err)) != CK_OK)
            return rc;
    }
    /* the budget is below the smallest peak, or no schedule fits in units: the minimum-peak
     * schedule answers both */
    ck_seg_kind least_kind = min_peak_top(&mp, &least);
    rc = ck_persistent_emit(c, min_peak_decide, min_peak_base, &mp, least_kind, 0, &result->schedule,
                            err);
    min_peak_free(&mp);
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
    if (opts->slots == 0 && !opts->exact)
        return ck_err_fail(err, CK_ERR_INPUT, "dp: --slots must be at least 1");
    uint64_t avail = budget > c->input_bytes ? budget - c->input_bytes : 0;
    if (avail == UINT64_MAX)
        avail--; /* memory values 0 .. avail */
    uint64_t unit = !opts->exact && avail > opts->slots ? ck_size_ceil_div(avail, opts->slots) : 1;
    uint64_t slots = avail / unit;
    result->memory_unit = unit;
    unit_sizes bytes, units;
    int rc = sizes_init(&bytes, c, 1, opts->variants, err);
    if (rc != CK_OK)
        return rc;
    rc = sizes_init(&units, c, unit, opts->variants, err);
    if (rc != CK_OK) {
        sizes_free(&bytes);
        return rc;
    }
    size_t workers = ck_dp_rows_workers(opts->threads, c->n_stages);
    time_table tt = {.c = c, .z = &units, .width = slots + 1, .exact = opts->exact, .workers = workers};
    rc = time_layout_check(&tt, NULL, unit, err);
    if (rc == CK_OK)
        rc = plan_tables(c, budget, opts->stop, &bytes, &tt, result, min_budget, err);
    time_free(&tt);
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
    rc = min_peak_fill(&mp, c, &bytes, ck_dp_rows_workers(0, c->n_stages), NULL, err);
    if (rc == CK_OK) {
        ck_seg_kind kind = min_peak_top(&mp, peak);
        *peak = sat_add(c->input_bytes, *peak);
        rc = ck_persistent_emit(c, min_peak_decide, min_peak_base, &mp, kind, 0, out, err);
        min_peak_free(&mp);
    }
    sizes_free(&bytes);
    return rc;
}

const ck_planner ck_planner_dp = {
    "dp", "fastest persistent schedule within the budget (Beaumont et al. 2019)", plan_dp, NULL, false};
