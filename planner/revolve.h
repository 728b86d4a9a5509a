/* revolve: the counting behind binomial checkpointing (Griewank 1992; Griewank and Walther
 * 2000), exposed for the revolve planner and its tests.
 *
 * Reversing n stages while holding at most c snapshots (the one at the start included)
 * takes p(n, c) advances (F_ck or F_none operations) at best:
 *   p(1, c) = 0,  p(n, 1) = n(n-1)/2,  p(n, c) = min over 1 <= m < n of m + p(n-m, c-1) + p(m, c). */
#ifndef CK_REVOLVE_H
#define CK_REVOLVE_H

#include <stdint.h>

#include "planner/chain.h"
#include "planner/err.h"
#include "planner/schedule.h"

/* p(n, c) for n, c >= 1 by the closed form t*n - C(c+t, c+1), t the least integer with
 * C(c+t, c) >= n; exact for n, c <= 2^31. */
uint64_t ck_revolve_advances(uint64_t n, uint64_t c);

/* The smallest m, 1 <= m < n, reaching p(n, c) with c >= 2 (the first snapshot taken m
 * stages ahead). Needs n >= 2. */
uint64_t ck_revolve_split(uint64_t n, uint64_t c);

/* Appends to out the revolve schedule of the whole chain with `snapshots` >= 1 snapshots:
 * L F_all operations and p(L, snapshots) advances. */
int ck_revolve_schedule(const ck_chain *c, uint64_t snapshots, ck_schedule *out, ck_err *err);

/* The number of operations of that schedule, 2L + 1 + p(L, snapshots), in closed form;
 * UINT64_MAX when it does not fit in 64 bits. */
uint64_t ck_revolve_schedule_length(uint64_t L, uint64_t snapshots);

/* Prices revolve schedules without building them: after O(L log L) set-up, each call walks
 * the schedule's subproblems, pricing runs of consecutive snapshots in O(log L). */
typedef struct ck_revolve_pricer ck_revolve_pricer;
int ck_revolve_pricer_new(const ck_chain *c, ck_revolve_pricer **out, ck_err *err);
/* The peak ck_schedule_replay reports for ck_revolve_schedule(c, snapshots), or UINT64_MAX
 * when a sum it needs reaches 2^64 (always so when that peak does): replay to tell. */
uint64_t ck_revolve_peak(ck_revolve_pricer *p, uint64_t snapshots);
void ck_revolve_pricer_free(ck_revolve_pricer *p);

#endif
