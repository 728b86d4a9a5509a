/* action: the five operations of a chain schedule (F_all, F_ck, F_none, loss, B), and the
 * one definition of what each needs, allocates, holds transiently, frees and costs. The
 * replay (planner/schedule), the executor (sim/exec) and the tests of dp's closed-form
 * peaks all apply actions through ck_action_describe and ck_action_apply, so the rules are
 * written once; docs/internals.md states them in words.
 *
 * The tensors of a chain of L stages: x_i (0 <= i <= L), x̄_i (1 <= i <= L; x̄_0 is x_0)
 * and y_i, the gradient of x_i, with the sizes of planner/chain.h.
 *
 * Partitioned checkpoints (a stage with shard_bytes, planner/chain.h), as DeepSpeed's
 * checkpoint function with partition_activations holds them: an F_ck i that reads the plain
 * x_i first makes x_i's shard (held from its peak on); x_i stays whole until the segment
 * that F_ck began ends, before the next action that is not an F_none, and is then held as
 * its shard alone. An action that reads x_i held so first gathers it: x_i whole is made
 * beside the shard (a peak of its own), and the shard is freed. Without shard_bytes these
 * rules do nothing, and the five actions are exactly those of spec section 2. */
#ifndef CK_ACTION_H
#define CK_ACTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/chain.h"
#include "planner/err.h"

typedef enum { CK_F_ALL, CK_F_CK, CK_F_NONE, CK_LOSS, CK_B, CK_N_ACTIONS } ck_action_kind;

typedef struct {
    ck_action_kind kind;
    size_t stage;   /* 0 for CK_LOSS */
    size_t variant; /* F_all only: the stage's variant it runs (planner/chain.h), 0 = "all" */
} ck_action;

/* "F_all", "F_ck", "F_none", "loss", "B" ("?" for anything else). */
const char *ck_action_name(ck_action_kind kind);
/* Parses one of those names; false if it is none of them. */
bool ck_action_parse(const char *name, ck_action_kind *out);

typedef enum { CK_VALUE_X, CK_VALUE_XBAR, CK_VALUE_Y } ck_value_kind;

/* One tensor of the chain: x_index, x̄_index or y_index; an x̄ as stage index-1's variant
 * `variant` keeps it (0 for the others). */
typedef struct {
    ck_value_kind kind;
    size_t index;
    size_t variant;
} ck_value;

/* What is live between actions, and the bytes it holds together. */
typedef struct {
    const ck_chain *chain;
    bool *x, *xbar, *y;   /* L + 1 entries each */
    bool *sharded;        /* L + 1: x_i is live as its shard alone (partitioned checkpoints) */
    size_t *xbar_variant; /* L + 1: the variant of the F_all that made each live x̄ */
    size_t segment;       /* the stage whose F_ck made a shard of an x still held whole, or
                             SIZE_MAX */
    uint64_t held;
} ck_action_state;

/* The start of a step: only x_0 live. */
int ck_action_state_init(ck_action_state *st, const ck_chain *c, ck_err *err);
void ck_action_state_free(ck_action_state *st);
/* Whether v is live in st. */
bool ck_action_state_has(const ck_action_state *st, ck_value v);

#define CK_ACTION_MAX_FREES 3

/* What one action does from a given state. Its peak is held_before + result_bytes +
 * transient_bytes; after it, result is live and frees[] are not. */
typedef struct {
    ck_value result;
    uint64_t result_bytes;
    uint64_t transient_bytes;
    size_t n_frees;
    ck_value frees[CK_ACTION_MAX_FREES];
    uint64_t freed_bytes;
    double time;
    ck_value input; /* the x_i or x̄_i it reads as its input (x_L or x̄_L for the loss) */
} ck_action_effect;

/* The effect of action a, number k of its schedule, from st. An action that does not find
 * what it needs, computes a tensor that is already live or names a stage outside the chain
 * is CK_ERR_INPUT, worded for users: "schedule[5] (B 3): needs x̄_4, which is not live". */
int ck_action_describe(const ck_action_state *st, size_t k, const ck_action *a,
                     ck_action_effect *out, ck_err *err);

/* Applies an effect that ck_action_describe returned for st, with the partitioned
 * checkpoints' rules around it; *peak (or NULL) receives the action's peak (a gather's
 * included). CK_ERR_INPUT when the bytes held would exceed 2^64. */
int ck_action_apply(ck_action_state *st, size_t k, const ck_action *a, const ck_action_effect *e,
                    uint64_t *peak, ck_err *err);

/* Bytes of v in chain c (an x̄ in its variant). */
uint64_t ck_action_value_bytes(const ck_chain *c, ck_value v);

#endif
