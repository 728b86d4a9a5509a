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

/* Adds the base and the chain built on each schedule of Seg(s+1, t), each with every
 * variant of stage s's F_all, and every leaf j built on each pair of schedules of Seg(j, t)
 * and Seg(s, j-1). */
static bool build(const ck_chain *c, seg_schedules *all, size_t s, size_t t, seg_schedules *out)
{
    size_t L = c->n_stages;
    const seg_schedules *rest = s < t ? &all[(s + 1) * L + t] : NULL;
    for (size_t v = 0; v <= c->stages[s].n_variants; v++)
        for (size_t q = 0; q < (rest ? rest->n : 1); q++) {
            ck_schedule b = {0};
            bool ok = ck_schedule_append(&b, (ck_action){CK_F_ALL, s, v}) &&
                      (!rest || append(&b, &rest->list[q])) &&
                      (rest || s + 1 < L || ck_schedule_push(&b, CK_LOSS, 0)) &&
                      ck_schedule_push(&b, CK_B, s) && add(out, &b);
            if (!ok) {
                ck_schedule_free(&b);
                return false;
            }
        }
    for (size_t j = s + 1; j <= t; j++) {
        const seg_schedules *right = &all[j * L + t], *left = &all[s * L + j - 1];
        for (size_t r = 0; r < right->n; r++)
            for (size_t l = 0; l < left->n; l++) {
                ck_schedule b = {0};
                bool ok = ck_schedule_push(&b, CK_F_CK, s);
                for (size_t k = s + 1; ok && k < j; k++)
                    ok = ck_schedule_push(&b, CK_F_NONE, k);
                ok = ok && append(&b, &right->list[r]) && append(&b, &left->list[l]) &&
                     add(out, &b);
                if (!ok) {
                    ck_schedule_free(&b);
                    return false;
                }
            }
    }
    return true;
}

int ck_brute_enumerate(const ck_chain *c, ck_brute_set *out, ck_err *err)
{
    size_t L = c->n_stages;
    seg_schedules *all = calloc(L * L, sizeof *all);
    if (!all)
        return ck_err_oom(err);
    int rc = CK_OK;
    for (size_t d = 0; d < L && rc == CK_OK; d++)
        for (size_t s = 0; s + d < L && rc == CK_OK; s++)
            if (!build(c, all, s, s + d, &all[s * L + s + d]))
                rc = ck_err_oom(err);
    const seg_schedules *top = &all[L - 1];
    out->n = 0;
    out->points = rc == CK_OK ? malloc(top->n * sizeof *out->points) : NULL;
    if (rc == CK_OK && !out->points)
        rc = ck_err_oom(err);
    for (size_t k = 0; rc == CK_OK && k < top->n; k++) {
        ck_replay replay;
        rc = ck_schedule_replay(c, &top->list[k], &replay, NULL, NULL, err);
        if (rc == CK_OK)
            out->points[out->n++] = (ck_brute_point){replay.peak_bytes, replay.time};
    }
    for (size_t i = 0; i < L * L; i++) {
        for (size_t k = 0; k < all[i].n; k++)
            ck_schedule_free(&all[i].list[k]);
        free(all[i].list);
    }
    free(all);
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
