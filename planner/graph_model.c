#include "planner/graph_model.h"

#include <stdlib.h>
#include <string.h>

#include "planner/size.h"

#define NO_ID SIZE_MAX

/* The model, the graph being filled and the maps between their indices. */
typedef struct {
    const ck_model *m;
    ck_graph *g;
    const ck_cost_model *cm;
    size_t *backward_id;    /* model node -> graph id of its backward node, or NO_ID */
    size_t *consumer_first; /* tensor t is read by consumers[consumer_first[t] .. [t+1]) */
    size_t *consumers;      /* model nodes, ascending within a tensor */
} builder;

static size_t loss_node(const ck_model *m)
{
    return m->n_nodes - 1;
}

/* The graph node holding tensor t in the forward pass: its producer's forward node (which
 * has the same index), or NO_ID for a graph input, which is static memory. */
static size_t forward_of(const ck_model *m, size_t t)
{
    return m->tensors[t].producer;
}

/* Adds id to node v's inputs unless it is NO_ID or already there; inputs[] has room for
 * every id below v. */
static void add_input(ck_graph_node *v, size_t id)
{
    if (id == NO_ID)
        return;
    for (size_t k = 0; k < v->n_inputs; k++)
        if (v->inputs[k] == id)
            return;
    v->inputs[v->n_inputs++] = id;
}

static int compare_ids(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Starts graph node id: its name (the model node's, with suffix), kind and input room. */
static int start_node(builder *b, size_t id, size_t node, const char *suffix, bool backward,
                      size_t max_inputs, ck_err *err)
{
    ck_graph_node *v = &b->g->nodes[id];
    const char *name = b->m->nodes[node].name;
    size_t len = strlen(name), extra = strlen(suffix);
    v->name = malloc(len + extra + 1);
    v->inputs = malloc((max_inputs ? max_inputs : 1) * sizeof *v->inputs);
    if (!v->name || !v->inputs)
        return ck_err_oom(err);
    memcpy(v->name, name, len);
    memcpy(v->name + len, suffix, extra + 1);
    v->backward = backward;
    return CK_OK;
}

static int overflow(const builder *b, const char *what, size_t node, ck_err *err)
{
    return ck_err_fail(err, CK_ERR_INPUT, "%s: the %s of node %s overflows 64 bits", b->m->file,
                       what, b->m->nodes[node].name);
}

/* Bytes of the node's internal saved tensors. */
static bool internal_bytes(const ck_node *n, uint64_t *out)
{
    uint64_t sum = 0;
    for (size_t s = 0; s < n->info.n_saved; s++)
        if (n->info.saved[s].kind == CK_SAVE_INTERNAL && !ck_size_add(sum, n->info.saved[s].bytes, &sum))
            return false;
    *out = sum;
    return true;
}

/* Bytes of the gradients of the node's inputs that require one, each tensor once. */
static bool input_grad_bytes(const ck_model *m, const ck_node *n, uint64_t *out)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n->op->arity; i++) {
        const ck_tensor *t = &m->tensors[n->inputs[i]];
        bool repeat = i > 0 && n->inputs[i] == n->inputs[0];
        if (t->requires_grad && !repeat && !ck_size_add(sum, t->bytes, &sum))
            return false;
    }
    *out = sum;
    return true;
}

/* Node k of the graph, the forward of op k (with its backward when `loss`), reading the
 * forward nodes of the op's inputs. */
static int start_forward(builder *b, size_t k, bool loss, ck_graph_node **v, ck_err *err)
{
    const ck_node *n = &b->m->nodes[k];
    int rc = start_node(b, k, k, "", loss, n->op->arity, err);
    if (rc != CK_OK)
        return rc;
    *v = &b->g->nodes[k];
    for (size_t i = 0; i < n->op->arity; i++)
        add_input(*v, forward_of(b->m, n->inputs[i]));
    return CK_OK;
}

static int build_forward(builder *b, size_t k, ck_err *err)
{
    const ck_node *n = &b->m->nodes[k];
    ck_graph_node *v;
    int rc = start_forward(b, k, false, &v, err);
    if (rc != CK_OK)
        return rc;
    uint64_t internal;
    if (!internal_bytes(n, &internal) ||
        !ck_size_add(b->m->tensors[n->output].bytes, internal, &v->bytes))
        return overflow(b, "output", k, err);
    v->cost = ck_derive_op_time(b->cm, n->info.fwd_flops, n->info.fwd_bytes_moved);
    v->transient_bytes = n->info.fwd_ws_bytes;
    return CK_OK;
}

/* The loss runs forward and backward in one node: what its forward keeps for its backward
 * is held only while it runs. */
static int build_loss(builder *b, ck_err *err)
{
    size_t k = loss_node(b->m);
    const ck_node *n = &b->m->nodes[k];
    ck_graph_node *v;
    int rc = start_forward(b, k, true, &v, err);
    if (rc != CK_OK)
        return rc;
    uint64_t internal;
    if (!input_grad_bytes(b->m, n, &v->bytes) || !internal_bytes(n, &internal) ||
        !ck_size_add(internal, n->info.fwd_ws_bytes, &internal) ||
        !ck_size_add(internal, n->info.bwd_ws_bytes, &v->transient_bytes))
        return overflow(b, "memory", k, err);
    v->cost = ck_derive_op_time(b->cm, n->info.fwd_flops, n->info.fwd_bytes_moved) +
              ck_derive_op_time(b->cm, n->info.bwd_flops, n->info.bwd_bytes_moved);
    return CK_OK;
}

/* Backward of model node k: the gradient of its output comes from its consumers' backward
 * nodes (the loss's being the loss node); what it saved comes from forward nodes. */
static int build_backward(builder *b, size_t k, ck_err *err)
{
    const ck_node *n = &b->m->nodes[k];
    size_t id = b->backward_id[k], t = n->output;
    size_t first = b->consumer_first[t], end = b->consumer_first[t + 1];
    int rc = start_node(b, id, k, ".backward", true, end - first + n->info.n_saved, err);
    if (rc != CK_OK)
        return rc;
    ck_graph_node *v = &b->g->nodes[id];
    for (size_t c = first; c < end; c++) {
        size_t user = b->consumers[c];
        add_input(v, user == loss_node(b->m) ? user : b->backward_id[user]);
    }
    for (size_t s = 0; s < n->info.n_saved; s++) {
        const ck_saved *sv = &n->info.saved[s];
        add_input(v, sv->kind == CK_SAVE_INPUT ? forward_of(b->m, n->inputs[sv->input]) : k);
    }
    if (!input_grad_bytes(b->m, n, &v->bytes))
        return overflow(b, "input gradients", k, err);
    v->cost = ck_derive_op_time(b->cm, n->info.bwd_flops, n->info.bwd_bytes_moved);
    v->transient_bytes = n->info.bwd_ws_bytes;
    return CK_OK;
}

/* consumer_first and consumers: who reads each tensor, in node order. */
static int index_consumers(builder *b, ck_err *err)
{
    const ck_model *m = b->m;
    b->consumer_first = calloc(m->n_tensors + 1, sizeof *b->consumer_first);
    size_t reads = 0;
    for (size_t k = 0; k < m->n_nodes; k++)
        reads += m->nodes[k].op->arity;
    b->consumers = malloc((reads ? reads : 1) * sizeof *b->consumers);
    size_t *fill = calloc(m->n_tensors + 1, sizeof *fill);
    if (!b->consumer_first || !b->consumers || !fill) {
        free(fill);
        return ck_err_oom(err);
    }
    for (size_t k = 0; k < m->n_nodes; k++)
        for (size_t i = 0; i < m->nodes[k].op->arity; i++)
            if (i == 0 || m->nodes[k].inputs[i] != m->nodes[k].inputs[0])
                b->consumer_first[m->nodes[k].inputs[i] + 1]++;
    for (size_t t = 0; t < m->n_tensors; t++)
        b->consumer_first[t + 1] += b->consumer_first[t];
    for (size_t k = 0; k < m->n_nodes; k++)
        for (size_t i = 0; i < m->nodes[k].op->arity; i++) {
            size_t t = m->nodes[k].inputs[i];
            if (i == 0 || t != m->nodes[k].inputs[0])
                b->consumers[b->consumer_first[t] + fill[t]++] = k;
        }
    free(fill);
    return CK_OK;
}

/* ck_graph_finish wants each node's inputs ascending. */
static void sort_inputs(ck_graph *g)
{
    for (size_t v = 0; v < g->n_nodes; v++)
        qsort(g->nodes[v].inputs, g->nodes[v].n_inputs, sizeof *g->nodes[v].inputs, compare_ids);
}

static int build_nodes(builder *b, ck_err *err)
{
    const ck_model *m = b->m;
    size_t n = loss_node(m) + 1;
    for (size_t k = loss_node(m); k-- > 0;)
        b->backward_id[k] = m->nodes[k].backward ? n++ : NO_ID;
    b->g->nodes = calloc(n, sizeof *b->g->nodes);
    if (!b->g->nodes)
        return ck_err_oom(err);
    b->g->n_nodes = n;
    b->g->loss = loss_node(m);
    int rc = index_consumers(b, err);
    for (size_t k = 0; k < loss_node(m) && rc == CK_OK; k++)
        rc = build_forward(b, k, err);
    if (rc == CK_OK)
        rc = build_loss(b, err);
    for (size_t k = loss_node(m); k-- > 0 && rc == CK_OK;)
        if (b->backward_id[k] != NO_ID)
            rc = build_backward(b, k, err);
    if (rc != CK_OK)
        return rc;
    sort_inputs(b->g);
    return ck_graph_finish(b->g, err);
}

int ck_graph_model_build(const ck_model *m, const ck_cost_model *cm, ck_graph *out, ck_err *err)
{
    memset(out, 0, sizeof *out);
    builder b = {.m = m, .g = out, .cm = cm, .backward_id = malloc(m->n_nodes * sizeof *b.backward_id)};
    out->name = strdup(m->name ? m->name : "");
    int rc = b.backward_id && out->name ? build_nodes(&b, err) : ck_err_oom(err);
    free(b.backward_id);
    free(b.consumer_first);
    free(b.consumers);
    if (rc != CK_OK)
        ck_graph_free(out);
    return rc;
}
