/* widen: the f32 views that the kernels compute on, around one node's pass.
 *
 * The kernels (sim/kernel) read and write f32; a model's activations, parameters and
 * gradients may be stored in bf16 or f16 (its `dtype`, `training.param_dtype` and
 * `training.grad_dtype`). Before a pass the executor asks for a view of each buffer the
 * kernel will see: an f32 or integer buffer is its own view; a 16-bit one gets an f32 copy
 * (exact). When the pass is over, ck_widen_finish rounds every view the pass may write
 * back into its buffer, to nearest with ties to even (sim/kernel's conversions, the ones
 * the cast op uses), and frees the copies. So every store into a 16-bit tensor is rounded
 * once per pass, and a gradient the pass accumulates into is read, added to in f32 and
 * rounded.
 *
 * Views are scratch, outside the tracking allocator: tracked memory is each tensor at its
 * dtype's size, what the replay predicts and a 16-bit implementation holds (docs/internals.md,
 * "16-bit execution"). The scratch high-water mark is kept for reporting. */
#ifndef CK_WIDEN_H
#define CK_WIDEN_H

#include <stdbool.h>
#include <stdint.h>

#include "planner/dtype.h"
#include "planner/err.h"
#include "planner/model.h"
#include "planner/op.h"

/* A pass sees at most its inputs and their gradients, its output and that gradient, its
 * parameters and their gradients, its internal saved tensors, a phased backward's temps
 * and its workspace. */
#define CK_WIDEN_MAX_VIEWS (2 * CK_OP_MAX_ARITY + 2 + 2 * CK_OP_MAX_PARAMS + CK_N_SLOTS + CK_OP_MAX_TEMPS + 1)

typedef struct {
    void *buf;      /* the stored tensor; NULL for a workspace */
    float *view;    /* its f32 copy (scratch) */
    ck_dtype dtype; /* the stored tensor's */
    uint64_t n, bytes;
    bool writes;    /* rounded back into buf when the pass is over */
} ck_widen_view_entry;

typedef struct {
    ck_widen_view_entry views[CK_WIDEN_MAX_VIEWS];
    size_t n;
    bool failed;            /* a view could not be allocated */
    uint64_t live, peak;    /* scratch bytes of this pass, and the most any pass held */
} ck_widen;

/* The f32 view of buf, n elements of dtype d, for one pass; `writes` when the pass may
 * store into it (an output, a gradient it accumulates into). NULL buf gives NULL. The same
 * buf asked twice (a node reading one tensor twice) gives the same view. Out of memory
 * gives NULL and marks w failed (see ck_widen_check). */
void *ck_widen_view(ck_widen *w, void *buf, ck_dtype d, uint64_t n, bool writes);

/* The workspace the pass's kernel gets: ws itself (ws_bytes, the op table's figure for the
 * stored dtypes) when the f32 kernel needs no more (kernel_bytes), else zeroed scratch of
 * kernel_bytes. */
void *ck_widen_workspace(ck_widen *w, void *ws, uint64_t ws_bytes, uint64_t kernel_bytes);

/* CK_OK when every view was made; otherwise drops them, unwritten, and reports out of
 * memory: the pass must not run. */
int ck_widen_check(ck_widen *w, ck_err *err);

/* After the pass: rounds the written views back into their buffers and frees them all. */
void ck_widen_finish(ck_widen *w);

/* The workspace node n's f32 kernels take, forward and backward: the op table's figures
 * for the same node with each float tensor in f32. Fails (CK_ERR_INPUT) only where those
 * sizes overflow 64 bits. */
int ck_widen_kernel_workspace(const ck_model *m, const ck_node *n, uint64_t ws[2], ck_err *err);

#endif
