#include "planner/dp_rows.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

/* Columns (rows of equal t) filled together. The rows starting at s in those columns read
 * the same left parts (rows starting at s), and the rows of the next s read the same
 * columns' rows as right parts: both stay in the cache. */
#define FILL_COLUMNS 8

/* Waits that spin this often give the processor away between looks. */
#define SPINS_BEFORE_YIELD 64

/* Work items, handed out in order: for each block of columns [t0, t1), the s from t1 - 1
 * down to 0; an item is the rows (s, t) of the block with t >= s. done[s] is the first t
 * whose row (s, t) is not filled yet (rows after the loss included, at t = L - 1), so
 * done[s] > t says row (s, t) and all of s's rows before it are filled. Every item waits
 * only for items handed out before it, which workers hold, so the fill always advances. */
typedef struct {
    size_t L;
    const atomic_int *stop;
    void *ctx;
    ck_dp_rows_fill_fn fill;
    atomic_size_t next;   /* the next item, as block * L + (t1 - 1 - s) */
    atomic_size_t *done;  /* L entries: the worker of s waits on done[s + 1] only when s < t */
    atomic_bool abandon;  /* set once stop is seen: every worker leaves */
} row_fill;

typedef struct {
    row_fill *f;
    size_t worker;
} worker_arg;

static bool stopping(row_fill *f)
{
    if (atomic_load_explicit(&f->abandon, memory_order_relaxed))
        return true;
    if (f->stop && atomic_load(f->stop)) {
        atomic_store(&f->abandon, true);
        return true;
    }
    return false;
}

/* Waits until done[s] > t; false when the fill is abandoned first. */
static bool wait_done(row_fill *f, size_t s, size_t t)
{
    for (unsigned spins = 0; atomic_load_explicit(&f->done[s], memory_order_acquire) <= t; spins++) {
        if (stopping(f))
            return false;
        if (spins >= SPINS_BEFORE_YIELD)
            sched_yield();
    }
    return true;
}

/* The rows (s, t) of columns [t0, t1), t >= s, once their right parts are filled. */
static bool fill_item(row_fill *f, size_t worker, size_t s, size_t t0, size_t t1)
{
    size_t first = s > t0 ? s : t0;
    if (first > s && !wait_done(f, s, first - 1)) /* s's rows before this block */
        return false;
    for (size_t t = first; t < t1; t++) {
        if (stopping(f) || (s < t && !wait_done(f, s + 1, t)))
            return false;
        f->fill(f->ctx, worker, s, t, CK_SEG_USUAL);
        if (t + 1 == f->L) {
            f->fill(f->ctx, worker, s, t, CK_SEG_AFTER_LOSS);
            f->fill(f->ctx, worker, s, t, CK_SEG_PLAIN_LOSS);
        }
        atomic_store_explicit(&f->done[s], t + 1, memory_order_release);
    }
    return true;
}

/* Hands out the next item as (s, t0, t1); false when none is left. */
static bool next_item(row_fill *f, size_t *s, size_t *t0, size_t *t1)
{
    size_t L = f->L, blocks = (L + FILL_COLUMNS - 1) / FILL_COLUMNS;
    size_t cur = atomic_load_explicit(&f->next, memory_order_relaxed), after;
    do {
        size_t block = cur / L, back = cur % L;
        if (block >= blocks)
            return false;
        *t0 = block * FILL_COLUMNS;
        *t1 = *t0 + FILL_COLUMNS < L ? *t0 + FILL_COLUMNS : L;
        *s = *t1 - 1 - back;
        after = back + 1 < *t1 ? cur + 1 : (block + 1) * L; /* the block's s = 0 ends it */
    } while (!atomic_compare_exchange_weak_explicit(&f->next, &cur, after, memory_order_relaxed,
                                                    memory_order_relaxed));
    return true;
}

static void *work(void *p)
{
    const worker_arg *a = p;
    size_t s, t0, t1;
    while (next_item(a->f, &s, &t0, &t1) && fill_item(a->f, a->worker, s, t0, t1))
        continue;
    return NULL;
}

size_t ck_dp_rows_workers(size_t requested, size_t L)
{
    size_t n = requested;
    cpu_set_t allowed; /* the processors this process may run on, which a container limits */
    if (n == 0 && sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        n = (size_t)CPU_COUNT(&allowed);
    if (n == 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n = online > 0 ? (size_t)online : 1;
    }
    if (n > CK_DP_ROWS_MAX_WORKERS)
        n = CK_DP_ROWS_MAX_WORKERS;
    if (n > L)
        n = L;
    return n > 0 ? n : 1;
}

int ck_dp_rows_fill(size_t L, size_t workers, const atomic_int *stop, void *ctx,
                    ck_dp_rows_fill_fn fill, ck_err *err)
{
    row_fill f = {.L = L, .stop = stop, .ctx = ctx, .fill = fill, .done = malloc(L * sizeof *f.done)};
    if (!f.done)
        return ck_err_oom(err);
    atomic_init(&f.next, 0);
    atomic_init(&f.abandon, false);
    for (size_t s = 0; s < L; s++)
        atomic_init(&f.done[s], s); /* rows (s, t) exist for t >= s */
    pthread_t threads[CK_DP_ROWS_MAX_WORKERS];
    worker_arg args[CK_DP_ROWS_MAX_WORKERS];
    size_t started = 0;
    for (size_t w = 1; w < workers && w < CK_DP_ROWS_MAX_WORKERS; w++) {
        args[started] = (worker_arg){&f, w};
        if (pthread_create(&threads[started], NULL, work, &args[started]) != 0)
            break; /* the workers started, this thread among them, do every row */
        started++;
    }
    worker_arg self = {&f, 0};
    work(&self);
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    free(f.done);
    return stopping(&f) ? ck_err_check_stop(stop, err) : CK_OK;
}
