/* model: `ckplan-model/1` op graphs (docs/model-format.md): loading, validation, shape
 * inference, and the expanded graph that chain derivation and the executor walk.
 *
 * Block instances are expanded: a node `h` repeating block `layer` 4 times becomes the
 * nodes `h.0.<node>` .. `h.3.<node>`. Nodes are in execution order and the last one is the
 * loss. Every tensor is a graph input or the output of exactly one node. */
#ifndef CK_MODEL_H
#define CK_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "planner/err.h"
#include "planner/impl.h"
#include "planner/layout.h"
#include "planner/op.h"
#include "planner/training.h"

#define CK_MODEL_FORMAT "ckplan-model/1"
/* Limits on what one file may expand to; raise them here if a real model needs more. */
#define CK_MODEL_MAX_REPEAT 10000
#define CK_MODEL_MAX_NODES 200000
#define CK_MODEL_MAX_DIMS 64

#define CK_NO_NODE SIZE_MAX

typedef struct {
    char *name;
    ck_ttype type;
    uint64_t bytes;
    size_t producer; /* node index, or CK_NO_NODE for a graph input */
    /* PyTorch's requires_grad: a float x_0, or the output of a node with a trainable
     * parameter or an input that requires a gradient. Only these have gradient buffers. */
    bool requires_grad;
} ck_tensor;

typedef struct {
    char *name; /* also its output tensor's name */
    const ck_op_def *op;
    size_t inputs[CK_OP_MAX_ARITY]; /* tensor ids, op->arity of them */
    size_t output;                  /* tensor id */
    ck_attrs attrs;                 /* resolved, defaults filled */
    /* What the node keeps and costs: the op table's description, less the saved tensors no
     * required gradient needs (ck_saved.needed_for), and no backward costs when the node
     * runs no backward. */
    ck_op_info info;
    bool frozen;    /* "frozen": true on it or its block instance: its parameters get no
                       gradient and no optimizer state */
    bool trainable; /* it has parameters and is not frozen */
    bool backward;  /* it runs a backward: its output requires a gradient (not the loss,
                       whose backward is part of the loss instruction) */
    /* The internal tensors its forward makes that no required gradient needs (a node that
     * runs no backward): transients of the forward, as in PyTorch without autograd
     * recording, held in its forward workspace from byte scratch_at[j] on (info.fwd_ws_bytes
     * counts them). */
    size_t n_scratch;
    ck_saved scratch[CK_OP_MAX_SAVED];
    uint64_t scratch_at[CK_OP_MAX_SAVED];
    size_t tied_to; /* a tied parameter's owner: the embedding whose table it is; else CK_NO_NODE */
    size_t group; /* the top-level op or block instance it comes from */
} ck_node;

/* A top-level op (one node) or one instance of a block (its nodes, named like `h.3`). */
typedef struct {
    char *name;
    size_t first, end; /* nodes [first, end) */
    bool instance;     /* of a block, not a top-level op */
} ck_group;

typedef struct {
    char *file, *name;
    ck_dtype dtype; /* of activations */
    ck_training training;
    /* The implementation profile that filled the attributes nodes leave unset (--impl, else
     * training.impl); NULL: none, the op table's defaults. */
    const ck_impl *impl;
    bool use_cache; /* the model keeps a KV cache when run (Hugging Face's use_cache) */
    /* The step tensors its nodes read (ck_op_info.step_bytes), by ck_step: the mask's, one
     * per distinct window, added; the others, shared by all, the largest a node reads (the
     * leaf only from a frozen node). */
    uint64_t step_bytes[CK_N_STEPS];
    size_t n_inputs; /* tensors [0, n_inputs) are the graph inputs; tensor 0 is x_0 */
    size_t n_tensors;
    ck_tensor *tensors;
    size_t n_nodes;
    ck_node *nodes;
    size_t n_groups;
    ck_group *groups;
} ck_model;

/* A dim given a value from outside the file (`--set NAME=VALUE`, `--seq`, `--batch`). */
typedef struct {
    const char *name; /* name[0, len): it may be part of a longer string ("T=4096") */
    size_t len;
    uint64_t value;
} ck_model_set;

/* What the command line changes in a model as it is loaded. Strings are borrowed. Every
 * field's zero value means "as the file says". */
typedef struct {
    size_t n_sets;
    ck_model_set sets[CK_MODEL_MAX_DIMS]; /* names distinct */
    const char *recipe;    /* a training recipe's name, or NULL */
    const char *optimizer; /* an optimizer's name, or NULL */
    const char *impl;      /* an implementation profile's name (planner/impl), or NULL */
    const char *grads;     /* "held" or "autograd" (planner/training), or NULL */
    const char *optimizer_step; /* "fused", "foreach" or "for-loop", or NULL */
    uint64_t grad_accum;   /* micro-steps per optimizer step; 0: as the file says */
    uint64_t lora_rank;    /* Hugging Face configs only: 0, no adapters */
    const char *attention; /* Hugging Face configs only: "eager", "sdpa", "flash" or NULL */
    ck_layout layout;      /* --dp, --zero: the static memory of one rank of it; --tp, --sp,
                              --cp (Hugging Face configs only): the model one rank runs */
} ck_model_opts;

/* Sets dim name[0, len) to value in o, replacing an earlier value of the same name; false
 * when o already holds CK_MODEL_MAX_DIMS others. */
bool ck_model_opts_set(ck_model_opts *o, const char *name, size_t len, uint64_t value);
/* Whether o changes anything. */
bool ck_model_opts_any(const ck_model_opts *o);
/* Whether o's layout is parallel (--dp, --zero, --tp or --pp), whose framework keeps the
 * gradients in its own buffers: training.grads is then held. */
bool ck_model_opts_parallel(const ck_model_opts *o);
/* CK_OK unless o asks for autograd's gradient lifetimes with a parallel layout
 * (CK_ERR_INPUT, saying why). */
int ck_model_opts_check_grads(const ck_model_opts *o, ck_err *err);
/* o as canonical text, the same for options that make the same model: "B=1 T=4096
 * recipe=bf16-master" (sets sorted by name), "" for none; of the layout, only tensor and
 * context parallelism change the stages ("tp=2 sp cp=2"), the data-parallel ranks and the
 * ZeRO stage are left out. The caller frees it; NULL when out of memory. */
char *ck_model_opts_key(const ck_model_opts *o);
/* All of o as text, for people and reports: the key and the rest of the layout ("T=8192
 * dp=8 zero=3", "pp=4 microbatches=8 virtual_stages=1"), "" for none. The caller frees
 * it; NULL when out of memory. */
char *ck_model_opts_text(const ck_model_opts *o);

/* Reads and validates a `ckplan-model/1` document; `file` names it in messages. */
int ck_model_from_json(const cJSON *root, const char *file, ck_model **out, ck_err *err);
/* The same, changed by opts (NULL: nothing). A set naming no dim of the file, and options
 * that only Hugging Face configs take, are errors. */
int ck_model_from_json_opts(const cJSON *root, const char *file, const ck_model_opts *opts,
                            ck_model **out, ck_err *err);
void ck_model_free(ck_model *m);

/* Requires-grad propagation (planner/model_grad.c): sets each tensor's requires_grad and
 * each node's trainable and backward, and drops from each node's info the saved tensors no
 * required gradient needs. Refuses a model in which the loss's input requires no gradient
 * (everything frozen: nothing to train). */
int ck_model_grad_propagate(ck_model *m, ck_err *err);
/* Whether node n is a frozen embedding whose output is taken to require grad, a leaf, as
 * enable_input_require_grads() makes it (the embedding's `leaf` attribute,
 * docs/profiles.md): no backward makes that gradient. Read off the file's attributes, so
 * it holds before propagation too. */
bool ck_model_input_leaf(const ck_node *n);
/* Whether m's embedding table is frozen (LoRA), and then in *leaf whether its output is
 * such a leaf. */
bool ck_model_frozen_embedding(const ck_model *m, bool *leaf);

/* last_use[t] (n_tensors entries) receives the last node reading tensor t (0 if none). */
void ck_model_last_uses(const ck_model *m, size_t *last_use);

/* The tensor that saved entry sv of node n refers to (its input or output), or SIZE_MAX
 * for an internal one, which is no tensor of the model. */
size_t ck_model_saved_tensor(const ck_node *n, const ck_saved *sv);

/* What PEFT's adapters (lora nodes with upcast, on 16-bit inputs) keep of their inputs, read
 * off the op table's description of the first: nothing to say (no such adapters), a copy
 * of x in *copy_dtype for each adapted projection, or none, the framework casting the
 * adapters to the weights' dtype with the rest (docs/profiles.md). */
typedef enum { CK_ADAPTERS_PLAIN, CK_ADAPTERS_COPY, CK_ADAPTERS_CAST } ck_adapters;
ck_adapters ck_model_adapters(const ck_model *m, ck_dtype *copy_dtype);

/* The first node that exchanges activations with other ranks (a sequence-parallel gather
 * or scatter, context-parallel attention: docs/parallel.md), or NULL: what one process
 * cannot execute. */
const ck_node *ck_model_rank_exchange(const ck_model *m);

/* Whether tensor t is a held input: an input other than x_0 (targets, for the loss). */
bool ck_model_is_held(const ck_model *m, size_t t);

/* Whether tensor t is static for the step, not an activation: a held input, or x_0 when
 * it is integer (token ids, which have no gradient). */
bool ck_model_is_static(const ck_model *m, size_t t);

#endif
