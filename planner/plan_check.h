/* plan_check: a plan file's figures against the exact replay of its own schedule on the
 * chain its model derives (for a model, by its compiled program), so that no number `ckplan run` reports or checks against is taken on
 * trust from the file (docs/plan-format.md, "How ckplan run checks a plan"). */
#ifndef CK_PLAN_CHECK_H
#define CK_PLAN_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/chain.h"
#include "planner/err.h"
#include "planner/plan.h"
#include "planner/schedule.h"

/* Times (and the overhead) agree within this fraction of the larger one: a JSON tool that
 * rewrites a plan may round a number's last digits. Sizes must agree exactly. */
#define CK_PLAN_TIME_TOLERANCE 1e-9

/* One figure of the file that the replay contradicts. For "budget_bytes", replayed is the
 * replayed peak_bytes, which the budget must hold; for the others, the field's own value. */
typedef struct {
    const char *field; /* "budget_bytes", "predicted.time", ... */
    bool is_time;      /* the values are in plan_time / replayed_time, else in *_bytes */
    bool is_count;     /* *_bytes hold a count (model.parameters), not bytes */
    uint64_t plan_bytes, replayed_bytes;
    double plan_time, replayed_time;
} ck_plan_difference;

/* budget_bytes, the eight fields of `predicted`, predicted.static's parts,
 * model.parameters and the five of predicted.every_layer. */
enum { CK_PLAN_CHECKED_FIELDS = 9 + CK_PLAN_STATIC_PARTS + 1 + 5 };

typedef struct {
    ck_plan_figures replayed; /* what the file's `predicted` should hold */
    ck_plan_difference differences[CK_PLAN_CHECKED_FIELDS];
    size_t n_differences; /* 0: the file's figures are the replay's */
} ck_plan_check;

/* Replays p's schedule and the store-everything baseline by `exact` on c (the chain
 * derived from the plan's model, with static_bytes beside it; exact NULL: the chain's own
 * replay, else ck_workload_replayer's, which plan files report), and every-layer
 * checkpointing's when p has predicted.every_layer, and compares every figure. CK_OK with *out filled whether or not they agree; CK_ERR_INPUT when the schedule
 * is invalid on c (the replay's message, naming the operation). */
int ck_plan_check_replay(const ck_plan_file *p, const ck_chain *c, const ck_schedule_replayer *exact,
                         uint64_t static_bytes, ck_plan_check *out, ck_err *err);

/* Sets out->replayed's static parts from s, the static memory of the plan's model (all
 * zero for a chain file), and adds to out->differences the ones p contradicts:
 * model.parameters and each part of predicted.static, where p has them. */
void ck_plan_check_statics(const ck_plan_file *p, const ck_static_mem *s, ck_plan_check *out);

/* CK_OK when p has no stage_info (plans made before it), or when its stage_info is what
 * ckplan plan writes for m: the same names in order and, exactly when m has a model, the
 * same nodes. Otherwise CK_ERR_INPUT naming the first entry that differs, with both
 * values ("stage_info[3].nodes[1]: the plan says \"h.2.ln1\", the model derives ..."):
 * the plan was made for other stages. p->stages must be m->chain->n_stages. */
int ck_plan_check_stages(const ck_plan_file *p, const ck_plan_stage_map *m, ck_err *err);

/* "predicted.time: the plan file says 69, the replay gives 68" into buf. */
void ck_plan_check_describe(const ck_plan_difference *d, char *buf, size_t len);

#endif
