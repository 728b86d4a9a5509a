/* segments: the two-level schedule of Chen et al. 2016 shared by the sqrt and chen planners.
 *
 * The chain is cut into segments at starts[0] = 0 < starts[1] < ... < starts[n-1] < L. The
 * first forward keeps only each segment's input (F_ck on its first stage, F_none on the
 * rest) and runs the last segment with F_all; backward then recomputes each earlier segment
 * once, with F_all from its kept input, before running its backward operations. */
#ifndef CK_SEGMENTS_H
#define CK_SEGMENTS_H

#include <stddef.h>

#include "planner/chain.h"
#include "planner/err.h"
#include "planner/schedule.h"

int ck_segments_of(const ck_chain *c, const size_t *starts, size_t n, ck_schedule *out,
                         ck_err *err);

/* The time ck_schedule_replay reports for ck_segments_of(c, starts, n): the same sum
 * in the same order, without building the schedule. */
double ck_segments_time(const ck_chain *c, const size_t *starts, size_t n);

/* Prices such schedules without building them: O(L log L) to set up, then O(n) a schedule
 * of n segments, from prefix sums and range maxima. */
typedef struct ck_segments_pricer ck_segments_pricer;
int ck_segments_pricer_new(const ck_chain *c, ck_segments_pricer **out, ck_err *err);
/* The peak ck_schedule_replay reports for ck_segments_of(c, starts, n), or
 * UINT64_MAX when a sum it needs reaches 2^64 (always so when that peak does): replay to
 * tell. */
uint64_t ck_segments_peak(const ck_segments_pricer *p, const size_t *starts, size_t n);
void ck_segments_pricer_free(ck_segments_pricer *p);

#endif
