#include "tests/unit/brute.h"

#include <stdlib.h>

#include "planner/schedule.h"

/* All schedules of one subproblem Seg(s, t). */
typedef struct {
    ck_schedule *list;
    size_t n;
} seg_schedules;

static bool append(ck_schedule *dst, const ck_schedule *src)
{
    bool ok = true;
    for (size_t k = 0; ok && k < src->n; k++)
        ok = ck_schedule_append(dst, src->actions[k]);
    return ok;
}

static bool add(seg_schedules *set, ck_schedule *s)
{
    ck_schedule *grown = realloc(set->list, (set->n + 1) * sizeof *grown);
    if (!grown)
        return false;
    set->list = grown;
    set->list[set->n++] = *s;
    return true;
}

/* The lists of every subproblem: the usual Seg(s, t) at s * L + t; Seg(s, L-1) after a loss
 * taken from the plain x_L (y_L and x_L live on entry) at L * L + s; Seg(s, L-1) in which
 * the loss reads the plain x_L at L * L + L + s. */
typedef enum { USUAL, AFTER_LOSS, PLAIN_LOSS } seg_kind;

static seg_schedules *of(seg_schedules *all, size_t L, seg_kind kind, size_t s, size_t t)
{
    return kind == USUAL ? &all[s * L + t] : &all[L * L + (kind == PLAIN_LOSS ? L : 0) + s];
}

/* Appends `head` (F_ck from, F_none from+1 .. to-1, then the loss when `loss`), then one
 * schedule of `first` and one of `second` (or nothing), for every pair. */
static bool add_products(seg_schedules *out, size_t from, size_t to, bool loss,
                         const seg_schedules *first, const seg_schedules *second)
{
    size_t n2 = second ? second->n : 1;
    for (size_t a = 0; a < first->n; a++)
        for (size_t b = 0; b < n2; b++) {
            ck_schedule sch = {0};
            bool ok = ck_schedule_push(&sch, CK_F_CK, from);
            for (size_t k = from + 1; ok && k < to; k++)
                ok = ck_schedule_push(&sch, CK_F_NONE, k);
            ok = ok && (!loss || ck_schedule_push(&sch, CK_LOSS, 0)) &&
                 append(&sch, &first->list[a]) && (!second || append(&sch, &second->list[b])) &&
                 add(out, &sch);
            if (!ok) {
                ck_schedule_free(&sch);
                return false;
            }
        }
    return true;
}

/* Adds the base (s == t, not the plain loss) or the chain built on each schedule of
 * Seg(s+1, t), each with every variant of stage s's F_all; every leaf j built on each pair
 * of schedules of Seg(j, t) and Seg(s, j-1), the right parts of the same kind; for the
 * plain loss also F_ck s, F_none .. L-1, loss, and each schedule after the loss. */
static bool build(const ck_chain *c, seg_schedules *all, seg_kind kind, size_t s, size_t t,
                  seg_schedules *out)
{
    size_t L = c->n_stages;
    const seg_schedules *rest = s < t ? of(all, L, kind, s + 1, t) : NULL;
    bool saving = s < t || kind != PLAIN_LOSS;
    for (size_t v = 0; saving && v <= c->stages[s].n_variants; v++)
        for (size_t q = 0; q < (rest ? rest->n : 1); q++) {
            ck_schedule b = {0};
            bool ok = ck_schedule_append(&b, (ck_action){CK_F_ALL, s, v}) &&
                      (!rest || append(&b, &rest->list[q])) &&
                      (rest || s + 1 < L || kind == AFTER_LOSS || ck_schedule_push(&b, CK_LOSS, 0)) &&
                      ck_schedule_push(&b, CK_B, s) && add(out, &b);
            if (!ok) {
                ck_schedule_free(&b);
                return false;
            }
        }
    for (size_t j = s + 1; j <= t; j++)
        if (!add_products(out, s, j, false, of(all, L, kind, j, t), of(all, L, USUAL, s, j - 1)))
            return false;
    return kind != PLAIN_LOSS || add_products(out, s, L, true, of(all, L, AFTER_LOSS, s, t), NULL);
}

static void free_lists(seg_schedules *all, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < all[i].n; k++)
            ck_schedule_free(&all[i].list[k]);
        free(all[i].list);
    }
    free(all);
}

static int replay_all(const ck_chain *c, const seg_schedules *top, size_t n_top, ck_brute_set *out,
                      ck_err *err)
{
    size_t n = 0;
    for (size_t i = 0; i < n_top; i++)
        n += top[i].n;
    out->n = 0;
    out->points = malloc((n ? n : 1) * sizeof *out->points);
    if (!out->points)
        return ck_err_oom(err);
    for (size_t i = 0; i < n_top; i++)
        for (size_t k = 0; k < top[i].n; k++) {
            ck_replay replay;
            int rc = ck_schedule_replay(c, &top[i].list[k], &replay, NULL, NULL, err);
            if (rc != CK_OK)
                return rc;
            out->points[out->n++] = (ck_brute_point){replay.peak_bytes, replay.time};
        }
    return CK_OK;
}

int ck_brute_enumerate(const ck_chain *c, bool plain_loss, ck_brute_set *out, ck_err *err)
{
    size_t L = c->n_stages, n_lists = L * L + 2 * L;
    seg_schedules *all = calloc(n_lists, sizeof *all);
    out->points = NULL;
    if (!all)
        return ck_err_oom(err);
    int rc = CK_OK;
    for (size_t d = 0; d < L && rc == CK_OK; d++) {
        for (size_t s = 0; s + d < L && rc == CK_OK; s++)
            if (!build(c, all, USUAL, s, s + d, of(all, L, USUAL, s, s + d)))
                rc = ck_err_oom(err);
        for (seg_kind k = AFTER_LOSS; plain_loss && rc == CK_OK && k <= PLAIN_LOSS; k++)
            if (!build(c, all, k, L - 1 - d, L - 1, of(all, L, k, L - 1 - d, L - 1)))
                rc = ck_err_oom(err);
    }
    seg_schedules top[2] = {*of(all, L, USUAL, 0, L - 1), *of(all, L, PLAIN_LOSS, 0, L - 1)};
    if (rc == CK_OK)
        rc = replay_all(c, top, plain_loss ? 2 : 1, out, err);
    free_lists(all, n_lists);
    if (rc != CK_OK)
        ck_brute_free(out);
    return rc;
}

void ck_brute_free(ck_brute_set *set)
{
    free(set->points);
    set->points = NULL;
    set->n = 0;
}

bool ck_brute_best(const ck_brute_set *set, uint64_t budget, double *time)
{
    bool found = false;
    for (size_t k = 0; k < set->n; k++)
        if (set->points[k].peak <= budget && (!found || set->points[k].time < *time)) {
            *time = set->points[k].time;
            found = true;
        }
    return found;
}

uint64_t ck_brute_min_peak(const ck_brute_set *set)
{
    uint64_t least = UINT64_MAX;
    for (size_t k = 0; k < set->n; k++)
        if (set->points[k].peak < least)
            least = set->points[k].peak;
    return least;
}
