#include "planner/comm.h"

#include "planner/derive.h"
#include "planner/dtype.h"
#include "planner/size.h"

bool ck_comm_ring_gather(uint64_t n, uint64_t chunk, uint64_t *out)
{
    return ck_size_mul(n > 1 ? n - 1 : 0, chunk, out);
}

bool ck_comm_ring_all_reduce(uint64_t n, uint64_t chunk, uint64_t *out)
{
    uint64_t half;
    return ck_comm_ring_gather(n, chunk, &half) && ck_size_mul(2, half, out);
}

/* *sum += times collectives of (n - 1) chunks each */
static bool add_gathers(uint64_t n, uint64_t times, uint64_t chunk, uint64_t *sum)
{
    uint64_t one, all;
    return ck_comm_ring_gather(n, chunk, &one) && ck_size_mul(times, one, &all) &&
           ck_size_add(*sum, all, sum);
}

bool ck_comm_data_parallel(const ck_comm_dp *in, ck_comm_bytes *out)
{
    *out = (ck_comm_bytes){0};
    uint64_t n = in->ranks, m = in->microbatches;
    bool ok = true;
    if (in->zero == 0)
        ok = ck_comm_ring_all_reduce(n, in->grad_shard, &out->gradients);
    else
        ok = add_gathers(n, in->zero >= 2 ? m : 1, in->grad_shard, &out->gradients);
    if (in->zero == 3)
        ok = ok && ck_size_mul(2, m, &m) && add_gathers(n, m, in->param_shard, &out->parameters);
    else if (in->zero > 0)
        ok = ok && add_gathers(n, 1, in->trainable_shard, &out->parameters);
    return ok && ck_size_add(out->gradients, out->parameters, &out->total);
}

int ck_comm_data_parallel_of(const ck_model *m, const ck_layout *l, const bool *mine,
                             uint64_t microbatches, ck_comm_bytes *out, ck_err *err)
{
    ck_layout sharded = *l;
    sharded.zero = 3;
    ck_static_mem s;
    int rc = ck_derive_static_memory_part(m, &sharded, mine, &s, err);
    if (rc != CK_OK)
        return rc;
    /* the trainable parameters' shards are the gradients' elements at the parameter dtype */
    uint64_t grad_unit = ck_dtype_bytes(m->training.grad_dtype);
    uint64_t trainable = 0;
    bool ok = ck_size_mul(grad_unit ? s.grads / grad_unit : 0,
                          ck_dtype_bytes(m->training.param_dtype), &trainable);
    ck_comm_dp in = {ck_layout_ranks(l), l->zero, microbatches, s.params, trainable, s.grads};
    if (!ok || !ck_comm_data_parallel(&in, out))
        return ck_err_fail(err, CK_ERR_INPUT, "%s: the bytes communicated in a step are over 64 bits",
                           m->file);
    return CK_OK;
}

bool ck_comm_tensor_parallel_layer(uint64_t t, uint64_t activation, bool sequence_parallel,
                                   bool recomputed, uint64_t *out)
{
    uint64_t chunk = ck_size_ceil_div(activation, t ? t : 1), one = 0;
    /* an all-reduce, or an all-gather and a reduce-scatter: the same chunks either way */
    bool ok = sequence_parallel ? add_gathers(t, 2, chunk, &one) : ck_comm_ring_all_reduce(t, chunk, &one);
    /* two in forward, two in backward, two more when the forward runs again */
    return ok && ck_size_mul(recomputed ? 6 : 4, one, out);
}

bool ck_comm_pipeline_rank(uint64_t p, uint64_t v, uint64_t rank, uint64_t m, uint64_t boundary,
                           uint64_t *out)
{
    *out = 0;
    if (v == 0 || rank >= p)
        return false;
    if (p < 2)
        return true; /* every chunk on one rank: nothing crosses a link */
    /* v chunks each send forward and backward, but for the last chunk (on rank p - 1) and
     * the first (on rank 0) */
    uint64_t sends, per;
    return ck_size_mul(2, v, &sends) && ck_size_mul(m, boundary, &per) &&
           ck_size_mul(sends - (rank == p - 1) - (rank == 0), per, out);
}
