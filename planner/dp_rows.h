/* dp_rows: the order in which dp (planner/plan_dp.c) fills the rows of its tables, one row
 * per subproblem Seg(s, t) and kind (planner/persistent.h), on one thread or several.
 *
 * A row is filled after the rows it reads: the rows Seg(j, t) of the same kind for j > s
 * (its right parts), the usual rows Seg(s, j - 1) for j <= t (its left parts), and for the
 * plain loss the row after the loss of the same s. Rows of one s are filled by one worker,
 * t ascending; the worker of s waits for the worker of s + 1 to finish the same t. The
 * values a fill computes do not depend on which worker ran it, so results are the same
 * for every number of workers. */
#ifndef CK_DP_ROWS_H
#define CK_DP_ROWS_H

#include <stdatomic.h>
#include <stddef.h>

#include "planner/err.h"
#include "planner/persistent.h"

/* The most workers a fill uses, whatever is asked for. */
#define CK_DP_ROWS_MAX_WORKERS 64

/* Fills row (s, t, kind); `worker` (below the fill's worker count) names the scratch space
 * that this call may use, which no other call running at the same time uses. */
typedef void (*ck_dp_rows_fill_fn)(void *ctx, size_t worker, size_t s, size_t t, ck_seg_kind kind);

/* The workers a fill of a chain of L stages uses when `requested` are asked for: 0 means one
 * per processor this process may run on. Never more than CK_DP_ROWS_MAX_WORKERS, nor than L. */
size_t ck_dp_rows_workers(size_t requested, size_t L);

/* Calls fill on every row of a chain of L stages, each after the rows it reads, with
 * `workers` workers (the calling thread among them; from ck_dp_rows_workers). stop (or
 * NULL) is polled before each row: once it is set, the result is CK_INTERRUPTED and some
 * rows are left unfilled. A thread that cannot be started leaves its rows to the others. */
int ck_dp_rows_fill(size_t L, size_t workers, const atomic_int *stop, void *ctx,
                    ck_dp_rows_fill_fn fill, ck_err *err);

#endif
