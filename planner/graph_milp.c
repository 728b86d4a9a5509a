#include "planner/graph_milp.h"

#include <coin/Cbc_C_Interface.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* CBC stops when its best schedule is within this fraction of its bound. */
#define RELATIVE_GAP 1e-6
/* Memory is counted in units of budget / MEMORY_STEPS bytes (at least one byte): no
 * coefficient is much above MEMORY_STEPS. Every peak is a multiple of G, the greatest common
 * divisor of the nodes' bytes (128 or more on Checkmate's graphs), so U's bound is the
 * budget rounded down to a multiple of G, plus G / 2: schedules that fit stay inside it,
 * and those that do not outside, by G / 2 bytes, well beyond CBC's tolerances (measured
 * here: it took 1.1e-6 of a unit over a bound as feasible; at a 30 GB budget a unit is
 * 3.7 MB, so that is 4 bytes, and G / 2 is 64 bytes or more). The replay decides in the end. Finer units (budget / 65536) made Clp abort on an
 * assertion (ClpNonLinearCost.cpp:1064, lowerValue <= upperValue) on SegNet at 0.9x. */
#define MEMORY_STEPS 8192.0

/* The variables of stage t (0 <= t < n) and where they are among CBC's columns:
 *   R[t][i], i <= t: node i is computed in stage t (R[t][t] = 1);
 *   S[t][i], i < t: node i is resident when stage t starts;
 *   U[t][k], k <= t: bytes resident right after stage t's turn to compute k;
 *   FREE[t][k][p], k <= t, p <= n_inputs(k): the p-th input of k (p = n_inputs: k itself)
 *   is freed right after k is computed in stage t. */
typedef struct {
    size_t n, n_r, n_s, n_u, n_free, n_cols;
    size_t off_s, off_u, off_free; /* the first column of each block (R's is 0) */
    size_t *cum;   /* cum[k]: FREE variables of nodes below k in a stage, n + 1 entries */
    size_t *start; /* start[t]: FREE variables of the stages below t */
} layout;

static size_t col_r(const layout *L, size_t t, size_t i)
{
    (void)L;
    return t * (t + 1) / 2 + i;
}

static size_t col_s(const layout *L, size_t t, size_t i)
{
    return L->off_s + t * (t - 1) / 2 + i;
}

static size_t col_u(const layout *L, size_t t, size_t k)
{
    return L->off_u + t * (t + 1) / 2 + k;
}

static size_t col_free(const layout *L, size_t t, size_t k, size_t p)
{
    return L->off_free + L->start[t] + L->cum[k] + p;
}

/* The p-th node k may free after it is computed: its inputs, then itself. */
static size_t freeable(const ck_graph *g, size_t k, size_t p)
{
    return p < g->nodes[k].n_inputs ? g->nodes[k].inputs[p] : k;
}

static int layout_make(const ck_graph *g, layout *L, ck_err *err)
{
    size_t n = g->n_nodes;
    *L = (layout){.n = n, .n_r = n * (n + 1) / 2, .n_s = n * (n - 1) / 2, .n_u = n * (n + 1) / 2};
    L->cum = malloc((n + 1) * sizeof *L->cum);
    L->start = malloc((n + 1) * sizeof *L->start);
    if (!L->cum || !L->start)
        return ck_err_oom(err);
    L->cum[0] = L->start[0] = 0;
    for (size_t k = 0; k < n; k++) {
        L->cum[k + 1] = L->cum[k] + g->nodes[k].n_inputs + 1;
        L->start[k + 1] = L->start[k] + L->cum[k + 1];
    }
    L->n_free = L->start[n];
    L->off_s = L->n_r;
    L->off_u = L->off_s + L->n_s;
    L->off_free = L->off_u + L->n_u;
    L->n_cols = L->off_free + L->n_free;
    if (L->n_cols > INT_MAX / 4)
        return ck_err_fail(err, CK_ERR_INPUT, "milp: %zu nodes make a program too large for CBC",
                           n);
    return CK_OK;
}

static void layout_free(layout *L)
{
    free(L->cum);
    free(L->start);
}

/* The program's units: memory in units of `unit` bytes (the budget is budget_units of
 * them), time in units of cost_scale. */
typedef struct {
    double unit, budget_units, cost_scale;
} scaling;

/* The constraint matrix, row by row (so that each column's rows come in order), and each
 * row's bounds. */
typedef struct {
    int row, col;
    double val;
} entry;

typedef struct {
    double lo, hi;
} bounds;

typedef struct {
    entry *e;
    size_t nz, cap;
    bounds *b;
    size_t rows, rows_cap;
    bool oom;
} matrix;

static bool grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * size);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

static void row_begin(matrix *m, double lo, double hi)
{
    if (m->oom || !grow((void **)&m->b, &m->rows_cap, m->rows + 1, sizeof *m->b)) {
        m->oom = true;
        return;
    }
    m->b[m->rows++] = (bounds){lo, hi};
}

/* Adds coefficient v of column c to the row begun last. */
static void row_add(matrix *m, size_t c, double v)
{
    if (m->oom || m->rows > INT_MAX || !grow((void **)&m->e, &m->cap, m->nz + 1, sizeof *m->e)) {
        m->oom = true;
        return;
    }
    m->e[m->nz++] = (entry){(int)(m->rows - 1), (int)c, v};
}

static void matrix_free(matrix *m)
{
    free(m->e);
    free(m->b);
}

/* Stage t's order: a resident node is not computed again (R + S <= 1); a node computed in
 * stage t finds each input computed before it in the stage or resident since its start;
 * what stage t + 1 starts with was computed in stage t or kept through it. */
static void rows_order(matrix *m, const layout *L, const ck_graph *g, size_t t)
{
    for (size_t i = 0; i < t; i++) {
        row_begin(m, -DBL_MAX, 1);
        row_add(m, col_r(L, t, i), 1);
        row_add(m, col_s(L, t, i), 1);
    }
    for (size_t k = 0; k <= t; k++)
        for (size_t p = 0; p < g->nodes[k].n_inputs; p++) {
            size_t i = g->nodes[k].inputs[p];
            row_begin(m, -DBL_MAX, 0);
            row_add(m, col_r(L, t, k), 1);
            row_add(m, col_r(L, t, i), -1);
            row_add(m, col_s(L, t, i), -1);
        }
    for (size_t i = 0; t + 1 < L->n && i <= t; i++) {
        row_begin(m, -DBL_MAX, 0);
        row_add(m, col_s(L, t + 1, i), 1);
        row_add(m, col_r(L, t, i), -1);
        if (i < t)
            row_add(m, col_s(L, t, i), -1);
    }
}

/* FREE[t][k][p] only where stage t computes k, does not keep the node for stage t + 1 and
 * computes none of the node's users after k (one row each: tighter than Checkmate's
 * single big-M row). Nothing forces a FREE to 1: freeing lowers U, so CBC frees what it
 * needs to, and the schedule frees every node after its last use anyway. */
static void rows_free(matrix *m, const layout *L, const ck_graph *g, size_t t)
{
    for (size_t k = 0; k <= t; k++)
        for (size_t p = 0; p <= g->nodes[k].n_inputs; p++) {
            size_t i = freeable(g, k, p), f = col_free(L, t, k, p);
            const ck_graph_node *v = &g->nodes[i];
            row_begin(m, -DBL_MAX, 0);
            row_add(m, f, 1);
            row_add(m, col_r(L, t, k), -1);
            if (t + 1 < L->n) {
                row_begin(m, -DBL_MAX, 1);
                row_add(m, f, 1);
                row_add(m, col_s(L, t + 1, i), 1);
            }
            for (size_t u = 0; u < v->n_users && v->users[u] <= t; u++)
                if (v->users[u] > k) {
                    row_begin(m, -DBL_MAX, 1);
                    row_add(m, f, 1);
                    row_add(m, col_r(L, t, v->users[u]), 1);
                }
        }
}

/* U[t][0] = what stage t keeps + R[t][0] m_0; U[t][k] = U[t][k-1] - what is freed after
 * k - 1 + R[t][k] m_k. Each U is at most the budget: the peak of the replay is the largest
 * resident total right after a compute, plus that node's transient bytes when it computes
 * (U[t][k] + R[t][k] tr_k, a row of its own for the nodes that have any). */
static void rows_memory(matrix *m, const layout *L, const ck_graph *g, size_t t, const scaling *o)
{
    double unit = o->unit;
    for (size_t k = 0; k <= t; k++) {
        row_begin(m, 0, 0);
        row_add(m, col_u(L, t, k), 1);
        row_add(m, col_r(L, t, k), -(double)g->nodes[k].bytes / unit);
        if (k == 0) {
            for (size_t i = 0; i < t; i++)
                row_add(m, col_s(L, t, i), -(double)g->nodes[i].bytes / unit);
        } else {
            row_add(m, col_u(L, t, k - 1), -1);
            for (size_t p = 0; p <= g->nodes[k - 1].n_inputs; p++)
                row_add(m, col_free(L, t, k - 1, p),
                        (double)g->nodes[freeable(g, k - 1, p)].bytes / unit);
        }
        if (g->nodes[k].transient_bytes) {
            row_begin(m, -DBL_MAX, o->budget_units);
            row_add(m, col_u(L, t, k), 1);
            row_add(m, col_r(L, t, k), (double)g->nodes[k].transient_bytes / unit);
        }
    }
}

/* Column bounds and objective: binaries but U, R[t][t] = 1, U at most the budget, the
 * objective the time of every compute. */
static int columns(const layout *L, const ck_graph *g, const scaling *o, double **lb, double **ub,
                   double **obj, ck_err *err)
{
    *lb = calloc(L->n_cols, sizeof **lb);
    *ub = malloc(L->n_cols * sizeof **ub);
    *obj = calloc(L->n_cols, sizeof **obj);
    if (!*lb || !*ub || !*obj)
        return ck_err_oom(err);
    for (size_t c = 0; c < L->n_cols; c++)
        (*ub)[c] = 1;
    for (size_t t = 0; t < L->n; t++) {
        (*lb)[col_r(L, t, t)] = 1;
        for (size_t i = 0; i <= t; i++) {
            (*obj)[col_r(L, t, i)] = g->nodes[i].cost / o->cost_scale;
            (*ub)[col_u(L, t, i)] = o->budget_units;
        }
    }
    return CK_OK;
}

/* Hands the program to CBC in compressed columns (each column's rows in order, as they
 * were added row by row). */
static int load(Cbc_Model *cbc, const layout *L, const matrix *m, const double *lb,
                const double *ub, const double *obj, ck_err *err)
{
    if (m->nz > INT_MAX || m->rows > INT_MAX)
        return ck_err_fail(err, CK_ERR_INPUT, "milp: the program is too large for CBC");
    CoinBigIndex *start = calloc(L->n_cols + 1, sizeof *start);
    CoinBigIndex *next = malloc((L->n_cols + 1) * sizeof *next);
    int *index = malloc((m->nz ? m->nz : 1) * sizeof *index);
    double *value = malloc((m->nz ? m->nz : 1) * sizeof *value);
    double *rlo = malloc((m->rows ? m->rows : 1) * sizeof *rlo);
    double *rhi = malloc((m->rows ? m->rows : 1) * sizeof *rhi);
    int rc = start && next && index && value && rlo && rhi ? CK_OK : ck_err_oom(err);
    if (rc == CK_OK) {
        for (size_t e = 0; e < m->nz; e++)
            start[m->e[e].col + 1]++;
        for (size_t c = 0; c < L->n_cols; c++)
            start[c + 1] += start[c];
        memcpy(next, start, (L->n_cols + 1) * sizeof *next);
        for (size_t e = 0; e < m->nz; e++) {
            CoinBigIndex at = next[m->e[e].col]++;
            index[at] = m->e[e].row;
            value[at] = m->e[e].val;
        }
        for (size_t r = 0; r < m->rows; r++) {
            rlo[r] = m->b[r].lo;
            rhi[r] = m->b[r].hi;
        }
        Cbc_loadProblem(cbc, (int)L->n_cols, (int)m->rows, start, index, value, lb, ub, obj, rlo,
                        rhi);
        for (size_t c = 0; c < L->n_cols; c++)
            if (c < L->off_u || c >= L->off_free)
                Cbc_setInteger(cbc, (int)c);
    }
    free(start);
    free(next);
    free(index);
    free(value);
    free(rlo);
    free(rhi);
    return rc;
}

static double monotonic_seconds(void);

/* Whether building the program must stop before stage t: a signal, or --time-limit spent
 * (the limit covers the setup too: on a graph of thousands of nodes building the program
 * took minutes and gigabytes before CBC started). CK_ERR_TIME_UP: see solve_graph. */
#define CK_ERR_TIME_UP 1000
static int setup_check(const ck_graph_planner_opts *opts, double deadline, size_t t, size_t n,
                       ck_err *err)
{
    int rc = ck_err_check_stop(opts ? opts->stop : NULL, err);
    if (rc == CK_OK && deadline > 0 && monotonic_seconds() > deadline)
        rc = ck_err_fail(err, CK_ERR_TIME_UP, "milp: the time limit of %g s ran out while "
                         "building the program (at stage %zu of %zu), before CBC started",
                         opts->time_limit_s, t, n);
    return rc;
}

/* The whole program of g under the budget, loaded into cbc; deadline (0: none) on the
 * monotonic clock. */
static int build(Cbc_Model *cbc, const layout *L, const ck_graph *g, const scaling *o,
                 const ck_graph_planner_opts *opts, double deadline, ck_err *err)
{
    matrix m = {0};
    double *lb = NULL, *ub = NULL, *obj = NULL;
    int rc = CK_OK;
    for (size_t t = 0; t < L->n && !m.oom && rc == CK_OK; t++) {
        rc = setup_check(opts, deadline, t, L->n, err);
        rows_order(&m, L, g, t);
        rows_free(&m, L, g, t);
        rows_memory(&m, L, g, t, o);
    }
    if (rc == CK_OK)
        rc = m.oom ? ck_err_oom(err) : columns(L, g, o, &lb, &ub, &obj, err);
    if (rc == CK_OK)
        rc = load(cbc, L, &m, lb, ub, obj, err);
    matrix_free(&m);
    free(lb);
    free(ub);
    free(obj);
    return rc;
}

/* Which nodes each stage computes and starts with: r[t * n + i], s[t * n + i]. */
typedef struct {
    size_t n;
    bool *r, *s;
} stages;

static int stages_make(stages *st, size_t n, ck_err *err)
{
    size_t cells = n ? n * n : 1;
    st->n = n;
    st->r = calloc(cells, sizeof *st->r);
    st->s = calloc(cells, sizeof *st->s);
    return st->r && st->s ? CK_OK : ck_err_oom(err);
}

static void stages_free(stages *st)
{
    free(st->r);
    free(st->s);
}

/* Whether stage t frees node i right after computing k: stage t + 1 does not start with it
 * and stage t computes none of its users after k. */
static bool frees_after(const ck_graph *g, const stages *st, size_t t, size_t k, size_t i)
{
    size_t n = st->n;
    if (t + 1 < n && st->s[(t + 1) * n + i])
        return false;
    const ck_graph_node *v = &g->nodes[i];
    for (size_t u = 0; u < v->n_users && v->users[u] <= t; u++)
        if (v->users[u] > k && st->r[t * n + v->users[u]])
            return false;
    return true;
}

/* The schedule of the stages: each stage computes its nodes in id order, frees each node
 * after its last use in the stage unless the next stage starts with it, and at its end
 * frees whatever else the next stage does not start with. */
static int stages_schedule(const ck_graph *g, const stages *st, ck_graph_schedule *out,
                           ck_err *err)
{
    size_t n = st->n;
    bool *resident = calloc(n ? n : 1, sizeof *resident);
    bool ok = resident != NULL;
    for (size_t t = 0; ok && t < n; t++) {
        for (size_t k = 0; ok && k <= t; k++) {
            if (!st->r[t * n + k])
                continue;
            ok = ck_graph_schedule_push(out, CK_GRAPH_COMPUTE, k);
            resident[k] = true;
            for (size_t p = 0; ok && p <= g->nodes[k].n_inputs; p++) {
                size_t i = freeable(g, k, p);
                if (resident[i] && frees_after(g, st, t, k, i)) {
                    ok = ck_graph_schedule_push(out, CK_GRAPH_FREE, i);
                    resident[i] = false;
                }
            }
        }
        for (size_t i = 0; ok && i <= t; i++)
            if (resident[i] && !(t + 1 < n && st->s[(t + 1) * n + i])) {
                ok = ck_graph_schedule_push(out, CK_GRAPH_FREE, i);
                resident[i] = false;
            }
    }
    free(resident);
    return ok ? CK_OK : ck_err_oom(err);
}

/* Whether stage t computes a user of i. */
static bool used_in(const ck_graph *g, const stages *st, size_t t, size_t i)
{
    const ck_graph_node *v = &g->nodes[i];
    for (size_t u = 0; u < v->n_users && v->users[u] <= t; u++)
        if (st->r[t * st->n + v->users[u]])
            return true;
    return false;
}

/* The stages of schedule w when it lies in the class (first computations in id order, each
 * stage's computes ascending); false otherwise. Each stage starts with what w has resident
 * there that the stage reads or the next one starts with. */
static bool stages_from_schedule(const ck_graph *g, const ck_graph_schedule *w, stages *st)
{
    size_t n = st->n, next = 0, last = SIZE_MAX;
    bool *resident = calloc(n ? n : 1, sizeof *resident);
    bool ok = resident != NULL;
    for (size_t o = 0; ok && o < w->n; o++) {
        size_t v = w->ops[o].node;
        ok = v < n;
        if (!ok || w->ops[o].kind == CK_GRAPH_FREE) {
            if (ok)
                resident[v] = false;
            continue;
        }
        ok = next < n && v <= next && (last == SIZE_MAX || v > last);
        if (ok && last == SIZE_MAX)
            memcpy(st->s + next * n, resident, n * sizeof *resident);
        if (!ok)
            continue;
        st->r[next * n + v] = resident[v] = true;
        last = v == next ? SIZE_MAX : v;
        next += v == next;
    }
    free(resident);
    for (size_t t = n; ok && t-- > 1;)
        for (size_t i = 0; i < t; i++) {
            bool *s = &st->s[t * n + i];
            *s = *s && !st->r[t * n + i] &&
                 (used_in(g, st, t, i) || (t + 1 < n && st->s[(t + 1) * n + i]));
        }
    return ok && next == n;
}

/* The warm start as a schedule of the class (its stages' schedule) when that replays valid
 * within the budget: *out (empty otherwise) and its replay. CBC is told to look only for
 * faster schedules (its cutoff), and the planner returns this one when CBC finds none.
 * Not CBC's own MIP start: CBC 2.10.8 crashes (CglPreProcess::postProcess) when its time
 * limit ends during preprocessing with a MIP start given, and preprocessing is what makes it
 * fast on these programs. A start outside the class, or over the budget, is left out. */
static int warm_start(Cbc_Model *cbc, const ck_graph *g, const ck_graph_schedule *w,
                      uint64_t budget, double cost_scale, ck_graph_schedule *out,
                      ck_graph_replay *rp, ck_err *err)
{
    stages st;
    int rc = stages_make(&st, g->n_nodes, err);
    if (rc == CK_OK && stages_from_schedule(g, w, &st) &&
        (rc = stages_schedule(g, &st, out, err)) == CK_OK &&
        ck_graph_replay_schedule(g, out, rp, NULL) == CK_OK && rp->peak_bytes <= budget)
        Cbc_setCutoff(cbc, rp->time / cost_scale);
    else
        ck_graph_schedule_free(out);
    stages_free(&st);
    return rc;
}

/* CBC, silent (ckplan's stdout is data), timed on the wall clock, stopping within
 * RELATIVE_GAP of its bound. */
static void solve(Cbc_Model *cbc, const ck_graph_planner_opts *opts)
{
    Cbc_setLogLevel(cbc, 0);
    Cbc_setParameter(cbc, "log", "0");
    Cbc_setParameter(cbc, "slog", "0");
    Cbc_setParameter(cbc, "timeMode", "elapsed");
    Cbc_setAllowableFractionGap(cbc, RELATIVE_GAP);
    if (opts && opts->time_limit_s > 0)
        Cbc_setMaximumSeconds(cbc, opts->time_limit_s);
    Cbc_solve(cbc);
}

static const char *const status_names[] = {"optimal", "time limit", "feasible", "solver failed"};

static double monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* What a CBC run ended with, as the solving process sends it back: outcome's status and
 * message, the status word (an index in status_names), whether CBC's own best schedule is
 * the answer (its columns follow the reply) or the warm start is, and CBC's bound. */
typedef struct {
    int rc;
    char msg[sizeof(ck_err)];
    int status;
    bool own, infeasible;
    double best_bound; /* in the program's cost units */
} cbc_reply;

/* The reply to a finished run. With a warm start, CBC's "infeasible" means that nothing is
 * faster than the warm start. */
static void outcome(Cbc_Model *cbc, const ck_graph_planner_opts *opts, bool warm, cbc_reply *r)
{
    ck_err err = {{0}};
    r->infeasible = Cbc_isProvenInfeasible(cbc);
    bool timed = Cbc_isSecondsLimitReached(cbc);
    r->own = Cbc_bestSolution(cbc) != NULL;
    r->best_bound = Cbc_getBestPossibleObjValue(cbc);
    r->rc = CK_OK;
    if (r->own || warm) {
        bool optimal = r->own ? Cbc_isProvenOptimal(cbc) : r->infeasible;
        r->status = optimal ? 0 : timed ? 1 : 2;
    } else if (r->infeasible)
        r->rc = ck_err_fail(&err, CK_ERR_INFEASIBLE,
                            "milp: CBC proved that no schedule of Checkmate's class fits");
    else if (timed)
        r->rc = ck_err_fail(&err, CK_ERR_RUNTIME,
                            "milp: CBC found no schedule within the time limit of %g s",
                            opts->time_limit_s);
    else
        r->rc = ck_err_fail(&err, CK_ERR_RUNTIME, "milp: CBC stopped without a schedule (status "
                            "%d/%d)", Cbc_status(cbc), Cbc_secondaryStatus(cbc));
    memcpy(r->msg, err.msg, sizeof r->msg);
}

static bool write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        len -= (size_t)w;
    }
    return true;
}

/* The solving process: CBC runs here, away from ckplan, which a crash or abort of CBC's
 * (both seen: CglPreProcess::postProcess, ClpNonLinearCost's assertions) must not take
 * down, and which must be able to stop it when CBC overruns its limit (it checks it only
 * once branch and bound starts) or when interrupted. Never returns. */
static void solve_in_child(Cbc_Model *cbc, const layout *L, const ck_graph_planner_opts *opts,
                           bool warm, int fd, pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* ckplan killed outright: CBC goes with it */
    if (getppid() != parent)
        _exit(1);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
    }
    signal(SIGINT, SIG_DFL);
    solve(cbc, opts);
    cbc_reply r;
    memset(&r, 0, sizeof r);
    outcome(cbc, opts, warm, &r);
    bool ok = write_all(fd, &r, sizeof r) &&
              (!r.own || write_all(fd, Cbc_bestSolution(cbc), L->n_cols * sizeof(double)));
    _exit(ok ? 0 : 1);
}

/* Reads the child's reply into buf (len bytes, then EOF), polling stop and the deadline
 * (a monotonic time in seconds; <= 0: none). */
static int read_reply(int fd, pid_t child, char *buf, size_t len, double deadline,
                      const atomic_int *stop, size_t *got, ck_err *err)
{
    *got = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, 100);
        if (n < 0 && errno != EINTR)
            return ck_err_fail(err, CK_ERR_RUNTIME, "milp: poll: %s", strerror(errno));
        if (ck_err_check_stop(stop, err) != CK_OK) {
            kill(child, SIGKILL);
            return CK_INTERRUPTED;
        }
        if (deadline > 0 && monotonic_seconds() > deadline) {
            kill(child, SIGKILL);
            return ck_err_fail(err, CK_ERR_RUNTIME, "milp: CBC overran its time limit");
        }
        if (n <= 0)
            continue;
        char spill[4096];
        ssize_t r = read(fd, *got < len ? buf + *got : spill, *got < len ? len - *got : sizeof spill);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return CK_OK;
        *got += (size_t)r;
    }
}
/* The schedule of CBC's best solution (binaries rounded), replayed: its peak must be within
 * the budget, whatever CBC's tolerances allowed. */
static int decode(const double *x, const layout *L, const ck_graph *g, uint64_t budget,
                  ck_graph_schedule *out, ck_graph_replay *rp, ck_err *err)
{
    size_t n = L->n;
    stages st;
    int rc = stages_make(&st, n, err);
    for (size_t t = 0; rc == CK_OK && t < n; t++)
        for (size_t i = 0; i <= t; i++) {
            st.r[t * n + i] = x[col_r(L, t, i)] > 0.5;
            st.s[t * n + i] = i < t && x[col_s(L, t, i)] > 0.5;
        }
    if (rc == CK_OK)
        rc = stages_schedule(g, &st, out, err);
    stages_free(&st);
    ck_err why = {{0}};
    if (rc == CK_OK && ck_graph_replay_schedule(g, out, rp, &why) != CK_OK)
        return ck_err_fail(err, CK_ERR_RUNTIME, "milp: CBC's solution is no valid schedule: %s",
                           why.msg);
    if (rc == CK_OK && rp->peak_bytes > budget)
        return ck_err_fail(err, CK_ERR_RUNTIME,
                           "milp: CBC's solution replays to a peak of %llu bytes, over the budget "
                           "of %llu (the solver's tolerances)",
                           (unsigned long long)rp->peak_bytes, (unsigned long long)budget);
    return rc;
}

/* The greatest common divisor of the nodes' bytes and transients (1 when all are 0). */
static uint64_t bytes_gcd(const ck_graph *g)
{
    uint64_t G = 0;
    for (size_t v = 0; v < g->n_nodes; v++)
        for (int pass = 0; pass < 2; pass++)
            for (uint64_t b = pass ? g->nodes[v].transient_bytes : g->nodes[v].bytes, r; b;
                 G = b, b = r)
                r = G % b;
    return G ? G : 1;
}

/* A power of two at least the largest cost (exact to divide by), so that the objective's
 * coefficients lie in [0, 1] whatever the graph's unit of time. */
static double cost_scale(const ck_graph *g)
{
    double most = 0;
    for (size_t v = 0; v < g->n_nodes; v++)
        most = fmax(most, g->nodes[v].cost);
    int e = 0;
    frexp(most, &e);
    return most > 0 ? ldexp(1, e) : 1;
}

/* CBC's bound in the graph's time, within [0, time]: none below 0 (no cost is negative), and
 * the warm start's own time when CBC proved nothing faster. */
static double bound_of(const cbc_reply *r, double scale, double time)
{
    if (!r->own && r->infeasible)
        return time;
    double bound = r->best_bound * scale;
    return isfinite(bound) ? fmax(0, fmin(bound, time)) : 0;
}

/* When CBC's process crashed or overran and a warm start is there, that is the answer,
 * with no bound but 0: *r says so and CK_OK; otherwise rc. */
static int fall_back(int rc, bool warm, int status, cbc_reply *r)
{
    if (rc != CK_ERR_RUNTIME || !warm)
        return rc;
    *r = (cbc_reply){.rc = CK_OK, .status = status, .best_bound = 0};
    return CK_OK;
}

/* The reply in buf (got bytes) of a process that ended with wstatus: *reply, and CBC's
 * columns into *x (malloc'ed) when its own schedule is the answer. */
static int take_reply(const char *buf, size_t got, size_t n_cols, int wstatus, cbc_reply *reply,
                      double **x, ck_err *err)
{
    if (WIFSIGNALED(wstatus))
        return ck_err_fail(err, CK_ERR_RUNTIME, "milp: CBC's process died of signal %d (%s)",
                           WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
    if (got < sizeof *reply)
        return ck_err_fail(err, CK_ERR_RUNTIME, "milp: CBC's process ended without an answer "
                           "(exit status %d)", WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
    memcpy(reply, buf, sizeof *reply);
    if (!reply->own)
        return CK_OK;
    if (got < sizeof *reply + n_cols * sizeof **x)
        return ck_err_fail(err, CK_ERR_RUNTIME, "milp: CBC's process sent part of its schedule");
    if (!(*x = malloc(n_cols * sizeof **x)))
        return ck_err_oom(err);
    memcpy(*x, buf + sizeof *reply, n_cols * sizeof **x);
    return CK_OK;
}

/* Solves the loaded program in a process of its own (solve_in_child), killed at 1.5 times
 * the time limit plus 10 s after `started` (when the planner began, on the monotonic clock,
 * so that its setup counts against the limit too) or when interrupted. A crash or an
 * overrun with a warm start gives the warm start ("solver failed", "time limit"); without
 * one, an error. */
static int run_cbc(Cbc_Model *cbc, const layout *L, const ck_graph_planner_opts *opts, bool warm,
                   double started, cbc_reply *reply, double **x, ck_err *err)
{
    int fds[2];
    size_t len = sizeof *reply + L->n_cols * sizeof(double);
    char *buf = malloc(len);
    if (!buf)
        return ck_err_oom(err);
    if (pipe(fds) != 0) {
        free(buf);
        return ck_err_fail(err, CK_ERR_RUNTIME, "milp: pipe: %s", strerror(errno));
    }
    fflush(NULL); /* nothing buffered is written twice */
    pid_t parent = getpid(), child = fork();
    if (child == 0) {
        close(fds[0]);
        solve_in_child(cbc, L, opts, warm, fds[1], parent);
    }
    close(fds[1]);
    int rc = CK_OK, wstatus = 0;
    size_t got = 0;
    if (child < 0)
        rc = ck_err_fail(err, CK_ERR_RUNTIME, "milp: fork: %s", strerror(errno));
    double limit = opts && opts->time_limit_s > 0 ? opts->time_limit_s : 0;
    double deadline = limit > 0 ? started + 1.5 * limit + 10 : 0;
    if (rc == CK_OK)
        rc = read_reply(fds[0], child, buf, len, deadline, opts ? opts->stop : NULL, &got, err);
    close(fds[0]);
    while (child > 0 && waitpid(child, &wstatus, 0) < 0 && errno == EINTR)
        ;
    bool overran = rc == CK_ERR_RUNTIME && child > 0;
    if (rc == CK_OK)
        rc = take_reply(buf, got, L->n_cols, wstatus, reply, x, err);
    free(buf);
    return fall_back(rc, warm, overran ? 1 : 3, reply);
}

/* The limit ran out while building the program: the warm start is the answer (status
 * "time limit", bound 0), as when CBC overruns it; without one, a failure (err says why). */
static int setup_fall_back(const ck_graph_planner_opts *opts, ck_graph_plan_result *result,
                           ck_err *err)
{
    const ck_graph_schedule *w = opts->warm_start;
    if (!w || w->n == 0)
        return CK_ERR_RUNTIME;
    for (size_t k = 0; k < w->n; k++)
        if (!ck_graph_schedule_push(&result->schedule, w->ops[k].kind, w->ops[k].node))
            return ck_err_oom(err);
    result->status = status_names[1];
    result->bound = 0;
    result->gap = 1;
    return CK_ERR_TIME_UP;
}

/* Builds the program, warm-starts, solves and decodes: result's schedule, status, bound. */
static int solve_graph(const ck_graph *g, uint64_t budget, const ck_graph_planner_opts *opts,
                       ck_graph_plan_result *result, ck_err *err)
{
    layout L = {0};
    ck_graph_replay rp;
    ck_graph_schedule warm = {0};
    double unit = fmax(1, (double)budget / MEMORY_STEPS);
    uint64_t G = bytes_gcd(g);
    double bound = (double)(budget / G * G) + (double)G / 2;
    scaling o = {.unit = unit, .budget_units = bound / unit, .cost_scale = cost_scale(g)};
    Cbc_Model *cbc = Cbc_newModel();
    double limit = opts && opts->time_limit_s > 0 ? opts->time_limit_s : 0;
    double started = monotonic_seconds(), deadline = limit > 0 ? started + limit : 0;
    int rc = cbc ? layout_make(g, &L, err) : ck_err_oom(err);
    if (rc == CK_OK)
        rc = build(cbc, &L, g, &o, opts, deadline, err);
    if (rc == CK_ERR_TIME_UP) /* the warm start, as when CBC overruns; else a failure */
        rc = setup_fall_back(opts, result, err);
    bool warm_answer = rc == CK_ERR_TIME_UP; /* every later step skipped */
    if (rc == CK_OK && opts && opts->warm_start)
        rc = warm_start(cbc, g, opts->warm_start, budget, o.cost_scale, &warm, &rp, err);
    if (rc == CK_OK)
        rc = ck_err_check_stop(opts ? opts->stop : NULL, err);
    cbc_reply reply = {0};
    double *x = NULL;
    if (rc == CK_OK)
        rc = run_cbc(cbc, &L, opts, warm.n > 0, started, &reply, &x, err);
    if (rc == CK_OK && reply.rc != CK_OK)
        rc = ck_err_fail(err, reply.rc, "%s", reply.msg);
    if (rc == CK_OK)
        rc = ck_err_check_stop(opts ? opts->stop : NULL, err);
    if (rc == CK_OK && reply.own)
        rc = decode(x, &L, g, budget, &result->schedule, &rp, err);
    else if (rc == CK_OK) {
        result->schedule = warm;
        warm = (ck_graph_schedule){0};
    }
    if (rc == CK_OK) {
        result->status = status_names[reply.status];
        result->bound = bound_of(&reply, o.cost_scale, rp.time);
        result->gap = rp.time > 0 ? (rp.time - result->bound) / rp.time : 0;
    }
    free(x);
    ck_graph_schedule_free(&warm);
    if (cbc)
        Cbc_deleteModel(cbc);
    layout_free(&L);
    return warm_answer ? CK_OK : rc;
}

static int plan_milp(const ck_graph *g, uint64_t budget, const ck_graph_planner_opts *opts,
                     ck_graph_plan_result *result, uint64_t *min_budget, ck_err *err)
{
    ck_graph_plan_result_init(result);
    if (min_budget)
        *min_budget = 0;
    size_t node = 0;
    uint64_t need = ck_graph_least_peak(g, &node);
    int rc = ck_err_check_stop(opts ? opts->stop : NULL, err);
    if (rc == CK_OK && need > budget)
        rc = ck_err_fail(err, CK_ERR_INFEASIBLE,
                         "milp: computing node %zu (%s) needs %llu bytes resident, over the "
                         "budget of %llu", node, g->nodes[node].name, (unsigned long long)need,
                         (unsigned long long)budget);
    if (rc == CK_OK && g->n_nodes == 0) { /* nothing to compute: CBC has no columns */
        *result = (ck_graph_plan_result){.status = "optimal", .bound = 0, .gap = 0};
        return CK_OK;
    }
    if (rc == CK_OK)
        rc = solve_graph(g, budget, opts, result, err);
    if (rc != CK_OK)
        ck_graph_plan_result_free(result);
    return rc;
}

const ck_graph_planner ck_graph_planner_milp = {
    .name = "milp",
    .summary = "exact over Checkmate's stages: Checkmate's MILP solved by COIN-OR CBC",
    .plan = plan_milp,
    .tells_min_budget = false, /* CBC proves infeasibility, not the smallest budget */
};
