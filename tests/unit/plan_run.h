/* plan_run: calling a planner directly, as ck_planner_run does but without its
 * store-everything shortcut, and replaying what it returns. */
#ifndef CK_PLAN_RUN_H
#define CK_PLAN_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "planner/planner.h"

/* Initialises *r, runs p (dp choosing among the chain's variants), and on CK_OK replays r->schedule into *replay (a replay failure
 * is returned as its status). The caller frees r->schedule. */
int ck_test_plan(const ck_planner *p, const ck_chain *c, uint64_t budget, uint32_t slots,
                 ck_plan_result *r, ck_replay *replay, uint64_t *min_budget, ck_err *err);

/* Whether a and b are the same operations, field by field (the structs have padding). */
bool ck_test_same_schedule(const ck_schedule *a, const ck_schedule *b);

/* The store-everything schedule's replay. */
ck_replay ck_test_baseline(const ck_chain *c);

#endif
