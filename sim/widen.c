#include "sim/widen.h"

#include <stdlib.h>

#include "sim/kernel.h"

static bool is_16_bit(ck_dtype d)
{
    return ck_dtype_is_float(d) && d != CK_F32;
}

/* A scratch buffer of n floats, counted: zeroed for a workspace (buf NULL), to be filled
 * from buf otherwise; NULL (w failed) when out of memory. */
static ck_widen_view_entry *add_view(ck_widen *w, void *buf, ck_dtype d, uint64_t n, bool writes)
{
    ck_widen_view_entry *v = &w->views[w->n];
    size_t count = n ? (size_t)n : 1;
    float *view = n > SIZE_MAX / sizeof(float) ? NULL
                  : buf                        ? malloc(count * sizeof(float))
                                               : calloc(count, sizeof(float));
    if (!view || w->n == CK_WIDEN_MAX_VIEWS) {
        free(view);
        w->failed = true;
        return NULL;
    }
    w->n++;
    *v = (ck_widen_view_entry){buf, view, d, n, n * sizeof(float), writes};
    w->live += v->bytes;
    if (w->live > w->peak)
        w->peak = w->live;
    return v;
}

void *ck_widen_view(ck_widen *w, void *buf, ck_dtype d, uint64_t n, bool writes)
{
    if (!buf || !is_16_bit(d))
        return buf;
    for (size_t i = 0; i < w->n; i++)
        if (w->views[i].buf == buf) {
            w->views[i].writes |= writes;
            return w->views[i].view;
        }
    ck_widen_view_entry *v = add_view(w, buf, d, n, writes);
    if (!v)
        return NULL;
    ck_kernel_cast_forward(v->view, CK_F32, buf, d, (size_t)n);
    return v->view;
}

void *ck_widen_workspace(ck_widen *w, void *ws, uint64_t ws_bytes, uint64_t kernel_bytes)
{
    if (kernel_bytes <= ws_bytes)
        return ws;
    ck_widen_view_entry *v = add_view(w, NULL, CK_F32, (kernel_bytes + 3) / 4, false);
    return v ? v->view : NULL;
}

static void drop_views(ck_widen *w, bool store)
{
    for (size_t i = 0; i < w->n; i++) {
        ck_widen_view_entry *v = &w->views[i];
        if (store && v->writes)
            ck_kernel_cast_forward(v->buf, v->dtype, v->view, CK_F32, (size_t)v->n);
        free(v->view);
    }
    w->n = 0;
    w->live = 0;
}

int ck_widen_check(ck_widen *w, ck_err *err)
{
    if (!w->failed)
        return CK_OK;
    drop_views(w, false);
    w->failed = false;
    return ck_err_oom(err);
}

void ck_widen_finish(ck_widen *w)
{
    drop_views(w, true);
}

static ck_ttype widened(ck_ttype t)
{
    if (is_16_bit(t.dtype))
        t.dtype = CK_F32;
    return t;
}

int ck_widen_kernel_workspace(const ck_model *m, const ck_node *n, uint64_t ws[2], ck_err *err)
{
    ck_ttype in[CK_OP_MAX_ARITY], out = widened(m->tensors[n->output].type);
    for (size_t i = 0; i < n->op->arity; i++)
        in[i] = widened(m->tensors[n->inputs[i]].type);
    ck_op_info info;
    int rc = ck_op_describe(n->op, &n->attrs, in, &out, &info, m->file, n->name, err);
    ws[0] = info.fwd_ws_bytes;
    ws[1] = info.bwd_ws_bytes;
    return rc;
}
