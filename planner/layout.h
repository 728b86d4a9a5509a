/* layout: how a training step is spread over GPUs: dp data-parallel ranks, each running its
 * own microbatch (--batch is per rank), and the ZeRO stage that shards static memory over
 * them; and pipeline stages, each holding a contiguous part of the layers, through which
 * microbatches flow under 1F1B (docs/parallel.md). */
#ifndef CK_LAYOUT_H
#define CK_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

/* The most data-parallel ranks --dp takes. */
#define CK_LAYOUT_MAX_DP 65536
#define CK_LAYOUT_MAX_ZERO 3
/* The most pipeline stages, microbatches and virtual stages --pp, --microbatches and
 * --virtual-stages take. */
#define CK_LAYOUT_MAX_PP 1024
#define CK_LAYOUT_MAX_MICROBATCHES 65536
#define CK_LAYOUT_MAX_VIRTUAL 64

typedef struct {
    uint64_t dp;   /* ranks, 1..CK_LAYOUT_MAX_DP; 0: no layout given (one rank) */
    unsigned zero; /* ZeRO stage, 0..CK_LAYOUT_MAX_ZERO: 1 shards optimizer state and master
                      weights, 2 also gradients, 3 also parameters */
    /* Pipeline parallelism (planner/pipeline.h): all 0 when none is given. */
    uint64_t pp;             /* pipeline stages (ranks), 1..CK_LAYOUT_MAX_PP */
    uint64_t microbatches;   /* per step, each of --batch; 0: pp of them */
    uint64_t virtual_stages; /* model chunks per rank (interleaved 1F1B); 0: 1 */
} ck_layout;

/* The ranks static memory is split over: l->dp, or 1 when none is given. */
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

#endif
