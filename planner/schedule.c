#include "planner/schedule.h"

#include "planner/limits.h"
#include "planner/size.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const opkind_names[CK_N_ACTIONS] = {"F_all", "F_ck", "F_none", "loss", "B"};

const char *ck_action_name(ck_action_kind kind)
{
    return kind < CK_N_ACTIONS ? opkind_names[kind] : "?";
}

bool ck_action_parse(const char *name, ck_action_kind *out)
{
    for (int k = 0; k < CK_N_ACTIONS; k++)
        if (strcmp(name, opkind_names[k]) == 0) {
            *out = (ck_action_kind)k;
            return true;
        }
    return false;
}

int ck_schedule_check_length(const char *what, uint64_t ops, ck_err *err)
{
    unsigned long limit = ck_limits_from_env("CKPLAN_MAX_SCHEDULE_OPS", CK_SCHEDULE_MAX_OPS);
    if (ops <= limit)
        return CK_OK;
    char count[32] = "more than 2^64";
    if (ops != UINT64_MAX)
        snprintf(count, sizeof count, "%llu", (unsigned long long)ops);
    return ck_err_fail(err, CK_ERR_INPUT, "%s would have %s operations, more than the limit of %lu "
                   "for a schedule (set CKPLAN_MAX_SCHEDULE_OPS to raise it)", what, count, limit);
}

bool ck_schedule_push(ck_schedule *s, ck_action_kind kind, size_t stage)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        ck_action *grown = realloc(s->actions, cap * sizeof *grown);
        if (!grown)
            return false;
        s->actions = grown;
        s->cap = cap;
    }
    s->actions[s->n++] = (ck_action){kind, stage};
    return true;
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

/* What is live during a replay: x_i, x̄_i (1 <= i <= L; x̄_0 is x_0) and y_i (0 <= i <= L),
 * and the bytes they hold together. */
typedef struct {
    const ck_chain *chain;
    bool *x, *xbar, *y;
    uint64_t held;
} replay_state;

static bool input_live(const replay_state *st, size_t i)
{
    return st->x[i] || (i > 0 && st->xbar[i]);
}

/* Frees the input of F_none i: x_i if it is live, else x̄_i. */
static void free_input(replay_state *st, size_t i)
{
    if (st->x[i]) {
        st->x[i] = false;
        st->held -= ck_chain_x_bytes(st->chain, i);
    } else {
        st->xbar[i] = false;
        st->held -= ck_chain_xbar_bytes(st->chain, i);
    }
}

/* Checks that op k finds what it needs; on failure writes why into what. */
static bool needs_met(const replay_state *st, const ck_action *op, size_t L, char *what, size_t len)
{
    size_t i = op->kind == CK_LOSS ? L : op->stage;
    if (op->kind == CK_B) {
        if (!st->y[i + 1])
            return snprintf(what, len, "needs y_%zu, which is not live", i + 1), false;
        if (!st->xbar[i + 1])
            return snprintf(what, len, "needs x̄_%zu, which is not live", i + 1), false;
    }
    if (!input_live(st, i))
        return snprintf(what, len, "needs x_%zu or x̄_%zu, neither is live", i, i), false;
    return true;
}

static int invalid(ck_err *err, size_t k, const ck_action *op, const char *what)
{
    if (op->kind == CK_LOSS)
        return ck_err_fail(err, CK_ERR_INPUT, "schedule[%zu] (loss): %s", k, what);
    return ck_err_fail(err, CK_ERR_INPUT, "schedule[%zu] (%s %zu): %s", k, ck_action_name(op->kind),
                   op->stage, what);
}

int ck_schedule_replay(const ck_chain *c, const ck_schedule *s, ck_replay *out,
                       uint64_t *live_after, uint64_t *op_peak, ck_err *err)
{
    size_t L = c->n_stages;
    bool *flags = calloc(3 * (L + 1), sizeof *flags);
    if (!flags)
        return ck_err_oom(err);
    replay_state st = {.chain = c, .x = flags, .xbar = flags + (L + 1), .y = flags + 2 * (L + 1),
                       .held = c->input_bytes};
    st.x[0] = true;
    memset(out, 0, sizeof *out);
    out->peak_bytes = c->input_bytes;

    int rc = CK_OK;
    char what[160];
    for (size_t k = 0; k < s->n && rc == CK_OK; k++) {
        const ck_action *op = &s->actions[k];
        size_t i = op->stage;
        if (op->kind >= CK_N_ACTIONS) {
            rc = invalid(err, k, op, "unknown operation");
            break;
        }
        if (op->kind != CK_LOSS && i >= L) {
            snprintf(what, sizeof what, "stage out of range (the chain has stages 0 to %zu)", L - 1);
            rc = invalid(err, k, op, what);
            break;
        }
        if (!needs_met(&st, op, L, what, sizeof what)) {
            rc = invalid(err, k, op, what);
            break;
        }
        /* What the operation allocates (its result), its transient bytes and its time. */
        bool *result;
        const char *result_name;
        size_t result_index;
        uint64_t alloc, tmp;
        double time;
        if (op->kind == CK_LOSS) {
            result = &st.y[L], result_name = "y", result_index = L;
            alloc = ck_chain_x_bytes(c, L);
            tmp = c->loss_bwd_tmp_bytes;
            time = c->loss_bwd_time;
        } else if (op->kind == CK_B) {
            result = &st.y[i], result_name = "y", result_index = i;
            alloc = ck_chain_x_bytes(c, i);
            tmp = c->stages[i].bwd_tmp_bytes;
            time = c->stages[i].bwd_time;
        } else {
            bool all = op->kind == CK_F_ALL;
            result = all ? &st.xbar[i + 1] : &st.x[i + 1];
            result_name = all ? "x̄" : "x", result_index = i + 1;
            alloc = all ? ck_chain_xbar_bytes(c, i + 1) : ck_chain_x_bytes(c, i + 1);
            tmp = c->stages[i].fwd_tmp_bytes;
            time = c->stages[i].fwd_time;
        }
        if (*result) {
            snprintf(what, sizeof what, "would compute %s_%zu, which is already live", result_name,
                     result_index);
            rc = invalid(err, k, op, what);
            break;
        }
        uint64_t peak;
        if (!ck_size_add(st.held, alloc, &st.held) || !ck_size_add(st.held, tmp, &peak)) {
            rc = invalid(err, k, op, "memory held exceeds 2^64 bytes");
            break;
        }
        *result = true;
        if (peak > out->peak_bytes) {
            out->peak_bytes = peak;
            out->peak_op = k;
        }
        /* What the operation frees once done. */
        if (op->kind == CK_F_NONE) {
            free_input(&st, i);
        } else if (op->kind == CK_B) {
            if (st.x[i]) {
                st.x[i] = false;
                st.held -= ck_chain_x_bytes(c, i);
            }
            st.y[i + 1] = false;
            st.xbar[i + 1] = false;
            st.held -= ck_chain_x_bytes(c, i + 1) + ck_chain_xbar_bytes(c, i + 1);
        }
        out->time += time;
        out->count[op->kind]++;
        if (live_after)
            live_after[k] = st.held;
        if (op_peak)
            op_peak[k] = peak;
    }
    if (rc == CK_OK && !st.y[0])
        rc = ck_err_fail(err, CK_ERR_INPUT, "schedule: ends without y_0 (the gradient of the input) "
                                        "being live; a complete schedule ends with B 0");
    free(flags);
    return rc;
}
