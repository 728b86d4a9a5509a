#include "planner/inference.h"

#include <stdlib.h>
#include <string.h>

#include "planner/action.h"
#include "planner/lower.h"
#include "planner/program.h"
#include "planner/size.h"
#include "planner/warning.h"

/* Schedule s's actions, one per stage, compiled into p by their contexts. */
static int lower_forwards(const ck_workload *w, const ck_schedule *s, const ck_lower_context *ctx,
                          ck_program *p, size_t *stage_end, ck_err *err)
{
    ck_action_state st;
    int rc = ck_action_state_init(&st, &w->chain, err);
    if (rc != CK_OK)
        return rc;
    for (size_t i = 0; rc == CK_OK && i < s->n; i++) {
        ck_action_effect e;
        rc = ck_action_describe(&st, i, &s->actions[i], &e, err);
        if (rc == CK_OK)
            rc = ck_lower_action(w->lower, &s->actions[i], &e, &ctx[i], p, err);
        if (rc == CK_OK)
            rc = ck_action_apply(&st, i, &s->actions[i], &e, NULL, err);
        stage_end[i] = p->n;
    }
    ck_action_state_free(&st);
    return rc;
}

/* The program of the forward pass, every stage F_none, the step tensors made before the
 * first layer and freed after the last (ck_lower_contexts); stage_end[i] receives the
 * number of instructions up to the end of stage i. */
static int forward_program(const ck_workload *w, ck_program *p, size_t *stage_end, ck_err *err)
{
    size_t n = w->chain.n_stages;
    ck_schedule s = {0};
    ck_lower_context *ctx = malloc((n + 1) * sizeof *ctx);
    for (size_t i = 0; ctx && i < n && ck_schedule_push(&s, CK_F_NONE, i);)
        i++;
    int rc = ctx && s.n == n ? ck_lower_contexts(w->lower, &s, ctx, err) : ck_err_oom(err);
    if (rc == CK_OK)
        rc = lower_forwards(w, &s, ctx, p, stage_end, err);
    ck_schedule_free(&s);
    free(ctx);
    return rc;
}

int ck_inference_measure(const ck_workload *w, ck_inference *out, ck_err *err)
{
    memset(out, 0, sizeof *out);
    if (!w->model)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: --inference needs a model file (ckplan-model/1): "
                                          "a chain file has no forward pass to replay", w->path);
    out->weights = w->statics.params;
    out->gather = w->statics.gather; /* derived with the layout, as training's static memory */
    int rc = ck_warning_kv_cache_bytes(w->model, &out->kv_cache, err);
    ck_program p = {0};
    size_t *stage_end = rc == CK_OK ? malloc(w->chain.n_stages * sizeof *stage_end) : NULL;
    if (rc == CK_OK && !stage_end)
        rc = ck_err_oom(err);
    if (rc == CK_OK)
        rc = forward_program(w, &p, stage_end, err);
    uint64_t *peak = rc == CK_OK ? malloc((p.n + 1) * sizeof *peak) : NULL;
    if (rc == CK_OK && !peak)
        rc = ck_err_oom(err);
    if (rc == CK_OK)
        rc = ck_program_replay(w->model, &p, NULL, peak, err);
    for (size_t k = 0, i = 0; rc == CK_OK && k < p.n; k++) {
        while (stage_end[i] <= k)
            i++;
        if (peak[k] > out->forward_peak) {
            out->forward_peak = peak[k];
            out->peak_stage = i;
        }
    }
    if (rc == CK_OK && (!ck_size_add(out->weights, out->gather, &out->total) ||
                        !ck_size_add(out->total, out->kv_cache, &out->total) ||
                        !ck_size_add(out->total, out->forward_peak, &out->total)))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: the inference figures overflow 64 bits", w->path);
    free(peak);
    free(stage_end);
    ck_program_free(&p);
    return rc;
}
