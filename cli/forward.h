/* forward: what `ckplan plan --inference` prints and writes: the figures of a forward pass
 * alone (planner/inference) against the budget, and the `inference` warning that says why
 * there is no plan. */
#ifndef CK_FORWARD_H
#define CK_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "planner/err.h"
#include "planner/workload.h"

#define CK_INFERENCE_FORMAT "ckplan-inference/1"

/* Measures w's forward pass and reports it on stdout (a summary, or with json the
 * ckplan-inference/1 object), the warning on stderr. budget_source completes "budget ...
 * from": "--budget", "--device h100-80gb". CK_OK when the total fits the budget,
 * CK_ERR_INFEASIBLE (reported) when not, other statuses with err. */
int ck_forward_report(const ck_workload *w, uint64_t budget, const char *budget_source,
                      const char *device, bool json, ck_err *err);

#endif
