#include "tests/unit/graphgen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sets node v: its name, kind, random bytes and cost, and inputs (sorted here). */
static int set_node(ck_graph *g, size_t v, const char *name, bool backward, size_t *inputs,
                    size_t n_inputs, uint64_t max_bytes, ck_rng *rng, ck_err *err)
{
    ck_graph_node *nd = &g->nodes[v];
    nd->name = malloc(strlen(name) + 1);
    nd->inputs = malloc((n_inputs ? n_inputs : 1) * sizeof *nd->inputs);
    if (!nd->name || !nd->inputs)
        return ck_err_oom(err);
    strcpy(nd->name, name);
    for (size_t a = 0; a < n_inputs; a++)
        for (size_t b = a + 1; b < n_inputs; b++)
            if (inputs[b] < inputs[a]) {
                size_t x = inputs[a];
                inputs[a] = inputs[b];
                inputs[b] = x;
            }
    memcpy(nd->inputs, inputs, n_inputs * sizeof *inputs);
    nd->n_inputs = n_inputs;
    nd->backward = backward;
    nd->bytes = 1 + ck_rng_below(rng, max_bytes);
    nd->cost = (double)(1 + ck_rng_below(rng, 9));
    return CK_OK;
}

/* The inputs of gradient node b(i) (id 2F - i): the gradients of f(i)'s users (the loss
 * for f(F-1)), f(i)'s inputs, and sometimes f(i). */
static size_t gradient_inputs(const ck_graph *g, size_t F, size_t i, ck_rng *rng, size_t *in)
{
    size_t n = 0;
    for (size_t j = i + 1; j < F; j++)
        for (size_t p = 0; p < g->nodes[j].n_inputs; p++)
            if (g->nodes[j].inputs[p] == i)
                in[n++] = 2 * F - j;
    if (i == F - 1)
        in[n++] = F;
    for (size_t p = 0; p < g->nodes[i].n_inputs; p++)
        in[n++] = g->nodes[i].inputs[p];
    if (ck_rng_below(rng, 2))
        in[n++] = i;
    return n;
}

int ck_graphgen_random(ck_graph *g, size_t F, uint64_t max_bytes, ck_rng *rng, ck_err *err)
{
    memset(g, 0, sizeof *g);
    size_t n = 2 * F, in[64], n_in;
    char name[32];
    g->nodes = calloc(n, sizeof *g->nodes);
    g->name = malloc(1);
    if (!g->nodes || !g->name || F < 2 || F > 16) {
        int rc = g->nodes && g->name ? ck_err_fail(err, CK_ERR_INPUT, "graphgen: 2 <= F <= 16")
                                     : ck_err_oom(err);
        ck_graph_free(g);
        return rc;
    }
    g->name[0] = '\0';
    g->n_nodes = n;
    int rc = CK_OK;
    for (size_t i = 0; rc == CK_OK && i < F; i++) {
        n_in = 0;
        for (size_t j = 0; i > 0 && j + 1 < i; j++)
            if (ck_rng_below(rng, 3) == 0)
                in[n_in++] = j;
        if (i > 0)
            in[n_in++] = i - 1;
        snprintf(name, sizeof name, "f%zu", i);
        rc = set_node(g, i, name, false, in, n_in, max_bytes, rng, err);
    }
    in[0] = F - 1;
    if (rc == CK_OK)
        rc = set_node(g, F, "loss", true, in, 1, max_bytes, rng, err);
    for (size_t i = F - 1; rc == CK_OK && i >= 1; i--) {
        n_in = gradient_inputs(g, F, i, rng, in);
        snprintf(name, sizeof name, "b%zu", i);
        rc = set_node(g, 2 * F - i, name, true, in, n_in, max_bytes, rng, err);
    }
    if (rc == CK_OK)
        rc = ck_graph_finish(g, err);
    if (rc != CK_OK)
        ck_graph_free(g);
    return rc;
}
