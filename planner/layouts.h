/* layouts: the parallel layouts that use exactly n GPUs, in a fixed order, for `ckplan
 * sweep --gpus` to plan one by one (docs/parallel.md, "Which layout?"), and the
 * microbatches each does of a global batch.
 *
 * A layout is tensor parallelism (tp, with sequence parallelism when tp > 1) over a divisor
 * of n, then a pipeline (pp stages, 1F1B, one chunk a rank) over a divisor of what is
 * left, then data parallelism over the rest at ZeRO stages 0 to 3 (stage 0 alone when dp is
 * 1): in that order, tp, then pp, then the stage, ascending. The pipeline's microbatches are
 * left 0: they follow from the global batch (ck_layouts_microbatches).
 */
#ifndef CK_LAYOUTS_H
#define CK_LAYOUTS_H

#include <stddef.h>
#include <stdint.h>

#include "planner/err.h"
#include "planner/layout.h"

typedef struct {
    ck_layout *items;
    size_t n;
} ck_layout_list;

/* The layouts of `gpus` GPUs (1..CK_LAYOUT_MAX_DP), each once; free with ck_layouts_free. */
int ck_layouts_for(uint64_t gpus, ck_layout_list *out, ck_err *err);
void ck_layouts_free(ck_layout_list *l);

/* The GPUs l uses: the product of its factors. */
uint64_t ck_layouts_gpus(const ck_layout *l);

/* Microbatches of `batch` sequences each data-parallel rank of l runs in a step of
 * global_batch sequences: global_batch / (dp x batch), the tensor-parallel and pipeline
 * ranks of a data-parallel rank sharing its sequences; false when that does not divide
 * (or batch is 0). */
bool ck_layouts_microbatches(const ck_layout *l, uint64_t global_batch, uint64_t batch,
                             uint64_t *out);

/* "dp=8 zero=3", "dp=2 zero=1 tp=2 sp pp=2": l as sweep lists it, into buf. */
void ck_layouts_name(const ck_layout *l, char *buf, size_t len);

#endif
