/* plan_io: plan files, `ckplan-plan/1` (../shared/spec/chain-model.md section 4). */
#ifndef CK_PLAN_IO_H
#define CK_PLAN_IO_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "planner/planners.h"
#include "planner/schedule.h"

#define CK_PLAN_FORMAT "ckplan-plan/1"

/* Everything a plan file records. The replays are of the plan's schedule and of the
 * store-everything baseline; every predicted figure in the file is computed from them. */
typedef struct {
    const char *planner;
    const char *model_path, *model_sha256;
    uint64_t budget_bytes; /* the whole step's budget, as given */
    uint64_t static_bytes;
    size_t stages;
    ck_replay predicted, baseline;
    const ck_plan_result *result;
    bool baseline_fits;      /* the budget holds the baseline, so it is the plan */
    const char *granularity; /* NULL for a chain file */
    const char *time_unit;   /* "s" for models; NULL when the chain's own unit */
    uint32_t slots;          /* dp only */
} ck_plan_doc;

/* time / baseline_time - 1, and 0 when the baseline takes no time. */
double ck_plan_overhead(double time, double baseline_time);

/* The plan as a JSON document; NULL when out of memory. */
cJSON *ck_plan_to_json(const ck_plan_doc *d);

#endif
