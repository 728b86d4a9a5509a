/* chain: the chain of stages (docs/internals.md section 2), and chain files
 * (`ckplan-chain/1`).
 *
 * Tensor sizes: x_0 is input_bytes; x_{i+1} is stages[i].out_bytes; x̄_{i+1} is
 * stages[i].saved_bytes (>= out_bytes); x̄_0 is x_0; y_i has the size of x_i. */
#ifndef CK_CHAIN_H
#define CK_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "planner/err.h"

#define CK_CHAIN_FORMAT "ckplan-chain/1"
/* Chains longer than this are refused by default, derived or read: planning time and
 * schedules grow faster than the chain. The environment variable CKPLAN_MAX_STAGES changes
 * it. */
#define CK_CHAIN_MAX_STAGES 100000
/* A stage's forward or backward time, or the loss's, is at most this: a schedule's total
 * time (a sum over fewer than 2^64 operations) then stays finite, and JSON, where plans and
 * records hold it, has no infinity. Chain files, costs files and derived chains are held
 * to it. */
#define CK_CHAIN_MAX_TIME 1e100
#define CK_CHAIN_MAX_TIME_WHY "times must be at most 1e+100 so that a schedule's total time stays finite"

/* A way to run a stage's saving forward (F_all): what it keeps for the backward (x̄_{i+1},
 * output included), its forward's transient bytes, and its backward's time and transient
 * bytes, which include recomputing what it did not keep. Variant 0 of every stage is
 * "all", the stage's own fields; a stage may list others (selective recompute). */
typedef struct {
    char *name;
    uint64_t saved_bytes, fwd_tmp_bytes, bwd_tmp_bytes;
    double bwd_time;
} ck_variant;

#define CK_VARIANT_ALL "all"
/* Variants a stage may have, "all" included. */
#define CK_STAGE_MAX_VARIANTS 8

typedef struct {
    char *name;
    double fwd_time, bwd_time;
    uint64_t out_bytes, saved_bytes, fwd_tmp_bytes, bwd_tmp_bytes;
    size_t n_variants;    /* beyond "all": 0 .. CK_STAGE_MAX_VARIANTS - 1 */
    ck_variant *variants; /* owned by the chain */
    /* A partitioned checkpoint (DeepSpeed's partition_activations, docs/parallel.md): when
     * not 0, an F_ck of this stage that reads the plain x_i keeps this rank's shard of it,
     * shard_bytes, in place of x_i (planner/action.h says when). Derived chains of such a
     * layout only: chain files have none, and planners plan without it (planner.h). */
    uint64_t shard_bytes;
    /* Where the chain knows its layers (ck_chain.layers is CK_CHAIN_LAYERS_FOUND): 1 + the
     * number of the model layer (block instance) this stage lies in, 0 for a stage in none
     * (embeddings, final norm, head). 0 otherwise. */
    size_t layer;
} ck_stage;

/* What a chain knows of the model layers its stages belong to: per-layer checkpointing
 * (the every planner) checkpoints those. */
typedef enum {
    CK_CHAIN_NO_LAYERS, /* a chain file: it names no layers, each stage stands for one */
    CK_CHAIN_LAYERS_FOUND, /* a model's: stages[i].layer says */
    CK_CHAIN_LAYERS_UNKNOWN /* a model whose layers were not found (planner/layers.h says
                               why: no repeated block, two, a stage across a layer's edge) */
} ck_chain_layers;

typedef struct {
    char *name;
    uint64_t input_bytes;
    size_t n_stages; /* L >= 1 */
    ck_stage *stages;
    double loss_bwd_time;
    uint64_t loss_bwd_tmp_bytes;
    ck_chain_layers layers;
} ck_chain;

/* Refuses n_stages above the limit in force (CKPLAN_MAX_STAGES, or CK_CHAIN_MAX_STAGES),
 * naming the limit and how to raise it; `file` and the JSON path `path` (or "" when the
 * count is not written anywhere) say where it came from. */
int ck_chain_check_length(size_t n_stages, const char *file, const char *path, ck_err *err);

/* Sets *c to a chain of n zeroed stages (names NULL) named `name`. */
int ck_chain_alloc(ck_chain *c, const char *name, size_t n_stages, ck_err *err);
void ck_chain_free(ck_chain *c);

/* Reads a `ckplan-chain/1` document found at JSON path `path` of `file` ("" when it is the
 * whole file); both name it in messages. */
int ck_chain_from_json(const cJSON *root, const char *file, const char *path, ck_chain *out,
                       ck_err *err);
/* The chain as a `ckplan-chain/1` document; NULL when out of memory. */
cJSON *ck_chain_to_json(const ck_chain *c);

/* Whether a stage of c keeps a partitioned checkpoint (shard_bytes). */
bool ck_chain_partitioned(const ck_chain *c);

/* Sizes of x_i and x̄_i, 0 <= i <= L (x̄_i as the "all" variant of stage i-1 keeps it). */
uint64_t ck_chain_x_bytes(const ck_chain *c, size_t i);
uint64_t ck_chain_xbar_bytes(const ck_chain *c, size_t i);

/* Stage i's variant v, 0 <= v <= n_variants (0: "all", the stage's own fields). */
ck_variant ck_chain_variant(const ck_chain *c, size_t i, size_t v);
/* The number of stage i's variant named `name`; false if it has none of that name. */
bool ck_chain_variant_find(const ck_chain *c, size_t i, const char *name, size_t *v);
/* Gives stage i the n variants of `v` beyond "all" (copied, names too); replaces any. */
int ck_chain_set_variants(ck_chain *c, size_t i, const ck_variant *v, size_t n, ck_err *err);

#endif
