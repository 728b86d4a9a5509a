/* comm: the bytes each GPU sends in a training step, by the collectives of its layout
 * (docs/parallel.md, "Which layout?"). Bytes, not time: nothing here knows a link.
 *
 * Every collective is a ring over n ranks whose buffer is split into n chunks, one a rank
 * (Patarasuk and Yuan 2009; NCCL's ring algorithms): a reduce-scatter or an all-gather
 * sends n - 1 chunks from each rank, an all-reduce (a reduce-scatter then an all-gather)
 * 2(n - 1). A buffer that n does not divide is padded to n whole chunks, as FSDP pads its
 * flat parameters. The functions return false when a count is over 64 bits. */
#ifndef CK_COMM_H
#define CK_COMM_H

#include <stdbool.h>
#include <stdint.h>

#include "planner/err.h"
#include "planner/layout.h"
#include "planner/model.h"

/* Bytes one rank sends: reduce-scatter and all-gather (n - 1) chunks, all-reduce 2(n - 1). */
bool ck_comm_ring_gather(uint64_t n, uint64_t chunk, uint64_t *out);
bool ck_comm_ring_all_reduce(uint64_t n, uint64_t chunk, uint64_t *out);

/* A data-parallel step of one rank (Rajbhandari et al. 2020, "ZeRO", section 7). Shards are
 * the rank's 1/ranks of each tensor, rounded up, in bytes. */
typedef struct {
    uint64_t ranks;           /* data-parallel ranks; 1: nothing is sent */
    unsigned zero;            /* ZeRO stage 0..3 */
    uint64_t microbatches;    /* per rank and step: gradient accumulation */
    uint64_t param_shard;     /* of every parameter, at the parameter dtype */
    uint64_t trainable_shard; /* of the trainable parameters, at the parameter dtype */
    uint64_t grad_shard;      /* of the gradients (the trainable parameters'), at theirs */
} ck_comm_dp;

typedef struct {
    uint64_t gradients;  /* all-reduce (stage 0) or reduce-scatter (1-3) of the gradients */
    uint64_t parameters; /* all-gather of updated (1, 2) or used (3) parameters */
    uint64_t tensor;     /* tensor parallelism's activations (ck_comm_tensor_parallel_layer) */
    uint64_t pipeline;   /* pipeline parallelism's activations and gradients (ck_comm_pipeline_rank) */
    uint64_t total;      /* the four added */
} ck_comm_bytes;

/* Stage 0 all-reduces the accumulated gradients once a step (DDP's no_sync until the last
 * microbatch): 2(n-1) gradient shards, the paper's 2Ψ. Stage 1 reduce-scatters them once
 * and all-gathers the updated trainable parameters once: the same 2Ψ. Stage 2 keeps only
 * its gradient shard, so it reduce-scatters each microbatch's gradients (as DeepSpeed
 * does), then all-gathers the parameters once: 2Ψ with one microbatch. Stage 3 all-gathers
 * every parameter before each microbatch's forward and again before its backward and
 * reduce-scatters its gradients: 3Ψ a microbatch. */
bool ck_comm_data_parallel(const ck_comm_dp *in, ck_comm_bytes *out);

/* The same for layout l of model m, its shards from planner/derive (the static memory of l
 * at ZeRO-3, whatever l's stage: each parameter tensor's share, rounded up), of the nodes k
 * with mine[k] (n_nodes entries: a pipeline rank's; NULL: all of them). */
int ck_comm_data_parallel_of(const ck_model *m, const ck_layout *l, const bool *mine,
                             uint64_t microbatches, ck_comm_bytes *out, ck_err *err);

/* Megatron tensor parallelism over t ranks (Narayanan et al. 2021, section 3.2; Korthikanti
 * et al. 2022, section 4.2.2): bytes one rank sends for one transformer layer and one
 * microbatch whose s·b·h activation is `activation` bytes. Forward all-reduces it twice
 * (after attention, after the MLP) and backward twice; with sequence parallelism each
 * all-reduce becomes an all-gather and a reduce-scatter of the same total. A layer whose
 * forward is recomputed whole (full recompute) communicates its forward again; selective
 * recompute (attention's core alone) does not. */
bool ck_comm_tensor_parallel_layer(uint64_t t, uint64_t activation, bool sequence_parallel,
                                   bool recomputed, uint64_t *out);

/* Pipeline parallelism over p stages, each rank holding v model chunks (v = 1: 1F1B; more:
 * interleaved; Narayanan et al. 2021, section 2.2): chunk c (of p·v) runs on rank c mod p,
 * and every microbatch sends its boundary activation (`boundary` bytes) from each chunk to
 * the next in forward and its gradient back in backward. Bytes rank `rank` sends in a step
 * of m microbatches; false also when v is 0 or rank not below p. */
bool ck_comm_pipeline_rank(uint64_t p, uint64_t v, uint64_t rank, uint64_t m, uint64_t boundary,
                           uint64_t *out);

#endif
