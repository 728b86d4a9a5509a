/* hf_rank: what one rank of a tensor-, sequence- and context-parallel layout runs of a
 * Hugging Face config (docs/parallel.md): whether the config's sizes split over the ranks,
 * and the vocabulary padded to a multiple of the tensor-parallel ranks. planner/hf builds
 * the rank's graph from it. */
#ifndef CK_HF_RANK_H
#define CK_HF_RANK_H

#include <stdint.h>

#include "planner/err.h"
#include "planner/hf_config.h"
#include "planner/model.h"

/* The sizes one rank's graph is built from. */
typedef struct {
    uint64_t tp, cp;   /* ranks, 1 when not split */
    bool sp;
    uint64_t vocab;    /* the vocabulary padded to a multiple of tp (Megatron pads it) */
} ck_hf_rank;

/* The rank of c under opts->layout, with opts->sets' dims in force (--set H=..., --seq):
 * CK_ERR_INPUT naming the field and the values when heads, KV heads, the MLP width or the
 * experts' width do not divide by --tp, the sequence by --cp (and what a context-parallel
 * rank holds by --tp under --sp), or for what no rank model is built (--lora with --tp or
 * --cp; Mixtral's experts under --sp). */
int ck_hf_rank_of(const ck_hf_config *c, const ck_model_opts *opts, const char *file,
                  ck_hf_rank *out, ck_err *err);

#endif
