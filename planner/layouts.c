#include "planner/layouts.h"

#include <stdio.h>
#include <stdlib.h>

#include "planner/size.h"

/* Appends base with dp ranks at each ZeRO stage that differs: one layout when dp is 1. */
static int add_data_parallel(ck_layout base, uint64_t dp, ck_layout_list *out, size_t *cap, ck_err *err)
{
    unsigned stages = dp > 1 ? CK_LAYOUT_MAX_ZERO : 0;
    for (unsigned zero = 0; zero <= stages; zero++) {
        if (!ck_size_reserve((void **)&out->items, cap, out->n, sizeof *out->items))
            return ck_err_oom(err);
        ck_layout l = base;
        l.dp = dp;
        l.zero = zero;
        out->items[out->n++] = l;
    }
    return CK_OK;
}

/* Appends base with pp pipeline stages (none when 1) for each divisor pp of `left`, the
 * data-parallel ranks taking the rest. */
static int add_pipelines(ck_layout base, uint64_t left, ck_layout_list *out, size_t *cap, ck_err *err)
{
    int rc = CK_OK;
    for (uint64_t pp = 1; pp <= left && pp <= CK_LAYOUT_MAX_PP && rc == CK_OK; pp++) {
        if (left % pp)
            continue;
        ck_layout l = base;
        l.pp = pp > 1 ? pp : 0;
        l.virtual_stages = pp > 1 ? 1 : 0;
        rc = add_data_parallel(l, left / pp, out, cap, err);
    }
    return rc;
}

int ck_layouts_for(uint64_t gpus, ck_layout_list *out, ck_err *err)
{
    *out = (ck_layout_list){0};
    if (gpus < 1 || gpus > CK_LAYOUT_MAX_DP)
        return ck_err_fail(err, CK_ERR_INPUT, "--gpus: expected 1 to %d GPUs, got %llu",
                           CK_LAYOUT_MAX_DP, (unsigned long long)gpus);
    size_t cap = 0;
    int rc = CK_OK;
    /* Tensor parallelism over each divisor of the GPUs, with sequence parallelism (as
     * Megatron-LM recommends: it splits what tensor parallelism leaves whole, for the same
     * bytes communicated); then the pipeline over each divisor of what is left, and the
     * data-parallel ranks over the rest. */
    for (uint64_t tp = 1; tp <= gpus && tp <= CK_LAYOUT_MAX_TP && rc == CK_OK; tp++) {
        if (gpus % tp)
            continue;
        ck_layout base = {.tp = tp > 1 ? tp : 0, .sp = tp > 1};
        rc = add_pipelines(base, gpus / tp, out, &cap, err);
    }
    if (rc != CK_OK)
        ck_layouts_free(out);
    return rc;
}

void ck_layouts_free(ck_layout_list *l)
{
    free(l->items);
    *l = (ck_layout_list){0};
}

uint64_t ck_layouts_gpus(const ck_layout *l)
{
    return ck_layout_ranks(l) * ck_layout_tp(l) * ck_layout_pp(l);
}

bool ck_layouts_microbatches(const ck_layout *l, uint64_t global_batch, uint64_t batch, uint64_t *out)
{
    uint64_t per_step;
    /* the data-parallel ranks alone: tensor-, context-parallel and pipeline ranks work on
     * the same sequences as their data-parallel peer */
    if (!batch || !ck_size_mul(l->dp ? l->dp : 1, batch, &per_step) || global_batch % per_step)
        return false;
    *out = global_batch / per_step;
    return *out > 0;
}

void ck_layouts_name(const ck_layout *l, char *buf, size_t len)
{
    char tp[32] = "", pp[32] = "";
    if (ck_layout_tp(l) > 1)
        snprintf(tp, sizeof tp, " tp=%llu%s", (unsigned long long)ck_layout_tp(l), l->sp ? " sp" : "");
    if (ck_layout_pp(l) > 1)
        snprintf(pp, sizeof pp, " pp=%llu", (unsigned long long)ck_layout_pp(l));
    snprintf(buf, len, "dp=%llu zero=%u%s%s", (unsigned long long)ck_layout_ranks(l), l->zero, tp, pp);
}
