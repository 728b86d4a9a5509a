#include "planner/plan_check.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "planner/schedule.h"
#include "planner/size.h"

static bool times_agree(double a, double b)
{
    return a == b || fabs(a - b) <= CK_PLAN_TIME_TOLERANCE * fmax(fabs(a), fabs(b));
}

static void differ_bytes(ck_plan_check *out, const char *field, uint64_t plan, uint64_t replayed)
{
    out->differences[out->n_differences++] =
        (ck_plan_difference){.field = field, .plan_bytes = plan, .replayed_bytes = replayed};
}

static void compare_bytes(ck_plan_check *out, const char *field, uint64_t plan, uint64_t replayed)
{
    if (plan != replayed)
        differ_bytes(out, field, plan, replayed);
}

static void compare_time(ck_plan_check *out, const char *field, double plan, double replayed)
{
    if (!times_agree(plan, replayed))
        out->differences[out->n_differences++] = (ck_plan_difference){
            .field = field, .is_time = true, .plan_time = plan, .replayed_time = replayed};
}

static int replay_both(const ck_plan_file *p, const ck_chain *c, ck_replay *plan, ck_replay *base,
                       ck_err *err)
{
    ck_schedule baseline = {0};
    int rc = ck_schedule_replay(c, &p->schedule, plan, NULL, NULL, err);
    if (rc == CK_OK)
        rc = ck_schedule_baseline(c, &baseline, err);
    if (rc == CK_OK)
        rc = ck_schedule_replay(c, &baseline, base, NULL, NULL, err);
    ck_schedule_free(&baseline);
    return rc;
}

int ck_plan_check_replay(const ck_plan_file *p, const ck_chain *c, uint64_t static_bytes,
                         ck_plan_check *out, ck_err *err)
{
    memset(out, 0, sizeof *out);
    ck_replay plan, base;
    int rc = replay_both(p, c, &plan, &base, err);
    if (rc != CK_OK)
        return rc;
    ck_plan_figures *r = &out->replayed;
    if (!ck_size_add(static_bytes, plan.peak_bytes, &r->peak_bytes) ||
        !ck_size_add(static_bytes, base.peak_bytes, &r->baseline_peak_bytes))
        return ck_err_fail(err, CK_ERR_INPUT, "static memory plus activations exceed 2^64 bytes");
    r->activation_peak_bytes = plan.peak_bytes;
    r->static_bytes = static_bytes;
    r->baseline_activation_peak_bytes = base.peak_bytes;
    r->time = plan.time;
    r->baseline_time = base.time;
    r->overhead = ck_plan_overhead(plan.time, base.time);

    const ck_plan_figures *f = &p->predicted;
    if (p->budget_bytes < r->peak_bytes)
        differ_bytes(out, "budget_bytes", p->budget_bytes, r->peak_bytes);
    compare_bytes(out, "predicted.peak_bytes", f->peak_bytes, r->peak_bytes);
    compare_bytes(out, "predicted.activation_peak_bytes", f->activation_peak_bytes, r->activation_peak_bytes);
    compare_bytes(out, "predicted.static_bytes", f->static_bytes, r->static_bytes);
    compare_bytes(out, "predicted.baseline_peak_bytes", f->baseline_peak_bytes, r->baseline_peak_bytes);
    compare_bytes(out, "predicted.baseline_activation_peak_bytes", f->baseline_activation_peak_bytes,
                  r->baseline_activation_peak_bytes);
    compare_time(out, "predicted.time", f->time, r->time);
    compare_time(out, "predicted.baseline_time", f->baseline_time, r->baseline_time);
    compare_time(out, "predicted.overhead", f->overhead, r->overhead);
    return CK_OK;
}

void ck_plan_check_describe(const ck_plan_difference *d, char *buf, size_t len)
{
    if (d->is_time) {
        snprintf(buf, len, "%s: the plan file says %.15g, the replay gives %.15g", d->field,
                 d->plan_time, d->replayed_time);
        return;
    }
    char plan[32], replayed[32];
    ck_size_format(d->plan_bytes, plan, sizeof plan);
    ck_size_format(d->replayed_bytes, replayed, sizeof replayed);
    if (strcmp(d->field, "budget_bytes") == 0)
        snprintf(buf, len, "budget_bytes: the plan file says %llu (%s), below the replayed "
                           "peak_bytes of %llu (%s)", (unsigned long long)d->plan_bytes, plan,
                 (unsigned long long)d->replayed_bytes, replayed);
    else
        snprintf(buf, len, "%s: the plan file says %llu (%s), the replay gives %llu (%s)", d->field,
                 (unsigned long long)d->plan_bytes, plan, (unsigned long long)d->replayed_bytes,
                 replayed);
}
