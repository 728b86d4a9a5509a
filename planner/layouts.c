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

int ck_layouts_for(uint64_t gpus, ck_layout_list *out, ck_err *err)
{
    *out = (ck_layout_list){0};
    if (gpus < 1 || gpus > CK_LAYOUT_MAX_DP)
        return ck_err_fail(err, CK_ERR_INPUT, "--gpus: expected 1 to %d GPUs, got %llu",
                           CK_LAYOUT_MAX_DP, (unsigned long long)gpus);
    size_t cap = 0;
    /* Each further factor f of the layout is a loop here, `for (f = 1; f <= left; f++) if
     * (left % f == 0)`, setting base.f and passing left / f on; the data-parallel ranks
     * are what is left. */
    ck_layout base = {0};
    int rc = add_data_parallel(base, gpus, out, &cap, err);
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
    return ck_layout_ranks(l);
}

bool ck_layouts_microbatches(const ck_layout *l, uint64_t global_batch, uint64_t batch, uint64_t *out)
{
    uint64_t per_step;
    if (!batch || !ck_size_mul(ck_layout_ranks(l), batch, &per_step) || global_batch % per_step)
        return false;
    *out = global_batch / per_step;
    return *out > 0;
}

void ck_layouts_name(const ck_layout *l, char *buf, size_t len)
{
    snprintf(buf, len, "dp=%llu zero=%u", (unsigned long long)ck_layout_ranks(l), l->zero);
}
