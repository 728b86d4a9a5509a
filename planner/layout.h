/* layout: how a training step is spread over GPUs. For now data parallelism alone: dp
 * ranks, each running its own microbatch (--batch is per rank), and the ZeRO stage that
 * shards static memory over them (docs/parallel.md). */
#ifndef CK_LAYOUT_H
#define CK_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

/* The most data-parallel ranks --dp takes. */
#define CK_LAYOUT_MAX_DP 65536
#define CK_LAYOUT_MAX_ZERO 3

typedef struct {
    uint64_t dp;   /* ranks, 1..CK_LAYOUT_MAX_DP; 0: no layout given (one rank) */
    unsigned zero; /* ZeRO stage, 0..CK_LAYOUT_MAX_ZERO: 1 shards optimizer state and master
                      weights, 2 also gradients, 3 also parameters */
} ck_layout;

/* The ranks static memory is split over: l->dp, or 1 when none is given. */
uint64_t ck_layout_ranks(const ck_layout *l);
/* Whether l shards anything: more than one rank and a ZeRO stage above 0. */
bool ck_layout_shards(const ck_layout *l);
/* Parses --fsdp's sharding strategy: "full-shard" (ZeRO-3) or "shard-grad-op" (ZeRO-2). */
bool ck_layout_parse_fsdp(const char *name, unsigned *zero);

#endif
