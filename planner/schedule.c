#include "planner/schedule.h"

#include "planner/limits.h"
#include "planner/size.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ck_schedule_check_length(const char *what, uint64_t ops, ck_err *err)
{
    unsigned long limit = ck_limits_get(CK_LIMIT_SCHEDULE_OPS, CK_SCHEDULE_MAX_OPS);
    if (ops <= limit)
        return CK_OK;
    char count[32] = "more than 2^64";
    if (ops != UINT64_MAX)
        snprintf(count, sizeof count, "%llu", (unsigned long long)ops);
    return ck_err_fail(err, CK_ERR_INPUT, "%s would have %s operations, more than the limit of %lu "
                   "for a schedule (set %s to raise it)", what, count, limit,
                   ck_limits_name(CK_LIMIT_SCHEDULE_OPS));
}

bool ck_schedule_append(ck_schedule *s, ck_action a)
{
    void *items = s->actions;
    if (!ck_size_reserve(&items, &s->cap, s->n, sizeof *s->actions))
        return false;
    s->actions = items;
    s->actions[s->n++] = a;
    return true;
}

int ck_schedule_sole_forwards(const ck_schedule *s, size_t n_stages, bool *sole, ck_err *err)
{
    /* Per stage: its forwards before its first B, and where that B is. */
    size_t *forwards = calloc(n_stages + 1, sizeof *forwards), *b_at = malloc((n_stages + 1) * sizeof *b_at);
    if (!forwards || !b_at) {
        free(forwards);
        free(b_at);
        return ck_err_oom(err);
    }
    for (size_t i = 0; i < n_stages; i++)
        b_at[i] = SIZE_MAX;
    for (size_t k = 0; k < s->n; k++) {
        const ck_action *a = &s->actions[k];
        if (a->kind == CK_LOSS || a->kind >= CK_N_ACTIONS || a->stage >= n_stages || b_at[a->stage] != SIZE_MAX)
            continue;
        if (a->kind == CK_B)
            b_at[a->stage] = k;
        else
            forwards[a->stage]++;
    }
    for (size_t k = 0; k < s->n; k++) {
        const ck_action *a = &s->actions[k];
        sole[k] = a->kind != CK_LOSS && a->kind != CK_B && a->kind < CK_N_ACTIONS && a->stage < n_stages &&
                  forwards[a->stage] == 1 && k < b_at[a->stage] && b_at[a->stage] != SIZE_MAX;
    }
    free(forwards);
    free(b_at);
    return CK_OK;
}

bool ck_schedule_push(ck_schedule *s, ck_action_kind kind, size_t stage)
{
    return ck_schedule_append(s, (ck_action){kind, stage, 0});
}

void ck_schedule_free(ck_schedule *s)
{
    free(s->actions);
    memset(s, 0, sizeof *s);
}

int ck_schedule_baseline(const ck_chain *c, ck_schedule *out, ck_err *err)
{
    size_t L = c->n_stages;
    bool ok = true;
    for (size_t i = 0; ok && i < L; i++)
        ok = ck_schedule_push(out, CK_F_ALL, i);
    ok = ok && ck_schedule_push(out, CK_LOSS, 0);
    for (size_t i = L; ok && i-- > 0;)
        ok = ck_schedule_push(out, CK_B, i);
    return ok ? CK_OK : ck_err_oom(err);
}

int ck_schedule_replay(const ck_chain *c, const ck_schedule *s, ck_replay *out,
                       uint64_t *live_after, uint64_t *op_peak, ck_err *err)
{
    ck_action_state st;
    int rc = ck_action_state_init(&st, c, err);
    if (rc != CK_OK)
        return rc;
    memset(out, 0, sizeof *out);
    out->peak_bytes = c->input_bytes;
    for (size_t k = 0; k < s->n && rc == CK_OK; k++) {
        const ck_action *a = &s->actions[k];
        ck_action_effect e;
        uint64_t peak;
        rc = ck_action_describe(&st, k, a, &e, err);
        if (rc == CK_OK)
            rc = ck_action_apply(&st, k, a, &e, &peak, err);
        if (rc != CK_OK)
            break;
        if (peak > out->peak_bytes) {
            out->peak_bytes = peak;
            out->peak_op = k;
        }
        out->time += e.time;
        out->count[a->kind]++;
        if (live_after)
            live_after[k] = st.held;
        if (op_peak)
            op_peak[k] = peak;
    }
    if (rc == CK_OK && !st.y[0])
        rc = ck_err_fail(err, CK_ERR_INPUT, "schedule: ends without y_0 (the gradient of the input) "
                                            "being live; a complete schedule ends with B 0");
    ck_action_state_free(&st);
    return rc;
}

int ck_schedule_replay_by(const ck_schedule_replayer *r, const ck_chain *c, const ck_schedule *s,
                          ck_replay *out, ck_err *err)
{
    if (r && r->fn)
        return r->fn(r->ctx, s, out, err);
    return ck_schedule_replay(c, s, out, NULL, NULL, err);
}
