/* persistent: building persistent schedules (Beaumont, Eyraud-Dubois, Herrmann, Joly,
 * Shilova 2019) from one decision per subproblem, shared by the dp and revolve planners.
 *
 * Subproblem Seg(s, t), 0 <= s <= t <= L-1: x_s (or x̄_s) is live and stays live until the
 * subproblem's last operation, B s; y_{t+1} is live at the start unless t == L-1, in which
 * case the loss is part of the subproblem. It ends with y_s live. Three shapes solve it:
 *   base (s == t):  F_all s, [loss if s == L-1], B s
 *   chain (s < t):  F_all s, Seg(s+1, t), B s
 *   leaf j (s < j <= t): F_ck s, F_none s+1 .. j-1, Seg(j, t), Seg(s, j-1)
 * A planner supplies the choice for every Seg with s < t, and may thread a value (memory
 * left for dp, snapshots left for revolve) from each subproblem to its parts. */
#ifndef CK_PERSISTENT_H
#define CK_PERSISTENT_H

#include <stddef.h>
#include <stdint.h>

#include "planner/chain.h"
#include "planner/err.h"
#include "planner/schedule.h"

typedef struct {
    size_t leaf;    /* 0: chain; otherwise the j of leaf j (s < j <= t, so never 0) */
    size_t variant; /* chain only: the variant of its F_all s (planner/chain.h) */
    uint64_t right; /* value handed to Seg(s+1, t) (chain) or Seg(j, t) (leaf) */
    uint64_t left;  /* leaf only: value handed to Seg(s, j-1) */
} ck_seg_choice;

/* Fills *out with the shape of Seg(s, t), s < t, given the value threaded down to it. */
typedef void (*ck_seg_decide)(void *ctx, size_t s, size_t t, uint64_t value, ck_seg_choice *out);

/* The variant of the base shape's F_all s, given the value threaded down to Seg(s, s). */
typedef size_t (*ck_seg_base_variant)(void *ctx, size_t s, uint64_t value);

/* Appends the whole schedule Seg(0, L-1) to out (value is the top-level one); base NULL
 * runs every base's F_all as "all". Runs without recursion, so chains of any length fit on
 * the stack. */
int ck_persistent_emit(const ck_chain *c, ck_seg_decide decide, ck_seg_base_variant base,
                       void *ctx, uint64_t value, ck_schedule *out, ck_err *err);

#endif
