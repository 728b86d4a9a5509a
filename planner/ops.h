/* ops: the op table. One entry per op says what a node of that op needs, makes, keeps for
 * its backward and costs. Chain derivation reads it to size stages; the executor allocates
 * exactly what it declares, which is what lets predicted and measured memory agree.
 *
 * The rules behind every number are written out in docs/model-format.md. */
#ifndef CK_OPS_H
#define CK_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/dtype.h"
#include "planner/err.h"
#include "planner/ttype.h"

typedef enum {
    CK_OP_EMBEDDING, CK_OP_LINEAR, CK_OP_LAYERNORM, CK_OP_RMSNORM, CK_OP_GELU, CK_OP_RELU,
    CK_OP_SILU, CK_OP_ADD, CK_OP_MUL, CK_OP_DROPOUT, CK_OP_ATTENTION, CK_OP_CROSS_ENTROPY,
    CK_OP_MSE, CK_N_OP_KINDS
} ck_op_kind;

/* Resolved attributes of a node; each op reads only its own. */
typedef struct {
    uint64_t vocab, dim, positions; /* embedding (positions 0: no position table) */
    uint64_t out;                   /* linear */
    bool bias, tied;                /* linear; tied: shares the embedding's table */
    uint64_t heads, kv_heads;       /* attention */
    bool flash;                     /* attention */
    double p;                       /* dropout's p, attention's dropout */
} ck_attrs;

typedef enum {
    CK_ATTR_DIM,  /* a positive integer, dim name or product ("4*C") */
    CK_ATTR_BOOL,
    CK_ATTR_PROB  /* a number in [0, 1) */
} ck_attr_kind;

typedef struct {
    const char *name;
    ck_attr_kind kind;
    bool required;
    double dflt;   /* when absent: a DIM default of 0 means "not given" */
    size_t offset; /* of the field in ck_attrs: uint64_t, bool or double by kind */
} ck_attr_spec;

#define CK_OP_MAX_ARITY 2
#define CK_OP_MAX_ATTRS 4
#define CK_OP_MAX_SAVED 6

typedef enum {
    CK_SAVE_INPUT,   /* the node's input number `input` */
    CK_SAVE_OUTPUT,  /* the node's output */
    CK_SAVE_INTERNAL /* a tensor only this node makes and its backward reads */
} ck_save_kind;

typedef struct {
    ck_save_kind kind;
    size_t input;     /* CK_SAVE_INPUT */
    const char *name; /* CK_SAVE_INTERNAL: "mean", "rstd", "mask", "probs", ... */
    ck_ttype type;    /* of the saved tensor, whatever its kind */
    uint64_t bytes;
} ck_saved;

/* Everything a concrete node costs. Workspace is memory an op's kernel allocates and frees
 * within one forward (fwd_ws) or backward (bwd_ws) call. */
typedef struct {
    size_t n_saved;
    ck_saved saved[CK_OP_MAX_SAVED];
    uint64_t n_params;
    uint64_t fwd_ws_bytes, bwd_ws_bytes;
    uint64_t fwd_flops, bwd_flops;
    uint64_t fwd_bytes_moved, bwd_bytes_moved;
} ck_op_info;

typedef struct {
    ck_op_kind kind;
    const char *name;
    size_t arity;
    bool is_loss; /* scalar output; ends the graph */
    size_t n_attrs;
    ck_attr_spec attrs[CK_OP_MAX_ATTRS];
} ck_op_def;

/* The op called name, or NULL. */
const ck_op_def *ck_op_find(const char *name);
/* Names of all ops, comma separated, for messages. */
const char *ck_op_names(void);

/* Sets every attribute of op to its default. */
void ck_op_default_attrs(const ck_op_def *op, ck_attrs *a);

/* Checks a node's attributes against its input types, fills attributes whose default
 * depends on others (kv_heads), and sets *out to the output's type; activations made from
 * integers (embedding) take dtype `act`. Errors name `file`, the node's JSON `path` with
 * the input or attribute at fault, and what was expected. */
int ck_op_infer(const ck_op_def *op, ck_attrs *a, ck_dtype act, const ck_ttype *in,
                ck_ttype *out, const char *file, const char *path, ck_err *err);

/* Fills *info for a node that ck_op_infer accepted; fails only on 64-bit overflow. */
int ck_op_describe(const ck_op_def *op, const ck_attrs *a, const ck_ttype *in,
                   const ck_ttype *out, ck_op_info *info, const char *file, const char *path,
                   ck_err *err);

#endif
