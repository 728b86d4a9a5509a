#include "tests/unit/graph_brute.h"

#include <math.h>
#include <stdlib.h>

#define MAX_NODES 10

/* A search: a state is an integer, `resident` its low n bits; labels only grow along an
 * edge (time adds a cost, peak takes a maximum), so Dijkstra's order finds the least. */
typedef struct {
    const ck_graph *g;
    ck_graph_brute_space space;
    bool by_peak;    /* label: the peak so far, else the time so far */
    uint64_t budget; /* no compute may leave more resident */
    size_t n;
    double *label;
    bool *done;
    struct item {
        double label;
        uint32_t state;
    } *heap;
    size_t heap_n, heap_cap;
    bool oom;
} search;

static void push(search *s, uint32_t state, double label)
{
    if (label >= s->label[state])
        return;
    s->label[state] = label;
    if (s->heap_n == s->heap_cap) {
        size_t cap = s->heap_cap ? 2 * s->heap_cap : 1024;
        struct item *h = realloc(s->heap, cap * sizeof *h);
        if (!h) {
            s->oom = true;
            return;
        }
        s->heap = h;
        s->heap_cap = cap;
    }
    size_t i = s->heap_n++;
    for (; i > 0 && s->heap[(i - 1) / 2].label > label; i = (i - 1) / 2)
        s->heap[i] = s->heap[(i - 1) / 2];
    s->heap[i] = (struct item){label, state};
}

static struct item pop(search *s)
{
    struct item top = s->heap[0], last = s->heap[--s->heap_n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->heap_n)
            break;
        if (c + 1 < s->heap_n && s->heap[c + 1].label < s->heap[c].label)
            c++;
        if (s->heap[c].label >= last.label)
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->heap_n)
        s->heap[i] = last;
    return top;
}

static uint64_t resident_bytes(const search *s, uint32_t resident)
{
    uint64_t sum = 0;
    for (size_t v = 0; v < s->n; v++)
        if (resident >> v & 1)
            sum += s->g->nodes[v].bytes;
    return sum;
}

/* Whether v may be computed on `resident`; if so, pushes `to` with the new label. */
static void compute(search *s, uint32_t resident, size_t v, double label, uint32_t to)
{
    const ck_graph_node *nd = &s->g->nodes[v];
    if (resident >> v & 1)
        return;
    for (size_t p = 0; p < nd->n_inputs; p++)
        if (!(resident >> nd->inputs[p] & 1))
            return;
    uint64_t after = resident_bytes(s, resident | 1u << v) + nd->transient_bytes;
    if (after > s->budget)
        return;
    push(s, to, s->by_peak ? fmax(label, (double)after) : label + nd->cost);
}

/* Every schedule: state = computed << n | resident; done when all are computed. */
static bool expand_all(search *s, uint32_t state, double label)
{
    uint32_t mask = (1u << s->n) - 1, resident = state & mask, computed = state >> s->n;
    if (computed == mask)
        return true;
    for (size_t v = 0; v < s->n; v++) {
        uint32_t bit = 1u << v;
        if (resident & bit)
            push(s, state & ~bit, label);
        else
            compute(s, resident, v, label, ((computed | bit) << s->n) | resident | bit);
    }
    return false;
}

/* Checkmate's class: state = (t * (n + 1) + k) << n | resident; stage t may compute k < t
 * or skip it, and at k = t computes t and moves on to stage t + 1. Done at stage n. */
static bool expand_staged(search *s, uint32_t state, double label)
{
    uint32_t n = (uint32_t)s->n, resident = state & ((1u << n) - 1), pos = state >> n;
    uint32_t t = pos / (n + 1), k = pos % (n + 1);
    if (t == n)
        return true;
    for (size_t v = 0; v < n; v++)
        if (resident >> v & 1)
            push(s, state & ~(1u << v), label);
    uint32_t next = k < t ? pos + 1 : (t + 1) * (n + 1);
    if (k < t)
        push(s, next << n | resident, label);
    compute(s, resident, k, label, next << n | resident | 1u << k);
    return false;
}

static int run(search *s, double *best, ck_err *err)
{
    size_t n = s->g->n_nodes;
    if (n > MAX_NODES)
        return ck_err_fail(err, CK_ERR_INPUT, "graph_brute: %zu nodes, at most %d", n, MAX_NODES);
    s->n = n;
    size_t states = (size_t)1 << (2 * n);
    if (s->space == CK_GRAPH_BRUTE_STAGED)
        states = (n + 1) * (n + 1) << n;
    s->label = malloc(states * sizeof *s->label);
    s->done = calloc(states, sizeof *s->done);
    int rc = s->label && s->done ? CK_ERR_INFEASIBLE : ck_err_oom(err);
    for (size_t i = 0; s->label && i < states; i++)
        s->label[i] = INFINITY;
    if (rc != CK_OK && s->label && s->done)
        push(s, 0, 0);
    while (rc == CK_ERR_INFEASIBLE && s->heap_n && !s->oom) {
        struct item it = pop(s);
        if (s->done[it.state] || it.label > s->label[it.state])
            continue;
        s->done[it.state] = true;
        bool goal = s->space == CK_GRAPH_BRUTE_ALL ? expand_all(s, it.state, it.label)
                                                   : expand_staged(s, it.state, it.label);
        if (goal) {
            *best = it.label;
            rc = CK_OK;
        }
    }
    if (s->oom)
        rc = ck_err_oom(err);
    else if (rc == CK_ERR_INFEASIBLE)
        ck_err_fail(err, rc, "graph_brute: no schedule fits");
    free(s->label);
    free(s->done);
    free(s->heap);
    return rc;
}

int ck_graph_brute_best(const ck_graph *g, ck_graph_brute_space space, uint64_t budget,
                        double *time, ck_err *err)
{
    search s = {.g = g, .space = space, .budget = budget};
    return run(&s, time, err);
}

int ck_graph_brute_min_peak(const ck_graph *g, ck_graph_brute_space space, uint64_t *peak,
                            ck_err *err)
{
    search s = {.g = g, .space = space, .by_peak = true, .budget = UINT64_MAX};
    double best = 0;
    int rc = run(&s, &best, err);
    *peak = (uint64_t)best;
    return rc;
}
