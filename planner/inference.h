/* inference: what a forward pass alone holds (`ckplan plan --inference`). Without a
 * backward nothing is kept for one, so checkpointing has nothing to save: the memory is the
 * weights (under ZeRO-3 the rank's shard and the all-gather buffers that make each unit
 * whole for its forward), the KV cache and the forward's own largest transient, replayed
 * from the model's compiled program (every stage run as F_none, which keeps nothing). */
#ifndef CK_INFERENCE_H
#define CK_INFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "planner/err.h"
#include "planner/workload.h"

typedef struct {
    uint64_t weights;      /* the parameters, in the recipe's parameter dtype (under ZeRO-3
                              the rank's shard) */
    uint64_t gather;       /* ZeRO-3's all-gather buffers: the training step's own count
                              (ck_static_mem.gather), since the forward gathers as it does */
    uint64_t kv_cache;     /* at the model's batch and sequence (planner/warning) */
    uint64_t forward_peak; /* the most the forward's activations hold at once */
    size_t peak_stage;     /* the stage whose forward reaches it */
    uint64_t total;        /* weights + gather + kv_cache + forward_peak */
} ck_inference;

/* The figures of w, a model (CK_ERR_INPUT for a chain file, which has no forward to run). */
int ck_inference_measure(const ck_workload *w, ck_inference *out, ck_err *err);

#endif
