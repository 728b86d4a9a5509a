/* fuzz_chain: bytes -> ck_json_parse -> ck_chain_from_json; a chain that loads (and has at
 * most MAX_STAGES stages, to keep each input fast) is replayed with the store-everything
 * schedule and planned by dp and revolve at a budget below the baseline's peak.
 *
 * Besides the sanitizers, two properties abort: a planner reporting an internal error
 * (ck_planner_run replays every schedule it returns), and a planner that says a budget is
 * infeasible but then fails at the smallest budget it named. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/chain.h"
#include "planner/json.h"
#include "planner/planner.h"
#include "planner/schedule.h"

#define MAX_STAGES 60
#define SLOTS 64

static void plan_at(const ck_chain *c, const ck_planner *p, uint64_t budget, int depth)
{
    ck_planner_opts opts = {.slots = SLOTS};
    ck_plan_result res;
    ck_replay rep;
    uint64_t min_budget = 0;
    ck_err err;
    int rc = ck_planner_run(c, p, budget, &opts, &res, &rep, &min_budget, &err);
    if (rc == CK_OK) {
        ck_planner_result_free(&res);
        return;
    }
    if (rc == CK_ERR_RUNTIME && strncmp(err.msg, "internal error", 14) == 0) {
        fprintf(stderr, "fuzz_chain: planner %s, budget %llu: %s\n", p->name,
                (unsigned long long)budget, err.msg);
        abort();
    }
    if (rc == CK_ERR_INFEASIBLE) {
        if (depth > 0) {
            fprintf(stderr, "fuzz_chain: planner %s named %llu as its smallest budget, "
                            "then found it infeasible (needs %llu)\n", p->name,
                    (unsigned long long)budget, (unsigned long long)min_budget);
            abort();
        }
        if (min_budget > budget)
            plan_at(c, p, min_budget, depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ck_err err;
    cJSON *root = NULL;
    if (ck_json_parse("fuzz.json", (const char *)data, size, &root, &err) != CK_OK)
        return 0;
    ck_chain c;
    if (ck_chain_from_json(root, "fuzz.json", "", &c, &err) == CK_OK) {
        if (c.n_stages <= MAX_STAGES) {
            ck_schedule s = {0};
            ck_replay rep;
            if (ck_schedule_baseline(&c, &s, &err) == CK_OK &&
                ck_schedule_replay(&c, &s, &rep, NULL, NULL, &err) == CK_OK) {
                uint64_t budget = rep.peak_bytes / 2;
                plan_at(&c, &ck_planner_dp, budget, 0);
                plan_at(&c, &ck_planner_revolve, budget, 0);
            }
            ck_schedule_free(&s);
        }
        ck_chain_free(&c);
    }
    cJSON_Delete(root);
    return 0;
}
