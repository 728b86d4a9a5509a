#include "tests/unit/plan_run.h"

#include <check.h>

int ck_test_plan(const ck_planner *p, const ck_chain *c, uint64_t budget, uint32_t slots,
                 ck_plan_result *r, ck_replay *replay, uint64_t *min_budget, ck_err *err)
{
    *r = (ck_plan_result){.snapshots = -1, .segments = -1, .memory_unit = 0};
    ck_planner_opts opts = {.slots = slots, .variants = true};
    int rc = p->plan(c, budget, &opts, r, min_budget, err);
    if (rc == CK_OK)
        rc = ck_schedule_replay(c, &r->schedule, replay, NULL, NULL, err);
    return rc;
}

ck_replay ck_test_baseline(const ck_chain *c)
{
    ck_schedule s = {0};
    ck_replay replay;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_schedule_baseline(c, &s, &err), CK_OK);
    ck_assert_msg(ck_schedule_replay(c, &s, &replay, NULL, NULL, &err) == CK_OK, "%s", err.msg);
    ck_schedule_free(&s);
    return replay;
}

bool ck_test_same_schedule(const ck_schedule *a, const ck_schedule *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++) {
        const ck_action *x = &a->actions[i], *y = &b->actions[i];
        if (x->kind != y->kind || x->stage != y->stage || x->variant != y->variant)
            return false;
    }
    return true;
}
