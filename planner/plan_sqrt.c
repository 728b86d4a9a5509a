/* sqrt: Chen, Xu, Zhang, Guestrin 2016, "Training deep nets with sublinear memory cost",
 * section 4.1: cut the chain into about sqrt(L) segments of equal length, keep the
 * segment inputs, and recompute each segment once during backward. The plan does not
 * depend on the budget; it either fits or it does not. */
#include <math.h>
#include <stdlib.h>

#include "planner/planner.h"
#include "planner/segments.h"

static int plan_sqrt(const ck_chain *c, uint64_t budget, const ck_planner_opts *opts,
                     ck_plan_result *result, uint64_t *min_budget, ck_err *err)
{
    (void)opts;
    size_t L = c->n_stages;
    size_t n = (size_t)llround(sqrt((double)L));
    if (n < 1)
        n = 1;
    size_t *starts = malloc(n * sizeof *starts);
    if (!starts)
        return ck_err_oom(err);
    for (size_t k = 0; k < n; k++)
        starts[k] = k * L / n;
    int rc = ck_segments_of(c, starts, n, &result->schedule, err);
    free(starts);
    result->segments = (long)n;
    return rc == CK_OK ? ck_planner_check_fit(c, &result->schedule, budget, min_budget, err) : rc;
}

const ck_planner ck_planner_sqrt = {
    "sqrt", "Chen et al. 2016: about sqrt(L) equal segments, each recomputed once", plan_sqrt, NULL, false};
