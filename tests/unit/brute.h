/* brute: every persistent schedule of a small chain, each F_all of a base or a chain in
 * every variant of its stage, written out operation by operation and replayed. It knows only the shapes of persistent.h's comment (base, chain, leaf j,
 * recursively) and ck_schedule_replay, none of the dp planner's formulas, so the two can
 * check each other. The count grows fast (394 schedules for 6 stages); keep L <= 7. */
#ifndef CK_BRUTE_H
#define CK_BRUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/chain.h"
#include "planner/err.h"

typedef struct {
    uint64_t peak; /* replayed peak */
    double time;   /* replayed time */
} ck_brute_point;

typedef struct {
    ck_brute_point *points; /* one per schedule */
    size_t n;
} ck_brute_set;

int ck_brute_enumerate(const ck_chain *c, ck_brute_set *out, ck_err *err);
void ck_brute_free(ck_brute_set *set);

/* The smallest time among schedules with peak <= budget; false if there is none. */
bool ck_brute_best(const ck_brute_set *set, uint64_t budget, double *time);
/* The smallest peak of all. */
uint64_t ck_brute_min_peak(const ck_brute_set *set);

#endif
