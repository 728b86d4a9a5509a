#include "planner/graph_chain.h"

#include <stdlib.h>
#include <string.h>

#include "planner/action.h"

/* Node ids of the graph of a chain of L stages. */
static size_t backward_id(size_t L, size_t i)
{
    return 2 * L - i;
}

static size_t grad_source(size_t L, size_t i)
{
    return i + 1 == L ? L : backward_id(L, i + 1);
}

static bool has_inputs(const ck_graph_node *v, size_t n, const size_t *ids)
{
    if (v->n_inputs != n)
        return false;
    for (size_t k = 0; k < n; k++)
        if (v->inputs[k] != ids[k])
            return false;
    return true;
}

/* Whether g has the shape and sizes of the graph of a chain of L stages. */
static bool is_chain_graph(const ck_graph *g, size_t L)
{
    const ck_graph_node *n = g->nodes;
    if (L == 0 || g->n_nodes != 2 * L + 1 || g->loss != L || !has_inputs(&n[L], 1, (size_t[]){L - 1}) ||
        n[L].bytes != n[L - 1].bytes)
        return false;
    for (size_t i = 0; i < L; i++) {
        const ck_graph_node *b = &n[backward_id(L, i)];
        size_t inputs[3] = {i - 1, i, grad_source(L, i)};
        bool first = i == 0;
        if (!has_inputs(&n[i], first ? 0 : 1, (size_t[]){i - 1}) ||
            !has_inputs(b, first ? 2 : 3, first ? inputs + 1 : inputs) ||
            b->bytes != (first ? 0 : n[i - 1].bytes))
            return false;
    }
    return true;
}

int ck_graph_chain_of(const ck_graph *g, bool *is_chain, ck_chain *out, ck_err *err)
{
    size_t L = g->n_nodes / 2;
    *is_chain = g->n_nodes % 2 == 1 && is_chain_graph(g, L);
    if (!*is_chain)
        return CK_OK;
    int rc = ck_chain_alloc(out, g->name, L, err);
    if (rc != CK_OK)
        return rc;
    for (size_t i = 0; i < L; i++) {
        const ck_graph_node *f = &g->nodes[i], *b = &g->nodes[backward_id(L, i)];
        out->stages[i] = (ck_stage){.fwd_time = f->cost, .bwd_time = b->cost,
                                    .out_bytes = f->bytes, .saved_bytes = f->bytes,
                                    .fwd_tmp_bytes = f->transient_bytes,
                                    .bwd_tmp_bytes = b->transient_bytes};
    }
    out->loss_bwd_time = g->nodes[L].cost;
    out->loss_bwd_tmp_bytes = g->nodes[L].transient_bytes;
    return CK_OK;
}

/* The node a chain value stands for; L + 1 ... none: x_0, which the graph leaves out. */
static size_t node_of(size_t L, ck_value v)
{
    if (v.kind == CK_VALUE_Y)
        return v.index == L ? L : backward_id(L, v.index);
    return v.index == 0 ? SIZE_MAX : v.index - 1;
}

/* One chain action: the node of its result computed unless already held, then the nodes
 * whose last chain value it frees freed. count[v]: the live chain values node v stands for. */
static bool convert_action(size_t L, const ck_action_effect *e, unsigned *count,
                           ck_graph_schedule *out)
{
    size_t made = node_of(L, e->result);
    bool ok = made == SIZE_MAX || count[made]++ > 0 || ck_graph_schedule_push(out, CK_GRAPH_COMPUTE, made);
    for (size_t f = 0; ok && f < e->n_frees; f++) {
        size_t v = node_of(L, e->frees[f]);
        ok = v == SIZE_MAX || --count[v] > 0 || ck_graph_schedule_push(out, CK_GRAPH_FREE, v);
    }
    return ok;
}

int ck_graph_chain_schedule(const ck_graph *g, const ck_chain *c, const ck_schedule *s,
                            ck_graph_schedule *out, ck_err *err)
{
    ck_action_state st;
    unsigned *count = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *count);
    int rc = count ? ck_action_state_init(&st, c, err) : ck_err_oom(err);
    if (rc != CK_OK) {
        free(count);
        return rc;
    }
    for (size_t k = 0; k < s->n && rc == CK_OK; k++) {
        ck_action_effect e;
        rc = ck_action_describe(&st, k, &s->actions[k], &e, err);
        if (rc == CK_OK) rc = ck_action_apply(&st, k, &s->actions[k], &e, NULL, err);
        if (rc == CK_OK && !convert_action(c->n_stages, &e, count, out))
            rc = ck_err_oom(err);
    }
    ck_action_state_free(&st);
    free(count);
    return rc;
}
