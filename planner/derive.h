/* derive: from an op graph to the chain of the chain model (docs/internals.md), and the
 * memory a training step needs whatever the schedule (static memory).
 *
 * Stages end where one tensor carries all the state (an articulation point of the forward
 * graph); their sizes and transient bytes come from running each stage's compiled actions
 * (planner/lower, planner/program: the rules of docs/model-format.md), the instructions
 * the executor allocates on. */
#ifndef CK_DERIVE_H
#define CK_DERIVE_H

#include <stddef.h>
#include <stdint.h>

#include "planner/chain.h"
#include "planner/err.h"
#include "planner/layout.h"
#include "planner/model.h"

typedef enum {
    CK_GRAN_OP,   /* a stage ends at every articulation point */
    CK_GRAN_BLOCK, /* only where a top-level op or block instance ends */
    CK_GRAN_NODE   /* no stages: every node planned on its own, as a graph
                      (planner/graph_model); ck_derive_chain takes it as CK_GRAN_OP */
} ck_granularity;

/* Roofline without overlap: time = FLOPs / gemm_flops + bytes moved / mem_bandwidth. */
typedef struct {
    double gemm_flops;    /* FLOP/s, > 0 */
    double mem_bandwidth; /* bytes/s, > 0 */
} ck_cost_model;

/* 100 GFLOP/s and 20 GB/s: a few CPU cores. */
void ck_derive_cost_model_default(ck_cost_model *cm);
/* The roofline time of flops and bytes moved, in seconds. */
double ck_derive_op_time(const ck_cost_model *cm, uint64_t flops, uint64_t bytes);

/* Derives the chain of m. When stage_first_node is non-NULL it receives a malloc'ed array
 * of L+1 entries: stage i is nodes [first[i], first[i+1]) and first[L] is the loss node. */
int ck_derive_chain(const ck_model *m, ck_granularity g, const ck_cost_model *cm,
                      ck_chain *out, size_t **stage_first_node, ck_err *err);

/* Under a layout with partitioned checkpoints (l->partition, DeepSpeed's
 * partition_activations), sets shard_bytes of every stage of c that begins a block instance
 * (a layer, whose input a checkpoint function partitions): its input x_i over the
 * tensor-parallel ranks, rounded up. stage_first as ck_derive_chain gives it. Does nothing
 * otherwise. */
void ck_derive_partition(const ck_model *m, const size_t *stage_first, const ck_layout *l,
                         ck_chain *c);

/* Parameter counts by part of the model: the top-level ops before the first block
 * instance (the embeddings), the block instances and any top-level op between them (the
 * layers), the top-level ops after the last instance (the head). All 0 for a model
 * without block instances. */
typedef struct {
    uint64_t embeddings, layers, head;
    size_t n_layers;    /* block instances */
    uint64_t per_layer; /* each instance's count when all are equal, else 0 */
} ck_param_parts;

/* Static memory of one rank (docs/model-format.md section 5, docs/parallel.md). */
typedef struct {
    uint64_t n_params;    /* a count, not bytes: of the model the rank runs, whatever ZeRO
                             shards (under --tp, the rank's part) */
    uint64_t n_trainable; /* of them, those of nodes not frozen: a count */
    ck_param_parts parts;
    ck_layout layout;     /* the layout the bytes are one rank's of */
    /* bytes: the rank's shards of parameters, gradients, optimizer state and master
     * weights, the inputs it holds, and the ZeRO-3 all-gather buffers (the whole parameters
     * of the unit computed and the one prefetched) and the ZeRO-2/3 reduce-scatter buffer
     * (the whole gradients of the largest unit) */
    uint64_t params, grads, optimizer, master, held_inputs, gather, reduce_scatter, total;
    /* Under CK_GRADS_AUTOGRAD the gradients are not static (grads is 0): the step's program
     * makes these bytes of them during the backward (planner/program) */
    uint64_t made_grads;
} ck_static_mem;

/* One rank's share of count elements split over n ranks: ⌈count/n⌉ (FSDP pads each flat
 * parameter to a multiple of n). Rank r holds elements [r·share, (r+1)·share) of a tensor,
 * those past its end being padding. */
uint64_t ck_derive_share(uint64_t count, uint64_t n);

/* The model's units, what ZeRO-3 gathers and ZeRO-2/3 reduce-scatter at once: each block
 * instance, and each run of top-level ops between them (the embeddings before the first,
 * the head after the last; a model without instances is one unit). Returns their number n;
 * when first is non-NULL (n_groups + 1 entries suffice) unit u is nodes [first[u],
 * first[u+1]) and first[n] is n_nodes. */
size_t ck_derive_units(const ck_model *m, size_t *first);

/* The whole parameters and trainable gradients (element counts) of nodes [first, end). */
void ck_derive_unit_counts(const ck_model *m, size_t first, size_t end, uint64_t *params,
                           uint64_t *grads);

/* Parameters (param_dtype); for the trainable ones (nodes not frozen) their gradients
 * (grad_dtype), optimizer state (ck_training_state_bytes of each parameter tensor) and f32
 * master weights; and the inputs other than a float first one (held for the whole step);
 * docs/model-format.md section 5. Frozen parameters are stored only. Under layout l (NULL:
 * one rank) what its ZeRO stage shards is split over its ranks tensor by tensor, each
 * share rounded up to whole elements (ck_derive_share; optimizer state kept element by
 * element follows the elements, other state is split by bytes), and the buffers that
 * sharding needs are added (docs/parallel.md). */
int ck_derive_static_memory(const ck_model *m, const ck_layout *l, ck_static_mem *out, ck_err *err);
/* The same for the nodes k with mine[k] (n_nodes entries; NULL: all of them), the part of
 * the model one pipeline rank holds: their parameters and state, the held inputs they read,
 * and the buffers of the units (as above) that begin with one of them. n_params and
 * n_trainable and parts stay the whole model's. */
int ck_derive_static_memory_part(const ck_model *m, const ck_layout *l, const bool *mine,
                                 ck_static_mem *out, ck_err *err);

/* Bytes the nodes [first, end) save for backward: each saved tensor once, the range's
 * input included, inputs other than the first (static memory) excluded. A range outside
 * the model is CK_ERR_RUNTIME (a caller's mistake). */
int ck_derive_saved_bytes(const ck_model *m, size_t first, size_t end, uint64_t *out, ck_err *err);

#endif
