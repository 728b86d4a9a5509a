#include "planner/persistent.h"

#include <stdbool.h>
#include <stdlib.h>

/* Work still to do, last in first out: a subproblem, or the B s that closes a chain. */
typedef struct {
    bool close; /* B s only */
    size_t s, t;
    ck_seg_kind kind;
    uint64_t value;
} seg_task;

static bool push_forward(ck_schedule *out, ck_action_kind kind, size_t from, size_t to)
{
    bool ok = ck_schedule_push(out, kind, from);
    for (size_t k = from + 1; ok && k < to; k++)
        ok = ck_schedule_push(out, CK_F_NONE, k);
    return ok;
}

static bool push_saving(ck_schedule *out, size_t s, size_t variant)
{
    return ck_schedule_append(out, (ck_action){CK_F_ALL, s, variant});
}

int ck_persistent_emit(const ck_chain *c, ck_seg_decide decide, ck_seg_base_variant base,
                       void *ctx, ck_seg_kind kind, uint64_t value, ck_schedule *out, ck_err *err)
{
    size_t L = c->n_stages;
    /* The pending tasks cover disjoint ranges of stages, so there are at most L of them. */
    seg_task *stack = malloc(L * sizeof *stack);
    if (!stack)
        return ck_err_oom(err);
    size_t depth = 0;
    stack[depth++] = (seg_task){false, 0, L - 1, kind, value};
    bool ok = true;
    while (ok && depth > 0) {
        seg_task task = stack[--depth];
        size_t s = task.s, t = task.t;
        if (task.close) {
            ok = ck_schedule_push(out, CK_B, s);
        } else if (s == t && task.kind != CK_SEG_PLAIN_LOSS) {
            ok = push_saving(out, s, base ? base(ctx, s, task.kind, task.value) : 0) &&
                 (s + 1 < L || task.kind == CK_SEG_AFTER_LOSS || ck_schedule_push(out, CK_LOSS, 0)) &&
                 ck_schedule_push(out, CK_B, s);
        } else {
            ck_seg_choice ch;
            decide(ctx, s, t, task.kind, task.value, &ch);
            if (ch.leaf == 0) {
                ok = push_saving(out, s, ch.variant);
                stack[depth++] = (seg_task){true, s, s, CK_SEG_USUAL, 0};
                stack[depth++] = (seg_task){false, s + 1, t, task.kind, ch.right};
            } else if (ch.leaf == L) {
                ok = push_forward(out, CK_F_CK, s, L) && ck_schedule_push(out, CK_LOSS, 0);
                stack[depth++] = (seg_task){false, s, t, CK_SEG_AFTER_LOSS, ch.right};
            } else {
                ok = push_forward(out, CK_F_CK, s, ch.leaf);
                stack[depth++] = (seg_task){false, s, ch.leaf - 1, CK_SEG_USUAL, ch.left};
                stack[depth++] = (seg_task){false, ch.leaf, t, task.kind, ch.right};
            }
        }
    }
    free(stack);
    return ok ? CK_OK : ck_err_oom(err);
}
