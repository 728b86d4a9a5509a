/* warning: the pitfalls of the seed page as warnings with numbers (docs/plan-format.md,
 * "warnings"): the KV cache left on while training, the attention score matrix of a
 * non-flash attention at long context, static memory over the budget (with what sharding
 * or offload would leave), and the figures of a forward pass alone (inference). Each
 * warning's bytes are computed here from the model's nodes and the op table, never from a
 * planner. */
#ifndef CK_WARNING_H
#define CK_WARNING_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "planner/derive.h"
#include "planner/err.h"
#include "planner/model.h"
#include "planner/workload.h"

#define CK_WARNING_MESSAGE_MAX 1024
#define CK_WARNINGS_MAX 4

typedef struct {
    const char *code; /* "kv_cache", "attention_scores", "static_over_budget", "inference" */
    uint64_t bytes;
    char message[CK_WARNING_MESSAGE_MAX];
} ck_warning;

typedef struct {
    size_t n;
    ck_warning items[CK_WARNINGS_MAX];
} ck_warnings;

/* The bytes a KV cache holds at the model's batch and sequence: for every attention node,
 * 2 (K and V) x B x T x kv_heads x head_dim x the size of its input's dtype. */
int ck_warning_kv_cache_bytes(const ck_model *m, uint64_t *out, ck_err *err);

/* One attention node's score memory as the op table gives it. */
typedef struct {
    size_t node;          /* CK_NO_NODE: the model has no non-flash attention */
    uint64_t kept;        /* its internal saved tensors (probabilities, dropout mask...) */
    uint64_t workspace;   /* the larger of its forward and backward workspace */
    uint64_t flash;       /* the same node with a flash kernel: kept + workspace */
    uint64_t stage_rest;  /* what the rest of its stage saves for backward */
} ck_attention_scores;

/* The non-flash attention node of w whose kept + workspace is largest. */
int ck_warning_attention_scores(const ck_workload *w, ck_attention_scores *out, ck_err *err);

/* The warnings of planning w for training: kv_cache when the model says use_cache,
 * attention_scores when a non-flash attention's kept + workspace exceeds what the rest of
 * its stage saves. */
int ck_warning_training(const ck_workload *w, ck_warnings *out, ck_err *err);

/* What each sharding leaves per GPU (planner/derive's figures for that layout; offload:
 * s less its optimizer state and master weights), and the fewest GPUs (up to
 * CK_WARNING_MAX_GPUS; 0: none) with which it fits the budget beside min_activation. */
typedef enum { CK_ZERO_1, CK_ZERO_2, CK_ZERO_3, CK_OFFLOAD, CK_N_SHARDINGS } ck_sharding;
#define CK_WARNING_MAX_GPUS 4096
#define CK_WARNING_SHOWN_GPUS 8
typedef struct {
    uint64_t per_gpu[CK_N_SHARDINGS]; /* over CK_WARNING_SHOWN_GPUS GPUs; offload: on one */
    uint64_t fewest[CK_N_SHARDINGS];
} ck_sharding_figures;
int ck_warning_sharding_figures(const ck_model *m, const ck_static_mem *s, uint64_t budget,
                                uint64_t min_activation, ck_sharding_figures *out, ck_err *err);

/* static_over_budget: static memory s of model m (one rank's, under s->layout) is over
 * budget; what ZeRO-1/2/3 over 8 GPUs and optimizer offload leave per GPU, and the fewest
 * GPUs with which each fits beside the smallest plan's min_activation bytes. */
int ck_warning_static_over_budget(const ck_model *m, const ck_static_mem *s, uint64_t budget,
                                  uint64_t min_activation, ck_warning *out, ck_err *err);

/* Prints each warning on f as "ckplan: warning: CODE: MESSAGE". */
void ck_warning_print(FILE *f, const ck_warnings *w);
/* Adds w as the array `warnings` of obj (nothing when it is empty); false when out of
 * memory. */
bool ck_warning_add_json(cJSON *obj, const ck_warnings *w);
/* Checks `warnings` of root, when present: an array of {code, message, bytes}. */
int ck_warning_check_json(const cJSON *root, const char *file, ck_err *err);

#endif
