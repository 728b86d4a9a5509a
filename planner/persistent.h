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
 * left for dp, snapshots left for revolve) from each subproblem to its parts.
 *
 * Seg(s, L-1) has two more kinds, in which the loss reads the plain x_L (made by F_ck or
 * F_none of stage L-1), which nothing frees afterwards:
 *   plain loss: chain and leaf j as above, with the right part of the same kind, or the
 *     plain-loss leaf (leaf L): F_ck s, F_none s+1 .. L-1, loss, then Seg(s, L-1) after
 *     the loss;
 *   after the loss: y_L and x_L are live on entry; base F_all s, B s (no loss), chain and
 *     leaf j as above with the right part of the same kind.
 * A left part Seg(s, j-1) is always of the usual kind. The F_all s of a base or a chain, in
 * any kind, runs a variant of stage s (planner/chain.h) that the planner chooses. */
#ifndef CK_PERSISTENT_H
#define CK_PERSISTENT_H

#include <stddef.h>
#include <stdint.h>

#include "planner/chain.h"
#include "planner/err.h"
#include "planner/schedule.h"

typedef enum { CK_SEG_USUAL, CK_SEG_PLAIN_LOSS, CK_SEG_AFTER_LOSS } ck_seg_kind;

typedef struct {
    size_t leaf;    /* 0: chain; otherwise the j of leaf j (s < j <= t, so never 0), or L:
                       the plain-loss leaf */
    size_t variant; /* chain only: the variant of its F_all s (planner/chain.h) */
    uint64_t right; /* value handed to Seg(s+1, t) (chain) or Seg(j, t) (leaf) */
    uint64_t left;  /* leaf only: value handed to Seg(s, j-1) */
} ck_seg_choice;

/* Fills *out with the shape of Seg(s, t) of the given kind, s < t or kind plain loss, given
 * the value threaded down to it. */
typedef void (*ck_seg_decide)(void *ctx, size_t s, size_t t, ck_seg_kind kind, uint64_t value,
                              ck_seg_choice *out);

/* The variant of the base shape's F_all s in Seg(s, s) of the given kind (usual or after
 * the loss), given the value threaded down to it. */
typedef size_t (*ck_seg_base_variant)(void *ctx, size_t s, ck_seg_kind kind, uint64_t value);

/* Appends the whole schedule Seg(0, L-1) of the given kind to out (value is the top-level
 * one); base NULL runs every base's F_all as "all". Runs without recursion, so chains of any
 * length fit on the stack. */
int ck_persistent_emit(const ck_chain *c, ck_seg_decide decide, ck_seg_base_variant base,
                       void *ctx, ck_seg_kind kind, uint64_t value, ck_schedule *out, ck_err *err);

#endif
