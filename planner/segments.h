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

int ck_schedule_segments(const ck_chain *c, const size_t *starts, size_t n, ck_schedule *out,
                         ck_err *err);

#endif
