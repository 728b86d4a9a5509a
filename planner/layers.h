/* layers: a schedule seen as the per-layer checkpointing that training stacks offer
 * (Hugging Face, FSDP, DeepSpeed, Megatron-LM wrap whole decoder layers): which stages
 * are the model's decoder layers, which layers a schedule checkpoints, the schedule that
 * checkpointing exactly those layers implies, and what of the schedule that cannot
 * express (docs/emit.md). */
#ifndef CK_LAYERS_H
#define CK_LAYERS_H

#include <stdbool.h>
#include <stddef.h>

#include "planner/chain.h"
#include "planner/err.h"
#include "planner/model.h"
#include "planner/schedule.h"

#define CK_LAYERS_NO_LAYER SIZE_MAX

/* The decoder layers: the instances of the model's one repeated block (`h.0` .. `h.N-1`),
 * numbered by instance, each covering whole stages. */
typedef struct {
    size_t n_stages, n_layers;
    const char *block;   /* the name the instances share before ".N" ("h"): in the model */
    size_t block_len;
    size_t *stage_layer; /* n_stages: the layer stage i lies in, or CK_LAYERS_NO_LAYER */
    size_t *first, *end; /* n_layers: layer k is stages [first[k], end[k]) */
    const char **names;  /* n_layers: the instances' names ("h.3"), in the model */
} ck_layers;

/* Finds the layers of m, whose chain has n_stages stages, stage i being nodes
 * [stage_first[i], stage_first[i+1]) (ck_derive_chain). CK_ERR_INPUT, with a message that
 * begins with the JSON path of the plan it concerns ("stage_info[3]: ..."), when m is NULL
 * (a chain file: no layers), has no repeated block or more than one, or a stage lies
 * across the edge of a layer. Free with ck_layers_free on CK_OK. */
int ck_layers_find(const ck_model *m, size_t n_stages, const size_t *stage_first, ck_layers *out,
                   ck_err *err);
void ck_layers_free(ck_layers *l);

/* What per-layer checkpointing cannot express of a schedule. */
typedef enum {
    CK_LAYERS_NON_LAYER,   /* a stage that is no layer is recomputed */
    CK_LAYERS_INPUT_DROPPED, /* a layer's first stage is F_none: its input is not kept */
    CK_LAYERS_PART,        /* some of a layer's stages are stored, others recomputed */
    CK_LAYERS_INNER_CHECKPOINT, /* F_ck inside a layer: one of its activations kept */
    CK_LAYERS_NESTED,      /* F_ck or F_none after the loss: recomputation that checkpoints */
    CK_LAYERS_ORDER,       /* none of the above, yet the schedules differ */
    CK_LAYERS_N_LIMITS
} ck_layers_limit;

/* A schedule seen per layer. A layer is checkpointed when, before the loss, some stage of
 * it has no F_all: its activations are dropped and recomputed in the backward. */
typedef struct {
    bool *checkpointed; /* n_layers */
    size_t n_checkpointed;
    /* For each limit: how many stages (layers for the per-layer ones, operations for
     * NESTED) it concerns, and the first (a stage; a schedule index for NESTED and ORDER). */
    size_t count[CK_LAYERS_N_LIMITS], first[CK_LAYERS_N_LIMITS];
    ck_schedule expressed; /* per-layer checkpointing of the checkpointed layers */
    bool exact;            /* expressed is the schedule itself */
} ck_layers_view;

/* Views schedule s of chain c (s valid on c) per layer. Free with ck_layers_view_free
 * whatever the status. */
int ck_layers_view_of(const ck_layers *l, const ck_chain *c, const ck_schedule *s,
                      ck_layers_view *out, ck_err *err);
void ck_layers_view_free(ck_layers_view *v);

/* One limit of v (count > 0) in words, for users: "the plan recomputes 2 stages that are
 * no decoder layer (the first: embed); per-layer checkpointing stores them". */
void ck_layers_describe(const ck_layers *l, const ck_chain *c, const ck_layers_view *v,
                        ck_layers_limit which, char *buf, size_t len);

/* The schedule of checkpointing segments as units, as torch.utils.checkpoint does a
 * wrapped module: segment j is stages [first[j], end[j]) (in order, disjoint, none empty);
 * its forward is F_ck on its first stage and F_none on the others (only its input kept),
 * its backward F_all over it again, then B from its last stage to its first. The other
 * stages are F_all and B. */
int ck_layers_segments_schedule(const ck_chain *c, const size_t *first, const size_t *end,
                                size_t n_segments, ck_schedule *out, ck_err *err);

/* Marks c, the chain l was found for, with its layers (ck_chain_layers): the layer of
 * each stage, so that planners, which see only the chain, can checkpoint whole layers. */
void ck_layers_mark(const ck_layers *l, ck_chain *c);

/* CK_OK when per-layer checkpointing can checkpoint c's layers, which it can unless c is
 * a model's whose layers were not found: then CK_ERR_INPUT saying so. */
int ck_layers_known(const ck_chain *c, ck_err *err);

/* Every-layer checkpointing of c, as Hugging Face's gradient_checkpointing_enable() and
 * FSDP's per-block check_fn do it: each layer a segment of ck_layers_segments_schedule, the
 * stages in no layer stored. The layers are c's where it knows them (ck_layers_mark), each
 * stage but the last (which the loss reads) where c names none (a chain file); how many
 * there are into *n_layers.
 * CK_ERR_INPUT as ck_layers_known gives it. */
int ck_layers_every(const ck_chain *c, ck_schedule *out, size_t *n_layers, ck_err *err);

/* Whether two schedules are the same operations in the same order. */
bool ck_layers_same_schedule(const ck_schedule *a, const ck_schedule *b);

#endif
