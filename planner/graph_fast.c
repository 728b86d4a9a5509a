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
 *   REMAT       held only while the next target reads it, recomputed at each later use;
 *   REMAT_FREE  the same in the forward; in the backward freed as soon as the target it was
 *               recomputed for no longer reads it, even when the next target does.
 * Backward nodes are always RETAIN. A value nothing reads any more is freed at once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/graph_chain.h"
#include "planner/graph_planners.h"
#include "planner/limits.h"
#include "planner/planner.h"
#include "planner/schedule.h"

enum { RETAIN, REMAT_KEEP, REMAT, REMAT_FREE, N_MODES };

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
    /* Operations of the schedule simulated, and the most written into out: a schedule
     * past the limit is counted to its end but not built (it could take gigabytes). */
    uint64_t ops, max_ops;
    /* An evaluation stops as soon as its outcome is past one of these: its change is
     * refused then whatever the rest of the schedule does. */
    uint64_t stop_peak;
    double stop_time, stop_excess;
    bool stopped;
    /* Work done (node reads and visits simulated) and the most a search may do: the
     * planner's time is bounded whatever the graph, and its result does not depend on the
     * machine. A search's evaluations (bounded) stop as soon as the allowance is spent,
     * inside the simulation, not only between the search's steps: one evaluation of a
     * graph of thousands of nodes can cost more than a whole allowance. */
    uint64_t work, work_limit;
    bool bounded;
    /* The stop flag (a signal), polled after every target: a stop comes within one
     * target's work, and a simulation it cuts short is never taken for a result. */
    const atomic_int *stop;
    bool interrupted;
    size_t frozen; /* a node whose mode the search leaves as it is, or SIZE_MAX */
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
    case REMAT_FREE: return t < loss && nu <= t + 1;
    default: return true;
    }
}

static void sim_compute(sim *s, size_t v)
{
    const ck_graph_node *nd = &s->g->nodes[v];
    if (s->out && ++s->ops <= s->max_ops && !ck_graph_schedule_push(s->out, CK_GRAPH_COMPUTE, v))
        s->oom = true;
    s->resident[v] = true;
    s->work += 1 + nd->n_inputs;
    s->live += nd->bytes;
    s->time += nd->cost;
    uint64_t top = s->live + nd->transient_bytes; /* below 2^53: ck_graph_finish */
    if (top > s->peak)
        s->peak = top;
    if (top > s->budget)
        s->excess += (double)(top - s->budget);
}

static void sim_free(sim *s, size_t v)
{
    if (s->out && ++s->ops <= s->max_ops && !ck_graph_schedule_push(s->out, CK_GRAPH_FREE, v))
        s->oom = true;
    s->resident[v] = false;
    s->live -= s->g->nodes[v].bytes;
}

static int by_id(const void *pa, const void *pb)
{
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    return a < b ? -1 : a > b;
}

/* floor(log2(k)) + 1: the comparisons a sort of k ids costs per id, about. */
static size_t sort_cost(size_t k)
{
    size_t bits = 1;
    while (k >>= 1)
        bits++;
    return bits;
}

/* The missing ancestors of t into s->set, ascending; returns their number. In id order
 * (which is topological) by a scan of the ids from the lowest one up, or by sorting them
 * when they are fewer than the scan would visit, so that the cost stays in proportion to
 * the recomputations (the work counted), however far apart the ids. */
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
            s->set[k++] = x;
            lowest = x < lowest ? x : lowest;
        }
    }
    if (k * sort_cost(k) < t - lowest) {
        qsort(s->set, k, sizeof *s->set, by_id);
        return k;
    }
    k = 0;
    for (size_t x = lowest; x < t; x++)
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

/* Whether the search's work is over: its allowance spent, or a signal came. */
static bool spent(const sim *s)
{
    return s->interrupted || s->work > s->work_limit;
}

/* Whether a simulation must end before its next target: a signal, or for a search's
 * evaluation its allowance spent. */
static bool must_stop(sim *s)
{
    if (s->stop && atomic_load_explicit(s->stop, memory_order_relaxed))
        s->interrupted = true;
    return s->interrupted || (s->bounded && spent(s));
}

/* Simulates the schedule of s->mode; its peak, time and excess are in s (s->stopped:
 * only those of a part, which is already past a stop_ bound, or was cut short by
 * must_stop). */
static void simulate(sim *s)
{
    size_t n = s->g->n_nodes;
    s->stopped = must_stop(s);
    if (s->stopped)
        return;
    memset(s->resident, 0, n * sizeof *s->resident);
    memset(s->cursor, 0, n * sizeof *s->cursor);
    s->live = s->peak = s->ops = 0;
    s->time = s->excess = 0;
    for (size_t t = 0; t < n && !s->stopped; t++) {
        sim_target(s, t);
        s->stopped = s->peak > s->stop_peak || s->time > s->stop_time ||
                     s->excess > s->stop_excess || must_stop(s);
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
    s->frozen = SIZE_MAX;
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

/* An outcome no change is judged better than: what a simulation cut short by a signal
 * says, so that no part of a schedule is ever taken for the whole. */
static const outcome unknown = {UINT64_MAX, INFINITY, INFINITY};

/* The outcome of s->mode, whole: no bound, not even the allowance (a search starts from
 * it, so each search goes past its allowance by at most this one evaluation); a signal
 * alone cuts it short. */
static outcome evaluate_whole(sim *s)
{
    s->stop_peak = UINT64_MAX;
    s->stop_time = s->stop_excess = INFINITY;
    s->bounded = false;
    simulate(s);
    return s->interrupted ? unknown : (outcome){s->peak, s->time, s->excess};
}

/* The outcome of a change, within the stop_ bounds and the search's allowance. */
static outcome evaluate(sim *s)
{
    s->bounded = true;
    simulate(s);
    return (outcome){s->peak, s->time, s->excess};
}

static void set_forward_modes(sim *s, unsigned char m)
{
    for (size_t v = 0; v < s->g->loss; v++)
        s->mode[v] = m;
}

/* What a search is after: down to the budget (the most excess removed per unit of time
 * added, or the least time added that removes some), faster within the budget (the most time saved), or the lowest peak (then the
 * fastest). */
typedef enum { TO_BUDGET, TO_BUDGET_CHEAPLY, FASTER, LOWER_PEAK } goal;

/* How a change with outcome cand is judged against the current outcome: lower is better,
 * INFINITY refuses it. */
static double score(const sim *s, goal gl, outcome now, outcome cand)
{
    switch (gl) {
    case TO_BUDGET:
        if (cand.excess >= now.excess)
            return INFINITY;
        return cand.time <= now.time ? -INFINITY : -(now.excess - cand.excess) / (cand.time - now.time);
    case TO_BUDGET_CHEAPLY:
        return cand.excess >= now.excess ? INFINITY : cand.time - now.time;
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
    s->stop_excess = gl == TO_BUDGET || gl == TO_BUDGET_CHEAPLY ? now.excess : INFINITY;
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
    if (c->m == orig || c->v == s->frozen)
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
    for (size_t i = 0; i < n && !spent(s); i++) {
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
    while ((rc = ck_err_check_stop(stop, err)) == CK_OK && !spent(s)) {
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

/* Work allowed to each search (in node reads simulated, 10 to 25 ns each): the searches
 * for the budget, and the lowest peak's, have one each, so that the lowest peak, and with
 * it the smallest budget reported, does not depend on the budget. */
#define WORK_PER_SEARCH 10000000u
/* The search from the lowest peak starts from modes that recompute much, which are slow to
 * simulate: it has more. */
#define WORK_FROM_LOWEST 20000000u
/* Above this overhead over the baseline's time the budget counts as tight, and the search
 * from the lowest peak is tried as well. */
#define TIGHT_OVERHEAD 0.02
/* Budgets between the lowest peak found and the lower bound that descents aim at to find
 * a lower one. */
#define REFINE_STEPS 8

static int perturb_search(sim *s, bool for_peak, outcome *now, const atomic_int *stop, ck_err *err);

/* The modes of the lowest peak the search finds, from recomputing everything, then
 * perturbed. */
static int lowest_peak_local(sim *s, outcome *now, const atomic_int *stop, ck_err *err)
{
    set_forward_modes(s, REMAT);
    s->work = 0;
    s->work_limit = WORK_PER_SEARCH;
    *now = evaluate_whole(s);
    int rc = local_search(s, LOWER_PEAK, now, stop, err);
    return rc == CK_OK ? perturb_search(s, true, now, stop, err) : rc;
}

/* From modes within the budget, one node held longer (v to mode m, which alone would go
 * over the budget) and the others repaired: down to the budget with v left as it is, then
 * faster. True when that ends faster than *now (then s->mode and *now are its); else
 * s->mode is as it was. keep: n bytes of room for the modes. */
static bool try_repair(sim *s, size_t v, unsigned char m, outcome *now, unsigned char *keep,
                       const atomic_int *stop, ck_err *err)
{
    memcpy(keep, s->mode, s->g->n_nodes);
    s->mode[v] = m;
    outcome o = evaluate_whole(s);
    bool better = false;
    if (o.time < now->time) {
        s->frozen = v;
        int rc = local_search(s, TO_BUDGET_CHEAPLY, &o, stop, err);
        s->frozen = SIZE_MAX;
        if (rc == CK_OK && o.peak <= s->budget)
            rc = local_search(s, FASTER, &o, stop, err);
        better = rc == CK_OK && o.peak <= s->budget && o.time < now->time;
    }
    if (better)
        *now = o;
    else
        memcpy(s->mode, keep, s->g->n_nodes);
    return better;
}

/* Escapes from the local optimum of one-node changes: each change that holds a value longer
 * is tried with the repair of the others, the first that ends faster taken, until none
 * does or the work runs out. */
static int repair_search(sim *s, outcome *now, const atomic_int *stop, ck_err *err)
{
    unsigned char *keep = malloc(s->g->n_nodes);
    if (!keep)
        return ck_err_oom(err);
    bool improved = true;
    int rc = CK_OK;
    while (improved && rc == CK_OK && !spent(s)) {
        improved = false;
        for (size_t v = 0; v < s->g->loss && !improved && !spent(s); v++)
            for (unsigned char m = 0; m < s->mode[v] && !improved; m++) {
                improved = try_repair(s, v, m, now, keep, stop, err);
                rc = ck_err_check_stop(stop, err);
            }
    }
    free(keep);
    return rc;
}

/* How many of the most time-saving changes that go over the budget a swap tries to pair with
 * a change that brings the peak back. */
#define SWAP_TRIES 8

/* The best pair of changes within the budget that ends faster than *now: one of the
 * SWAP_TRIES changes that save the most time (alone over the budget), with the one other
 * change that brings the peak back within it at the least time. True when one was made. */
static bool best_swap(sim *s, outcome *now, change *cs, size_t n)
{
    for (size_t i = 0; i < n; i++) { /* alone: the time saved, whatever the peak */
        cs[i].score = INFINITY;
        unsigned char orig = s->mode[cs[i].v];
        if (cs[i].m == orig || spent(s))
            continue;
        s->mode[cs[i].v] = cs[i].m;
        s->stop_peak = UINT64_MAX;
        s->stop_time = now->time;
        s->stop_excess = INFINITY;
        outcome o = evaluate(s);
        s->mode[cs[i].v] = orig;
        if (!s->stopped && o.time < now->time)
            cs[i].score = o.peak <= s->budget ? INFINITY : o.time - now->time;
    }
    qsort(cs, n, sizeof *cs, by_score);
    outcome best = *now;
    size_t bu = n, bw = n;
    for (size_t i = 0; i < SWAP_TRIES && i < n && cs[i].score < INFINITY; i++) {
        unsigned char orig = s->mode[cs[i].v];
        s->mode[cs[i].v] = cs[i].m;
        for (size_t k = 0; k < n && !spent(s); k++) {
            unsigned char other = s->mode[cs[k].v];
            if (cs[k].v == cs[i].v || cs[k].m == other)
                continue;
            s->mode[cs[k].v] = cs[k].m;
            set_bounds(s, FASTER, best);
            outcome o = evaluate(s);
            s->mode[cs[k].v] = other;
            if (!s->stopped && o.peak <= s->budget && o.time < best.time) {
                best = o;
                bu = i;
                bw = k;
            }
        }
        s->mode[cs[i].v] = orig;
    }
    if (bu == n)
        return false;
    s->mode[cs[bu].v] = cs[bu].m;
    s->mode[cs[bw].v] = cs[bw].m;
    *now = best;
    return true;
}

/* One-node changes, then pairs, until neither saves time or the work runs out. */
static int swap_search(sim *s, outcome *now, const atomic_int *stop, ck_err *err)
{
    size_t n = s->g->loss * N_MODES;
    change *cs = malloc((n ? n : 1) * sizeof *cs);
    if (!cs)
        return ck_err_oom(err);
    for (size_t i = 0; i < n; i++)
        cs[i] = (change){i / N_MODES, (unsigned char)(i % N_MODES), false, INFINITY};
    int rc = CK_OK;
    while (rc == CK_OK && !spent(s) && best_swap(s, now, cs, n))
        rc = local_search(s, FASTER, now, stop, err);
    free(cs);
    return rc;
}

/* Perturbations tried from the best modes, each of up to PERTURB_NODES nodes. */
#define PERTURB_ROUNDS 300
#define PERTURB_NODES 4

/* A fixed sequence of pseudo-random numbers (xorshift64): the plan does not depend on the
 * run. */
static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* One perturbed try from modes `from` (how the budget's search goes on from it): down to the
 * budget and faster, or, for the lowest peak, lower. */
static int perturbed_try(sim *s, bool for_peak, outcome *o, const atomic_int *stop, ck_err *err)
{
    *o = evaluate_whole(s);
    if (for_peak)
        return local_search(s, LOWER_PEAK, o, stop, err);
    int rc = local_search(s, TO_BUDGET, o, stop, err);
    if (rc == CK_OK && o->peak <= s->budget)
        rc = local_search(s, FASTER, o, stop, err);
    return rc;
}

/* Whether outcome o of a perturbed try beats *now: faster within the budget, or for the
 * lowest peak lower (then faster). */
static bool perturbed_better(const sim *s, bool for_peak, outcome o, outcome now)
{
    if (for_peak)
        return o.peak < now.peak || (o.peak == now.peak && o.time < now.time);
    return o.peak <= s->budget && o.time < now.time;
}

/* Iterated local search: a few nodes of the best modes set at random, then searched again;
 * kept when better. */
static int perturb_search(sim *s, bool for_peak, outcome *now, const atomic_int *stop, ck_err *err)
{
    size_t n = s->g->n_nodes, nf = s->g->loss;
    unsigned char *best = malloc(n);
    if (!best)
        return ck_err_oom(err);
    memcpy(best, s->mode, n);
    uint64_t state = 0x9e3779b97f4a7c15u;
    int rc = CK_OK;
    for (int r = 0; r < PERTURB_ROUNDS && nf && rc == CK_OK && !spent(s); r++) {
        memcpy(s->mode, best, n);
        for (uint64_t k = 1 + next_random(&state) % PERTURB_NODES; k > 0; k--)
            s->mode[next_random(&state) % nf] = (unsigned char)(next_random(&state) % N_MODES);
        outcome o;
        rc = perturbed_try(s, for_peak, &o, stop, err);
        if (rc == CK_OK && perturbed_better(s, for_peak, o, *now)) {
            *now = o;
            memcpy(best, s->mode, n);
        }
    }
    memcpy(s->mode, best, n);
    free(best);
    return rc;
}

/* The fastest modes within s->budget that the search finds from `start` (n modes): down
 * to the budget, then faster within it, then by repairs. *found false when it stays
 * above. */
static int search_from(sim *s, const unsigned char *start, goal down, outcome *now, bool *found,
                       const atomic_int *stop, ck_err *err)
{
    memcpy(s->mode, start, s->g->n_nodes);
    *now = evaluate_whole(s);
    int rc = local_search(s, down, now, stop, err);
    *found = rc == CK_OK && now->peak <= s->budget;
    if (*found)
        rc = local_search(s, FASTER, now, stop, err);
    if (*found && rc == CK_OK)
        rc = swap_search(s, now, stop, err);
    if (*found && rc == CK_OK)
        rc = repair_search(s, now, stop, err);
    if (*found && rc == CK_OK)
        rc = perturb_search(s, false, now, stop, err);
    return rc;
}

/* The lowest peak: the local search's, then lowered while a descent to a byte below it
 * succeeds (from storing everything, or from the lowest modes so far). It does not depend
 * on the budget asked for: the planner's smallest budget is this peak, and every budget
 * from it on is met (by the search from these modes). */
static int lowest_peak(sim *s, outcome *low, const atomic_int *stop, ck_err *err)
{
    size_t n = s->g->n_nodes;
    uint64_t budget = s->budget;
    unsigned char *modes = malloc(2 * n);
    if (!modes)
        return ck_err_oom(err);
    unsigned char *start = modes + n;
    int rc = lowest_peak_local(s, low, stop, err);
    memcpy(modes, s->mode, n);
    uint64_t floor = ck_graph_least_peak(s->g, NULL);
    s->work = 0; /* the descents have an allowance of their own */
    for (bool lower = true; lower && rc == CK_OK && low->peak > floor && !spent(s);) {
        lower = false; /* descents aimed a byte below, and at REFINE_STEPS budgets down to the floor */
        for (int k = 0; k <= REFINE_STEPS && !lower && rc == CK_OK && !spent(s); k++)
            for (int from = 0; from < 2 && !lower && rc == CK_OK; from++) {
                s->budget = low->peak - 1 - (low->peak - 1 - floor) / REFINE_STEPS * (uint64_t)k;
                if (from == 0)
                    memset(start, RETAIN, n);
                else
                    memcpy(start, modes, n);
                memcpy(s->mode, start, n);
                outcome o = evaluate_whole(s);
                rc = local_search(s, TO_BUDGET, &o, stop, err);
                lower = rc == CK_OK && o.peak < low->peak;
                if (lower) {
                    *low = o;
                    memcpy(modes, s->mode, n);
                }
            }
    }
    s->budget = budget;
    memcpy(s->mode, modes, n);
    free(modes);
    return rc;
}


/* The search from the lowest peak, when it fits: into best when faster than *best_time. */
static int search_from_lowest(sim *s, unsigned char *best, double *best_time, uint64_t *min_budget,
                              const atomic_int *stop, ck_err *err)
{
    size_t n = s->g->n_nodes;
    unsigned char *start = malloc(n);
    if (!start)
        return ck_err_oom(err);
    outcome low = {0, 0, 0}, b;
    bool fits = false;
    int rc = lowest_peak(s, &low, stop, err);
    *min_budget = low.peak;
    memcpy(start, s->mode, n);
    s->work = 0;
    s->work_limit = WORK_FROM_LOWEST;
    if (rc == CK_OK && low.peak <= s->budget)
        rc = search_from(s, start, TO_BUDGET, &b, &fits, stop, err);
    if (fits && b.time < *best_time) {
        memcpy(best, s->mode, n);
        *best_time = b.time;
    }
    free(start);
    return rc;
}

/* The fastest modes found within the budget, into best (n modes); *best_time INFINITY
 * when none fits, with *min_budget the lowest peak found. First from storing everything,
 * down by either measure; when that fails or costs more than TIGHT_OVERHEAD, from the
 * lowest peak as well. */
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
    static const goal downs[] = {TO_BUDGET};
    int rc = CK_OK;
    unsigned char *start = malloc(n);
    if (!start)
        return ck_err_oom(err);
    memset(start, RETAIN, n);
    for (size_t i = 0; i < sizeof downs / sizeof downs[0] && rc == CK_OK; i++) {
        bool fits = false;
        s->work = 0;
        s->work_limit = WORK_PER_SEARCH;
        if (ck_graph_least_peak(s->g, NULL) <= s->budget)
            rc = search_from(s, start, downs[i], &a, &fits, stop, err);
        if (fits && a.time < *best_time) {
            memcpy(best, s->mode, n);
            *best_time = a.time;
        }
    }
    free(start);
    if (rc == CK_OK && *best_time > all.time * (1 + TIGHT_OVERHEAD))
        rc = search_from_lowest(s, best, best_time, min_budget, stop, err);
    return rc;
}

/* dp's schedule of c, the chain g is the graph of, as a graph schedule into *out when it fits
 * the budget and takes less than *time (then updated). */
static int dp_candidate(const ck_graph *g, const ck_chain *c, const ck_schedule *s,
                        uint64_t budget, double *time, ck_graph_schedule *out, ck_err *err)
{
    ck_graph_schedule gs = {0};
    ck_graph_replay r;
    int rc = ck_graph_chain_schedule(g, c, s, &gs, err);
    if (rc == CK_OK) rc = ck_graph_replay_schedule(g, &gs, &r, err);
    if (rc == CK_OK && r.peak_bytes <= budget && r.time < *time) {
        ck_graph_schedule_free(out);
        *out = gs;
        *time = r.time;
        return CK_OK;
    }
    ck_graph_schedule_free(&gs);
    return rc;
}

/* On the graph of a chain, dp's answer where it beats the search's (rc its status), so that
 * fast is never worse than the chain planners there; dp's smallest budget where lower. */
static int chain_dp(const ck_graph *g, uint64_t budget, const atomic_int *stop, int rc,
                    ck_graph_plan_result *result, uint64_t *min_budget, ck_err *err)
{
    bool is_chain = false;
    ck_chain c;
    if (rc != CK_OK && rc != CK_ERR_INFEASIBLE)
        return rc;
    int crc = ck_graph_chain_of(g, &is_chain, &c, err);
    if (crc != CK_OK || !is_chain)
        return crc != CK_OK ? crc : rc;
    ck_graph_replay mine;
    double time = INFINITY;
    if (rc == CK_OK && ck_graph_replay_schedule(g, &result->schedule, &mine, err) == CK_OK)
        time = mine.time;
    ck_planner_opts po = {.slots = CK_DEFAULT_SLOTS, .stop = stop};
    ck_plan_result pr;
    ck_replay replay;
    uint64_t dp_min = 0;
    ck_err why;
    int drc = ck_planner_run(&c, &ck_planner_dp, budget, &po, &pr, &replay, &dp_min, &why);
    if (drc == CK_OK && dp_candidate(g, &c, &pr.schedule, budget, &time, &result->schedule, err) != CK_OK)
        drc = CK_ERR_RUNTIME;
    if (drc == CK_OK && isfinite(time))
        rc = CK_OK;
    if (drc == CK_ERR_INFEASIBLE && dp_min && (!*min_budget || dp_min < *min_budget))
        *min_budget = dp_min;
    if (drc == CK_INTERRUPTED || drc == CK_ERR_RUNTIME)
        rc = drc == CK_INTERRUPTED ? ck_err_fail(err, drc, "%s", why.msg) : drc;
    ck_planner_result_free(&pr);
    ck_chain_free(&c);
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
    s.stop = opts ? opts->stop : NULL;
    double best_time = INFINITY;
    int rc = search(&s, best, &best_time, min_budget, s.stop, err);
    if (rc == CK_OK) /* a signal may have cut an evaluation short after the last poll */
        rc = ck_err_check_stop(s.stop, err);
    if (rc == CK_OK && best_time == INFINITY)
        rc = CK_ERR_INFEASIBLE;
    if (rc == CK_OK) {
        memcpy(s.mode, best, g->n_nodes);
        s.out = &result->schedule;
        s.max_ops = ck_limits_get(CK_LIMIT_SCHEDULE_OPS, CK_SCHEDULE_MAX_OPS);
        evaluate_whole(&s);
        rc = s.oom ? ck_err_oom(err) : ck_err_check_stop(s.stop, err);
        if (rc == CK_OK)
            rc = ck_schedule_check_length("planner fast: the plan's schedule", s.ops, err);
    }
    sim_free_all(&s);
    free(best);
    return chain_dp(g, budget, opts ? opts->stop : NULL, rc, result, min_budget, err);
}

const ck_graph_planner ck_graph_planner_fast = {
    "fast", "each value held, recomputed once or at each use: local search (default)",
    plan_fast, true};
