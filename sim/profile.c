/* profile: stage times measured with the executor (see profile.h). */
#include "sim/profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/costs.h"
#include "planner/segments.h"
#include "sim/clock.h"

/* Runs `steps` measured steps of s and sets op_median[k] to the median time of op k and
 * *outside_ops to the median time of a step spent outside its operations (optimizer,
 * inputs); *peak receives the largest tracked activation peak of a step. */
static int time_ops(ck_exec *e, const ck_schedule *s, uint64_t steps, double *op_median,
                    double *outside_ops, uint64_t *peak, ck_err *err)
{
    double *samples = calloc(s->n * steps, sizeof *samples);
    double *column = calloc(steps, sizeof *column), *outside = calloc(steps, sizeof *outside);
    if (!samples || !column || !outside) {
        free(samples);
        free(column);
        free(outside);
        return ck_err_oom(err);
    }
    int rc = CK_OK;
    *peak = 0;
    for (uint64_t k = 0; k <= steps; k++) {
        ck_step_stats st;
        /* step 0 warms up; its times are written into row 0 and overwritten by step 1 */
        double *row = samples + (k ? k - 1 : 0) * s->n;
        rc = ck_exec_step(e, s, k, &st, &(ck_exec_trace){.seconds = row}, err);
        if (rc != CK_OK) /* interrupted, say: st holds nothing */
            break;
        if (st.activation_peak_bytes > *peak)
            *peak = st.activation_peak_bytes;
        outside[k ? k - 1 : 0] = st.seconds;
        for (size_t op = 0; op < s->n; op++)
            outside[k ? k - 1 : 0] -= row[op];
    }
    *outside_ops = fmax(0, ck_clock_median(outside, steps));
    free(outside);
    for (size_t op = 0; rc == CK_OK && op < s->n; op++) {
        for (uint64_t k = 0; k < steps; k++)
            column[k] = samples[k * s->n + op];
        op_median[op] = ck_clock_median(column, steps);
    }
    free(samples);
    free(column);
    return rc;
}

int ck_profile_run(const ck_workload *w, uint64_t steps, const ck_exec_opts *opts,
                   ck_profile *out, ck_err *err)
{
    memset(out, 0, sizeof *out);
    ck_exec *exec = NULL;
    ck_schedule base = {0}, every = {0};
    double *base_median = NULL, *median = NULL, ignored_time;
    uint64_t ignored;
    size_t L = w->chain.n_stages;
    size_t *starts = malloc(L * sizeof *starts);
    out->keep_all = calloc(L, sizeof *out->keep_all);
    int rc = starts && out->keep_all
                 ? ck_exec_create(w->model, &w->chain, w->stage_first, opts, &exec, err)
                 : ck_err_oom(err);
    for (size_t i = 0; rc == CK_OK && i < L; i++)
        starts[i] = i;
    /* Two schedules: the baseline for the store-everything peak, and one that checkpoints
     * every stage, in which each stage runs F_ck (but the last), F_all and B once. */
    if (rc == CK_OK)
        rc = ck_schedule_baseline(&w->chain, &base, err);
    if (rc == CK_OK)
        rc = ck_segments_of(&w->chain, starts, L, &every, err);
    if (rc == CK_OK && (!(base_median = calloc(base.n, sizeof *base_median)) ||
                        !(median = calloc(every.n, sizeof *median))))
        rc = ck_err_oom(err);
    if (rc == CK_OK)
        rc = time_ops(exec, &base, 1, base_median, &ignored_time, &out->peak_bytes, err);
    if (rc == CK_OK)
        rc = time_ops(exec, &every, steps, median, &out->outside_ops, &ignored, err);
    if (rc == CK_OK)
        rc = ck_costs_from_profile(&w->chain, &every, median, out->outside_ops, &out->chain,
                                   out->keep_all, err);
    free(starts);
    free(median);
    free(base_median);
    ck_schedule_free(&every);
    ck_schedule_free(&base);
    ck_exec_free(exec);
    return rc;
}

void ck_profile_free(ck_profile *p)
{
    free(p->chain.stages);
    free(p->keep_all);
    memset(p, 0, sizeof *p);
}
