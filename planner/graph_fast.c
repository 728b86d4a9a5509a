/* fast: the default graph planner. It chooses, for each forward node, how long its output
 * is held, simulates the schedule that choice implies and searches the choices, keeping
 * the fastest schedule that fits (docs/planners.md, "Graphs").
 *
 * The schedule of a choice: nodes are targets in id order (the forward, the loss, the
 * backward). Before a target is computed, its missing inputs are recomputed from the
 * resident ancestors, in id order, each recomputed value freed as soon as the rest of that
 * recomputation and the target no longer read it (unless its mode holds it). After a
 * target, each value it read is held or freed by its mode:
 *   RETAIN      held from its computation to its last use (a checkpoint, or stored);
 *   REMAT_KEEP  freed after its last forward use; recomputed in the backward, then held
 *               to its last use (the segment of a checkpoint, recomputed once);
 *   REMAT       held only while the next target reads it, recomputed at each later use.
 * Backward nodes are always RETAIN. A value nothing reads any more is freed at once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/graph_planners.h"

enum { RETAIN, REMAT_KEEP, REMAT, N_MODES };

typedef struct {
    const ck_graph *g;
    uint64_t budget;
    unsigned char *mode;
    bool *resident;
    size_t *cursor; /* per node: index in users[] of its first user after the current target */
    uint32_t *rem;  /* per node: reads left within the current recomputation and target */
    uint32_t *mark, stamp;
    size_t *stack, *set;
    ck_graph_schedule *out; /* the schedule written, or NULL when only evaluating */
    /* An evaluation stops as soon as its outcome is past one of these: its change is
     * refused then whatever the rest of the schedule does. */
    uint64_t stop_peak;
    double stop_time, stop_excess;
    bool stopped;
    /* Work done (node reads simulated) and the most a search may do: the planner's time
     * is bounded whatever the graph, and its result does not depend on the machine. */
    uint64_t work, work_limit;
    bool oom;
    uint64_t live, peak;
    double time, excess; /* excess: bytes over budget summed over computes (the search's slope) */
} sim;

static size_t next_use(sim *s, size_t x, size_t t)
{
    const ck_graph_node *nd = &s->g->nodes[x];
    while (s->cursor[x] < nd->n_users && nd->users[s->cursor[x]] <= t)
        s->cursor[x]++;
    return s->cursor[x] < nd->n_users ? nd->users[s->cursor[x]] : SIZE_MAX;
}

/* Whether x stays resident once target t is done (reads by t and its recomputation over). */
static bool held_after(sim *s, size_t x, size_t t)
{
    size_t nu = next_use(s, x, t), loss = s->g->loss;
    if (nu == SIZE_MAX)
        return false;
    switch (s->mode[x]) {
    case REMAT_KEEP: return t >= loss || nu < loss;
    case REMAT: return nu <= t + 1;
    default: return true;
    }
}

static void sim_compute(sim *s, size_t v)
{
    const ck_graph_node *nd = &s->g->nodes[v];
    if (s->out && !ck_graph_schedule_push(s->out, CK_GRAPH_COMPUTE, v))
        s->oom = true;
    s->resident[v] = true;
    s->work += 1 + nd->n_inputs;
    s->live += nd->bytes;
    s->time += nd->cost;
    if (s->live > s->peak)
        s->peak = s->live;
    if (s->live > s->budget)
        s->excess += (double)(s->live - s->budget);
}

static void sim_free(sim *s, size_t v)
{
    if (s->out && !ck_graph_schedule_push(s->out, CK_GRAPH_FREE, v))
        s->oom = true;
    s->resident[v] = false;
    s->live -= s->g->nodes[v].bytes;
}

/* The missing ancestors of t into s->set, ascending; returns their number. */
static size_t missing_ancestors(sim *s, size_t t)
{
    size_t depth = 0, k = 0, lowest = t;
    if (++s->stamp == 0) { /* wrapped: no mark may look current */
        memset(s->mark, 0, s->g->n_nodes * sizeof *s->mark);
        s->stamp = 1;
    }
    s->stack[depth++] = t;
    while (depth) {
        const ck_graph_node *nd = &s->g->nodes[s->stack[--depth]];
        for (size_t j = 0; j < nd->n_inputs; j++) {
            size_t x = nd->inputs[j];
            if (s->resident[x] || s->mark[x] == s->stamp)
                continue;
            s->mark[x] = s->stamp;
            s->stack[depth++] = x;
            lowest = x < lowest ? x : lowest;
        }
    }
    for (size_t x = lowest; x < t; x++) /* in id order, which is topological */
        if (s->mark[x] == s->stamp)
            s->set[k++] = x;
    return k;
}

/* Computes y (a recomputed ancestor, or the target t itself) and lets go of the inputs
 * that nothing left of target t reads and whose mode does not hold. */
static void compute_and_release(sim *s, size_t y, size_t t)
{
    sim_compute(s, y);
    const ck_graph_node *nd = &s->g->nodes[y];
    for (size_t j = 0; j < nd->n_inputs; j++) {
        size_t x = nd->inputs[j];
        if (--s->rem[x] == 0 && s->resident[x] && !held_after(s, x, t))
            sim_free(s, x);
    }
}

static void sim_target(sim *s, size_t t)
{
    size_t k = missing_ancestors(s, t);
    for (size_t i = 0; i <= k; i++) {
        const ck_graph_node *nd = &s->g->nodes[i < k ? s->set[i] : t];
        for (size_t j = 0; j < nd->n_inputs; j++)
            s->rem[nd->inputs[j]]++;
    }
    for (size_t i = 0; i < k; i++)
        compute_and_release(s, s->set[i], t);
    compute_and_release(s, t, t);
    if (!held_after(s, t, t))
        sim_free(s, t);
}

/* Simulates the schedule of s->mode; its peak, time and excess are in s (s->stopped:
 * only those of a part, which is already past a stop_ bound). */
static void simulate(sim *s)
{
    size_t n = s->g->n_nodes;
    memset(s->resident, 0, n * sizeof *s->resident);
    memset(s->cursor, 0, n * sizeof *s->cursor);
    s->live = s->peak = 0;
    s->time = s->excess = 0;
    s->stopped = false;
    for (size_t t = 0; t < n && !s->stopped; t++) {
        sim_target(s, t);
        s->stopped = s->peak > s->stop_peak || s->time > s->stop_time || s->excess > s->stop_excess;
    }
}

static void sim_free_all(sim *s)
{
    free(s->mode);
    free(s->resident);
    free(s->cursor);
    free(s->rem);
    free(s->mark);
    free(s->stack);
    free(s->set);
}

static bool sim_init(sim *s, const ck_graph *g)
{
    size_t n = g->n_nodes;
    memset(s, 0, sizeof *s);
    s->g = g;
    s->mode = calloc(n, sizeof *s->mode);
    s->resident = calloc(n, sizeof *s->resident);
    s->cursor = calloc(n, sizeof *s->cursor);
    s->rem = calloc(n, sizeof *s->rem);
    s->mark = calloc(n, sizeof *s->mark);
    s->stack = calloc(n + 1, sizeof *s->stack);
    s->set = calloc(n, sizeof *s->set);
    if (s->mode && s->resident && s->cursor && s->rem && s->mark && s->stack && s->set)
        return true;
    sim_free_all(s);
    return false;
}

/* ---- the search ---- */

typedef struct {
    uint64_t peak;
    double time, excess;
} outcome;

/* The outcome of s->mode, whole: no bound. */
static outcome evaluate_whole(sim *s)
{
    s->stop_peak = UINT64_MAX;
    s->stop_time = s->stop_excess = INFINITY;
    simulate(s);
    return (outcome){s->peak, s->time, s->excess};
}

static outcome evaluate(sim *s)
{
    simulate(s);
    return (outcome){s->peak, s->time, s->excess};
}

static void set_forward_modes(sim *s, unsigned char m)
{
    for (size_t v = 0; v < s->g->loss; v++)
        s->mode[v] = m;
}

/* What a search is after: down to the budget (the most excess removed per unit of time
 * added), faster within the budget (the most time saved), or the lowest peak (then the
 * fastest). */
typedef enum { TO_BUDGET, FASTER, LOWER_PEAK } goal;

/* How a change with outcome cand is judged against the current outcome: lower is better,
 * INFINITY refuses it. */
static double score(const sim *s, goal gl, outcome now, outcome cand)
{
    switch (gl) {
    case TO_BUDGET:
        if (cand.excess >= now.excess)
            return INFINITY;
        return cand.time <= now.time ? -INFINITY : -(now.excess - cand.excess) / (cand.time - now.time);
    case FASTER:
        return cand.peak <= s->budget && cand.time < now.time ? cand.time - now.time : INFINITY;
    default:
        if (cand.peak > now.peak || (cand.peak == now.peak && cand.time >= now.time))
            return INFINITY;
        return ((double)cand.peak - (double)now.peak) + 0.5 * (cand.time - now.time) / (now.time + 1);
    }
}

/* The bounds past which score() refuses a change whatever the rest of its schedule does. */
static void set_bounds(sim *s, goal gl, outcome now)
{
    s->stop_peak = gl == FASTER ? s->budget : gl == LOWER_PEAK ? now.peak : UINT64_MAX;
    s->stop_time = gl == FASTER ? now.time : INFINITY;
    s->stop_excess = gl == TO_BUDGET ? now.excess : INFINITY;
}

/* A one-node change: node v to mode m, with the score it had when last judged. */
typedef struct {
    size_t v;
    unsigned char m;
    bool fresh; /* judged against the current modes */
    double score;
} change;

static int by_score(const void *pa, const void *pb)
{
    const change *a = pa, *b = pb;
    if (a->fresh != b->fresh && a->score == b->score)
        return a->fresh ? -1 : 1;
    return a->score < b->score ? -1 : a->score > b->score;
}

/* Judges c against the current modes and outcome `now`. */
static void judge_change(sim *s, goal gl, outcome now, change *c, outcome *o)
{
    unsigned char orig = s->mode[c->v];
    c->fresh = true;
    c->score = INFINITY;
    if (c->m == orig)
        return;
    s->mode[c->v] = c->m;
    *o = evaluate(s);
    s->mode[c->v] = orig;
    if (!s->stopped)
        c->score = score(s, gl, now, *o);
}

/* The best change by lazy evaluation: changes are judged in the order of their last
 * scores, and the first whose fresh score is no worse than the next one's last score is
 * taken (scores seldom improve as other changes are made). When it finds none, every
 * change is judged afresh before giving up. Returns the index of the change in cs, or
 * n when none is accepted. */
static size_t best_change(sim *s, goal gl, outcome now, change *cs, size_t n, outcome *best_o)
{
    for (size_t i = 0; i < n; i++)
        cs[i].fresh = false;
    qsort(cs, n, sizeof *cs, by_score);
    size_t best = n;
    for (size_t i = 0; i < n; i++) {
        if (best < n && cs[best].score <= cs[i].score)
            break;
        outcome o;
        judge_change(s, gl, now, &cs[i], &o);
        if (cs[i].score < INFINITY && (best == n || cs[i].score < cs[best].score)) {
            best = i;
            *best_o = o;
        }
    }
    return best;
}

/* Applies the best one-node change by `j` until none is accepted; *now is the outcome of
 * s->mode throughout. */
static int local_search(sim *s, goal gl, outcome *now, const atomic_int *stop, ck_err *err)
{
    size_t n = s->g->loss * N_MODES;
    change *cs = malloc((n ? n : 1) * sizeof *cs);
    if (!cs)
        return ck_err_oom(err);
    for (size_t i = 0; i < n; i++)
        cs[i] = (change){i / N_MODES, (unsigned char)(i % N_MODES), false, -INFINITY};
    int rc;
    while ((rc = ck_err_check_stop(stop, err)) == CK_OK && s->work <= s->work_limit) {
        outcome o;
        set_bounds(s, gl, *now);
        size_t k = best_change(s, gl, *now, cs, n, &o);
        if (k == n)
            break;
        s->mode[cs[k].v] = cs[k].m;
        *now = o; /* not stopped: it was scored */
        for (size_t i = 0; i < n; i++) /* the changed node's other changes: judged first */
            if (cs[i].v == cs[k].v)
                cs[i].score = -INFINITY;
    }
    free(cs);
    return rc;
}

/* Work allowed to each of the three searches (in node reads simulated, about 10 ns each): the lowest peak's
 * and the search for the budget's have one each, so that the lowest peak, and with it the
 * smallest budget reported, does not depend on the budget. */
#define WORK_PER_SEARCH 25000000u
/* Above this overhead over the baseline's time the budget counts as tight, and the search
 * from the lowest peak is tried as well. */
#define TIGHT_OVERHEAD 0.02

/* The modes of the lowest peak the search finds, from recomputing everything. */
static int lowest_peak(sim *s, outcome *now, const atomic_int *stop, ck_err *err)
{
    set_forward_modes(s, REMAT);
    s->work = 0;
    s->work_limit = WORK_PER_SEARCH;
    *now = evaluate_whole(s);
    return local_search(s, LOWER_PEAK, now, stop, err);
}

/* The fastest modes within s->budget that the search finds from `start` (n modes): down
 * to the budget, then faster within it. *found false when it stays above. */
static int search_from(sim *s, const unsigned char *start, outcome *now, bool *found,
                       const atomic_int *stop, ck_err *err)
{
    memcpy(s->mode, start, s->g->n_nodes);
    *now = evaluate_whole(s);
    int rc = local_search(s, TO_BUDGET, now, stop, err);
    *found = rc == CK_OK && now->peak <= s->budget;
    if (*found)
        rc = local_search(s, FASTER, now, stop, err);
    return rc;
}

/* No schedule holds less than a node with its inputs while it is computed. */
static uint64_t lower_bound(const ck_graph *g)
{
    uint64_t most = 0;
    for (size_t v = 0; v < g->n_nodes; v++) {
        uint64_t sum = g->nodes[v].bytes; /* below 2^53 in all: ck_graph_finish */
        for (size_t j = 0; j < g->nodes[v].n_inputs; j++)
            sum += g->nodes[g->nodes[v].inputs[j]].bytes;
        most = sum > most ? sum : most;
    }
    return most;
}

/* The search from the lowest peak, when it fits: into best when faster than *best_time. */
static int search_from_lowest(sim *s, unsigned char *best, double *best_time, uint64_t *min_budget,
                              const atomic_int *stop, ck_err *err)
{
    size_t n = s->g->n_nodes;
    unsigned char *start = malloc(n);
    if (!start)
        return ck_err_oom(err);
    outcome low, b;
    bool fits = false;
    int rc = lowest_peak(s, &low, stop, err);
    *min_budget = low.peak;
    memcpy(start, s->mode, n);
    s->work = 0;
    if (rc == CK_OK && low.peak <= s->budget)
        rc = search_from(s, start, &b, &fits, stop, err);
    if (fits && b.time < *best_time) {
        memcpy(best, s->mode, n);
        *best_time = b.time;
    }
    free(start);
    return rc;
}

/* The fastest modes found within the budget, into best (n modes); *best_time INFINITY
 * when none fits, with *min_budget the lowest peak found. First from storing everything;
 * when that fails or costs more than TIGHT_OVERHEAD, from the lowest peak as well. */
static int search(sim *s, unsigned char *best, double *best_time, uint64_t *min_budget,
                  const atomic_int *stop, ck_err *err)
{
    size_t n = s->g->n_nodes;
    memset(best, RETAIN, n);
    outcome all = evaluate_whole(s), a;
    *best_time = INFINITY;
    if (all.peak <= s->budget) {
        *best_time = all.time;
        return CK_OK;
    }
    bool fits = false;
    int rc = CK_OK;
    s->work = 0;
    s->work_limit = WORK_PER_SEARCH;
    if (lower_bound(s->g) <= s->budget)
        rc = search_from(s, best, &a, &fits, stop, err);
    if (fits) {
        memcpy(best, s->mode, n);
        *best_time = a.time;
    }
    if (rc == CK_OK && (!fits || a.time > all.time * (1 + TIGHT_OVERHEAD)))
        rc = search_from_lowest(s, best, best_time, min_budget, stop, err);
    return rc;
}

static int plan_fast(const ck_graph *g, uint64_t budget, const ck_graph_planner_opts *opts,
                     ck_graph_plan_result *result, uint64_t *min_budget, ck_err *err)
{
    sim s;
    unsigned char *best = calloc(g->n_nodes ? g->n_nodes : 1, 1);
    if (!best || !sim_init(&s, g)) {
        free(best);
        return ck_err_oom(err);
    }
    s.budget = budget;
    double best_time = INFINITY;
    int rc = search(&s, best, &best_time, min_budget, opts ? opts->stop : NULL, err);
    if (rc == CK_OK && best_time == INFINITY)
        rc = CK_ERR_INFEASIBLE;
    if (rc == CK_OK) {
        memcpy(s.mode, best, g->n_nodes);
        s.out = &result->schedule;
        evaluate_whole(&s);
        if (s.oom)
            rc = ck_err_oom(err);
    }
    sim_free_all(&s);
    free(best);
    return rc;
}

const ck_graph_planner ck_graph_planner_fast = {
    "fast", "hold, recompute once or recompute at each use, chosen node by node by local "
            "search (default)", plan_fast};
