/* schedule: schedules of the five actions (planner/action), and their replay on a chain:
 * where a schedule's validity, peak memory and time on the chain are computed, by applying
 * its actions one by one. Every figure a plan file holds comes from here. */
#ifndef CK_SCHEDULE_H
#define CK_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/action.h"
#include "planner/chain.h"
#include "planner/err.h"

typedef struct {
    ck_action *actions;
    size_t n, cap;
} ck_schedule;

/* Schedules of more operations than this are refused (its plan file, at about 45 bytes an
 * operation, stays within the default limit on input files, so that `run` reads it back);
 * the environment variable CKPLAN_MAX_SCHEDULE_OPS changes it. */
#define CK_SCHEDULE_MAX_OPS 1000000

/* CK_OK when a schedule of `ops` operations is within that limit; otherwise CK_ERR_INPUT
 * with a message that begins with `what` (what would be that long) and says how to raise
 * the limit. */
int ck_schedule_check_length(const char *what, uint64_t ops, ck_err *err);

/* Appends an operation; false when out of memory (the schedule is left as it was). */
bool ck_schedule_push(ck_schedule *s, ck_action_kind kind, size_t stage);
/* The same for any action, an F_all's variant included. */
bool ck_schedule_append(ck_schedule *s, ck_action a);
void ck_schedule_free(ck_schedule *s);

/* sole (s->n entries): for each F_all, F_ck or F_none of a stage i below n_stages, whether
 * it is stage i's only forward before a B i that follows it: no other action reads x_i
 * before that backward, nor did one, which would have made x_i a checkpoint held for a
 * recomputation; false for the other actions. */
int ck_schedule_sole_forwards(const ck_schedule *s, size_t n_stages, bool *sole, ck_err *err);

/* The store-everything schedule: F_all 0 .. F_all L-1, loss, B L-1 .. B 0. */
int ck_schedule_baseline(const ck_chain *c, ck_schedule *out, ck_err *err);

typedef struct {
    uint64_t peak_bytes;   /* largest operation peak, at least input_bytes */
    double time;           /* sum of the operations' times */
    size_t peak_op;        /* index of the first operation that reaches the peak */
    size_t count[CK_N_ACTIONS]; /* operations of each kind */
} ck_replay;

/* Replays s on c. On success fills *out and, when non-NULL, live_after[k] with the bytes
 * held after operation k and op_peak[k] with operation k's peak (arrays of s->n entries).
 * An invalid schedule returns CK_ERR_INPUT with a message naming the first operation that
 * does not find what it needs ("schedule[5] (B 3): needs x̄_4, which is not live"). */
int ck_schedule_replay(const ck_chain *c, const ck_schedule *s, ck_replay *out,
                       uint64_t *live_after, uint64_t *op_peak, ck_err *err);

/* The replay whose figures are reported and held to a budget, when it is not the chain's
 * own: for a model, its compiled program's (ck_workload_replayer, planner/workload), of
 * which the chain's peak is a bound. Same contract as ck_schedule_replay on the chain it
 * was made for; ctx is what fn needs. */
typedef struct {
    int (*fn)(const void *ctx, const ck_schedule *s, ck_replay *out, ck_err *err);
    const void *ctx;
} ck_schedule_replayer;

/* s replayed by r, or by ck_schedule_replay on c when r (or r->fn) is NULL. */
int ck_schedule_replay_by(const ck_schedule_replayer *r, const ck_chain *c, const ck_schedule *s,
                          ck_replay *out, ck_err *err);

#endif
