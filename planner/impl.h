/* impl: implementation profiles. What autograd keeps for a step depends on the code that
 * runs, not on the architecture alone: transformers' modeling code writes RMSNorm, gated
 * MLPs, GPT-2's GELU and repeat_kv out in PyTorch ops, each of which keeps its own tensors,
 * where fused kernels (liger-kernel, Megatron, llm.c) keep fewer. A profile is the set of
 * implementation attributes of the op table (planner/op) that says which: data, one home.
 *
 * A profile fills the attributes a node leaves unset when a model loads (planner/model):
 * `--impl NAME`, else the model file's `training.impl`; Hugging Face configs are `hf`
 * unless told. docs/profiles.md has each profile's bytes per layer. */
#ifndef CK_IMPL_H
#define CK_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "planner/op.h"

#define CK_IMPL_MAX_CHOICES 16

/* One attribute a profile sets: op kind `op`'s boolean attribute `attr`, to `value`. */
typedef struct {
    ck_op_kind op;
    const char *attr;
    bool value;
} ck_impl_choice;

typedef struct ck_impl {
    const char *name;
    const char *summary; /* what runs, for the plan's summary and --help */
    size_t n_choices;
    ck_impl_choice choices[CK_IMPL_MAX_CHOICES];
    const struct ck_impl *base; /* a profile whose choices come first, or NULL */
} ck_impl;

/* The profile called name, or NULL. */
const ck_impl *ck_impl_find(const char *name);
/* Profile i of ck_impl_count(), in the order they are listed. */
size_t ck_impl_count(void);
const ck_impl *ck_impl_at(size_t i);
/* Their names, comma separated, for messages: "hf, fused". */
const char *ck_impl_names(void);
/* The profile of Hugging Face configs when none is given. */
#define CK_IMPL_HF_DEFAULT "hf"

/* Sets, in a, the attributes of op that profile p chooses (a holds op's defaults; the
 * model file's own values are read after, and win). */
void ck_impl_apply(const ck_impl *p, const ck_op_def *op, ck_attrs *a);

#endif
