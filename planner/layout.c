#include "planner/layout.h"

#include <string.h>

uint64_t ck_layout_ranks(const ck_layout *l)
{
    return (l->dp ? l->dp : 1) * ck_layout_cp(l); /* both at most 65536 */
}

bool ck_layout_shards(const ck_layout *l)
{
    return ck_layout_ranks(l) > 1 && l->zero > 0;
}

bool ck_layout_parse_fsdp(const char *name, unsigned *zero)
{
    if (strcmp(name, "full-shard") == 0)
        *zero = 3;
    else if (strcmp(name, "shard-grad-op") == 0)
        *zero = 2;
    else
        return false;
    return true;
}

bool ck_layout_pipelined(const ck_layout *l)
{
    return l->pp != 0;
}

uint64_t ck_layout_pp(const ck_layout *l)
{
    return l->pp ? l->pp : 1;
}

uint64_t ck_layout_microbatches(const ck_layout *l)
{
    return l->microbatches ? l->microbatches : ck_layout_pp(l);
}

uint64_t ck_layout_virtual(const ck_layout *l)
{
    return l->virtual_stages ? l->virtual_stages : 1;
}

uint64_t ck_layout_tp(const ck_layout *l)
{
    return l->tp ? l->tp : 1;
}

uint64_t ck_layout_cp(const ck_layout *l)
{
    return l->cp ? l->cp : 1;
}

bool ck_layout_splits_model(const ck_layout *l)
{
    return ck_layout_tp(l) > 1 || ck_layout_cp(l) > 1;
}

bool ck_layout_model_parallel_given(const ck_layout *l)
{
    return l->tp || l->sp || l->cp || l->partition;
}

int ck_layout_check(const ck_layout *l, ck_err *err)
{
    if (l->sp && ck_layout_tp(l) < 2)
        return ck_err_fail(err, CK_ERR_INPUT, "--sp: sequence parallelism splits over the "
                           "tensor-parallel ranks: it needs --tp 2 or more, got --tp %llu",
                           (unsigned long long)ck_layout_tp(l));
    if (l->partition && (ck_layout_tp(l) < 2 || l->sp))
        return ck_err_fail(err, CK_ERR_INPUT, "--partition-activations: checkpoints are split over "
                           "the tensor-parallel ranks: it needs --tp 2 or more%s",
                           l->sp ? " and no --sp, under which a layer's input is split already"
                                 : "");
    return CK_OK;
}
