/* rangemax: the largest of a fixed array's values over any range of indices in constant
 * time (a sparse table: n log n values, built once), for planners that price many
 * schedules of one chain without replaying each. Sums of sizes that could pass 2^64
 * saturate at CK_SAT (ck_rangemax_sat_add), which then means "2^64 or more, cannot tell". */
#ifndef CK_RANGEMAX_H
#define CK_RANGEMAX_H

#include <stddef.h>
#include <stdint.h>

#include "planner/err.h"

#define CK_SAT UINT64_MAX

/* a + b, or CK_SAT when that overflows or either is CK_SAT. */
uint64_t ck_rangemax_sat_add(uint64_t a, uint64_t b);
/* a - b for b <= a, keeping CK_SAT as CK_SAT. */
uint64_t ck_rangemax_sat_sub(uint64_t a, uint64_t b);

typedef struct {
    size_t n, levels;
    uint64_t *table; /* level k holds the maxima of the ranges [i, i + 2^k) */
} ck_rangemax;

/* Builds the table over values[0 .. n-1] (n >= 1); the values are copied. */
int ck_rangemax_init(ck_rangemax *r, const uint64_t *values, size_t n, ck_err *err);
/* The largest value at indices lo .. hi inclusive; 0 when lo > hi. */
uint64_t ck_rangemax_query(const ck_rangemax *r, size_t lo, size_t hi);
void ck_rangemax_free(ck_rangemax *r);

#endif
