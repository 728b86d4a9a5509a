/* shard: what one rank of a data-parallel layout holds of a model's parameters under its
 * ZeRO stage, and the collectives that move the rest (docs/parallel.md, "Running it").
 *
 * The executor lays parameters out flat, each node's tensors in turn, the trainable nodes'
 * first (sim/exec). A rank's shard of a tensor of E elements is ck_derive_share(E, N)
 * elements, rank r holding elements [r·share, (r+1)·share) (padding past E); its shard
 * array is its shares of every tensor in that order, so the trainable ones come first.
 * Units are planner/derive's (ck_derive_units); a unit's whole buffer holds its tensors
 * in flat order, trainable first. Every reduction adds the ranks' values in rank order
 * 0..N-1 in f32 and divides by N, so that a one-process run of the N microbatches that
 * reduces the same way gets the same bits. */
#ifndef CK_SHARD_H
#define CK_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/dtype.h"
#include "planner/err.h"
#include "planner/layout.h"
#include "planner/model.h"

/* An all-gather: every rank gives `bytes` bytes of send, and recv (N·bytes) receives rank
 * r's at r·bytes, on every rank. All ranks call collectives in the same order. */
typedef struct {
    int (*allgather)(void *ctx, const void *send, uint64_t bytes, void *recv, ck_err *err);
    void *ctx;
} ck_shard_comm;

typedef struct {
    uint64_t first; /* its first element in the flat parameter array */
    uint64_t numel, share;
    uint64_t at;      /* where this rank's share begins in the shard array */
    uint64_t in_unit; /* where it begins in its unit's whole buffer */
    size_t unit;
} ck_shard_tensor;

typedef struct {
    size_t runs[2][2];      /* its tensors: [runs[0][0], runs[0][1]) trainable, runs[1] frozen */
    uint64_t params, grads; /* whole: elements (in_unit offsets: trainable ones first) */
} ck_shard_unit;

typedef struct {
    uint64_t ranks, rank;
    unsigned zero;
    ck_shard_tensor *tensors; /* in flat order */
    size_t n_tensors, n_trainable_tensors;
    size_t *node_tensor;      /* per node: its first tensor's index */
    size_t *node_unit;        /* per node: its unit */
    ck_shard_unit *units;     /* each unit's tensors: trainable and frozen runs apart */
    size_t n_units;
    uint64_t n_shard, n_trainable_shard; /* elements of the shard array, of its trainable part */
} ck_shard;

/* The shard of rank `rank` of layout l for model m whose flat layout puts node k's
 * parameters at param_off[k]. CK_ERR_INPUT for what cannot be sharded: a tied parameter
 * at ZeRO-2 or 3 (its gradient and its gathered table would belong to another unit).
 * Free with ck_shard_free whatever the status. */
int ck_shard_create(const ck_model *m, const ck_layout *l, uint64_t rank, const size_t *param_off,
                    ck_shard *out, ck_err *err);
void ck_shard_free(ck_shard *s);

/* Where element e of tensor t lies in this rank's shard array, or false when another rank
 * holds it. */
bool ck_shard_owns(const ck_shard *s, const ck_shard_tensor *t, uint64_t e, uint64_t *at);
/* The flat index of shard position at, or false when it is padding. */
bool ck_shard_flat(const ck_shard *s, uint64_t at, uint64_t *flat);
/* Tensor of node k's parameter i, or NULL when it has none there (absent or tied). */
const ck_shard_tensor *ck_shard_param(const ck_shard *s, const ck_model *m, size_t k, size_t i);
/* The elements [*first, *end) of tensor t that this rank holds (empty when all are
 * padding); element e lies at t->at + e - *first of the shard array. */
void ck_shard_owned(const ck_shard *s, const ck_shard_tensor *t, uint64_t *first, uint64_t *end);

/* The rank-order average of element j of n_ranks blocks of `stride` elements of dtype d:
 * (((b_0 + b_1) + b_2) + ...) / n_ranks in f32. */
float ck_shard_average(const void *blocks, ck_dtype d, uint64_t n_ranks, uint64_t stride, uint64_t j);

/* Whole gradients (n elements of d, every rank's) averaged in rank order in place. */
int ck_shard_allreduce(const ck_shard_comm *c, uint64_t ranks, void *grads, ck_dtype d, uint64_t n,
                       ck_err *err);
/* Unit u's whole gradients in buf (its in_unit offsets), averaged over ranks, into this
 * rank's shares of them in the shard array grads. */
int ck_shard_reduce_scatter(const ck_shard *s, const ck_shard_comm *c, size_t u, const void *buf,
                            void *grads, ck_dtype d, ck_err *err);
/* Unit u's whole parameters from every rank's shard array `shard` into buf (its in_unit
 * offsets). */
int ck_shard_gather_unit(const ck_shard *s, const ck_shard_comm *c, size_t u, const void *shard,
                         void *buf, ck_dtype d, ck_err *err);
/* Every tensor whole into the flat array `whole`, from each rank's shares: of the shard
 * array `from` (NULL: of whole itself, each rank's own part). */
int ck_shard_gather_all(const ck_shard *s, const ck_shard_comm *c, const void *from, void *whole,
                        ck_dtype d, ck_err *err);

#endif
