/* layout: how a training step is spread over GPUs: dp data-parallel ranks, each running its
 * own microbatch (--batch is per rank), and the ZeRO stage that shards static memory over
 * them; Megatron's tensor, sequence and context parallelism, which split the model each
 * rank runs; and pipeline stages, each holding a contiguous part of the layers, through
 * which microbatches flow under 1F1B (docs/parallel.md). */
#ifndef CK_LAYOUT_H
#define CK_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "planner/err.h"

/* The most data-parallel ranks --dp takes. */
#define CK_LAYOUT_MAX_DP 65536
#define CK_LAYOUT_MAX_ZERO 3
/* The most pipeline stages, microbatches and virtual stages --pp, --microbatches and
 * --virtual-stages take. */
#define CK_LAYOUT_MAX_PP 1024
#define CK_LAYOUT_MAX_MICROBATCHES 65536
#define CK_LAYOUT_MAX_VIRTUAL 64
/* The most tensor- and context-parallel ranks --tp and --cp take. */
#define CK_LAYOUT_MAX_TP 1024
#define CK_LAYOUT_MAX_CP 1024

typedef struct {
    uint64_t dp;   /* ranks, 1..CK_LAYOUT_MAX_DP; 0: no layout given (one rank) */
    unsigned zero; /* ZeRO stage, 0..CK_LAYOUT_MAX_ZERO: 1 shards optimizer state and master
                      weights, 2 also gradients, 3 also parameters */
    /* Pipeline parallelism (planner/pipeline.h): all 0 when none is given. */
    uint64_t pp;             /* pipeline stages (ranks), 1..CK_LAYOUT_MAX_PP */
    uint64_t microbatches;   /* per step, each of --batch; 0: pp of them */
    uint64_t virtual_stages; /* model chunks per rank (interleaved 1F1B); 0: 1 */
    /* Megatron's model parallelism (Hugging Face configs only): */
    uint64_t tp;   /* tensor-parallel ranks, 1..CK_LAYOUT_MAX_TP; 0: none given (1) */
    bool sp;       /* sequence parallelism over the tp ranks (needs tp > 1) */
    uint64_t cp;   /* context-parallel ranks, 1..CK_LAYOUT_MAX_CP; 0: none given (1) */
    bool partition; /* DeepSpeed's partition_activations: a checkpointed layer's input is kept
                       split over the tp ranks (needs tp > 1, not sp); planner/action.h */
} ck_layout;

/* The ranks ZeRO splits static memory over: l->dp (1 when none is given) times the
 * context-parallel ranks, which hold the same parameters (as Megatron's distributed
 * optimizer shards over its data- and context-parallel group). */
uint64_t ck_layout_ranks(const ck_layout *l);
/* Whether l shards anything: more than one rank and a ZeRO stage above 0. */
bool ck_layout_shards(const ck_layout *l);
/* Whether l is a pipeline layout (--pp, --microbatches or --virtual-stages given). */
bool ck_layout_pipelined(const ck_layout *l);
/* Its stages, microbatches per step (default: as many as stages) and virtual stages per
 * rank (default 1); 1, 1 and 1 when l is no pipeline layout. */
uint64_t ck_layout_pp(const ck_layout *l);
uint64_t ck_layout_microbatches(const ck_layout *l);
uint64_t ck_layout_virtual(const ck_layout *l);
/* Parses --fsdp's sharding strategy: "full-shard" (ZeRO-3) or "shard-grad-op" (ZeRO-2). */
bool ck_layout_parse_fsdp(const char *name, unsigned *zero);

/* Tensor- and context-parallel ranks: l->tp and l->cp, 1 when none is given. */
uint64_t ck_layout_tp(const ck_layout *l);
uint64_t ck_layout_cp(const ck_layout *l);
/* Whether l splits the model a rank runs: tensor or context parallelism over more than one
 * rank. */
bool ck_layout_splits_model(const ck_layout *l);
/* Whether --tp, --sp, --cp or --partition-activations is given, even over one rank. */
bool ck_layout_model_parallel_given(const ck_layout *l);
/* CK_ERR_INPUT, saying why, for --sp without --tp above 1, and --partition-activations
 * without it or with --sp. */
int ck_layout_check(const ck_layout *l, ck_err *err);

#endif
