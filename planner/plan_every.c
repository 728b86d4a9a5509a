/* every: checkpoint every layer, the practice of training stacks: Hugging Face's
 * gradient_checkpointing_enable() wraps each decoder layer in torch.utils.checkpoint, as
 * FSDP's apply_activation_checkpointing does each module its check_fn selects (the
 * transformer block); Chen et al. 2016 (section 4.1) checkpoint per block too. Each layer
 * keeps only its input in the forward and is recomputed once, whole, before its backward;
 * stages in no layer are stored. The plan does not depend on the budget: users compare
 * against it, so it is planned as they run it, not improved. */
#include "planner/layers.h"
#include "planner/planner.h"

static int plan_every(const ck_chain *c, uint64_t budget, const ck_planner_opts *opts,
                      ck_plan_result *result, uint64_t *min_budget, ck_err *err)
{
    (void)opts;
    size_t n_layers;
    int rc = ck_layers_every(c, &result->schedule, &n_layers, err);
    if (rc != CK_OK)
        return rc;
    result->segments = (long)n_layers;
    return ck_planner_check_fit(c, &result->schedule, budget, min_budget, err);
}

const ck_planner ck_planner_every = {
    "every", "checkpoint every layer, as Hugging Face and FSDP do (a chain file: every stage)",
    plan_every, ck_layers_known, .whatever_the_budget = true};
