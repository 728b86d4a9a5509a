/* dp's row order on several workers (planner/dp_rows.h). Every row is filled once, after
 * every row it reads, by a worker whose scratch no other call uses at the same time, for
 * chains that end inside a block of columns and on one, with 1 to 24 workers; a stop ends
 * every worker; and dp's schedules are the same whatever the number of workers. Fills
 * spin for a random while, so that the workers interleave differently each time. */
#include <stdlib.h>

#include "planner/dp_rows.h"
#include "planner/plan_dp.h"
#include "planner/planner.h"
#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"
#include "tests/unit/plan_run.h"

/* Rows as plan_dp numbers them: the usual (s, t), then after the loss and the plain loss. */
static size_t row(size_t L, size_t s, size_t t, ck_seg_kind kind)
{
    if (kind == CK_SEG_USUAL)
        return t * (t + 1) / 2 + s;
    return L * (L + 1) / 2 + (kind == CK_SEG_AFTER_LOSS ? 0 : L) + s;
}

typedef struct {
    size_t L, workers;
    atomic_int *filled;   /* per row: times filled */
    atomic_int *busy;     /* per worker: calls running */
    atomic_int wrong;     /* rows filled before one they read, twice, or with a busy worker */
    atomic_int rows;
    int stop_after;       /* set stop once this many rows are filled; 0: never */
    atomic_int *stop;
} order_check;

static bool filled(order_check *o, size_t s, size_t t, ck_seg_kind kind)
{
    return atomic_load(&o->filled[row(o->L, s, t, kind)]) == 1;
}

/* Whether every row that (s, t, kind) reads is filled. */
static bool reads_filled(order_check *o, size_t s, size_t t, ck_seg_kind kind)
{
    for (size_t j = s + 1; j <= t; j++)
        if (!filled(o, j, t, kind) || !filled(o, s, j - 1, CK_SEG_USUAL))
            return false;
    return kind != CK_SEG_PLAIN_LOSS || filled(o, s, t, CK_SEG_AFTER_LOSS);
}

static void spin(size_t n)
{
    volatile size_t sink = 0;
    for (size_t i = 0; i < n; i++)
        sink += i;
}

static void check_fill(void *ctx, size_t worker, size_t s, size_t t, ck_seg_kind kind)
{
    order_check *o = ctx;
    bool ok = worker < o->workers && atomic_fetch_add(&o->busy[worker], 1) == 0 &&
              s <= t && t < o->L && (kind == CK_SEG_USUAL || t + 1 == o->L) &&
              reads_filled(o, s, t, kind);
    /* the same rows, other timings; a block's first column (a multiple of 8) slowest, so
     * that the next block is reached while it is still being filled */
    spin(t % 8 == 0 ? 20000 : (s * 7919 + t * 104729 + kind) % 2000);
    ok = atomic_fetch_add(&o->filled[row(o->L, s, t, kind)], 1) == 0 && ok;
    atomic_fetch_sub(&o->busy[worker], 1);
    if (!ok)
        atomic_fetch_add(&o->wrong, 1);
    if (atomic_fetch_add(&o->rows, 1) + 1 == o->stop_after)
        atomic_store(o->stop, 1);
}

/* Fills a chain of L stages with `workers` workers; returns the status, *o's counts set. */
static int fill(order_check *o, size_t L, size_t workers, int stop_after)
{
    size_t rows = L * (L + 1) / 2 + 2 * L;
    static atomic_int stop;
    atomic_store(&stop, 0);
    *o = (order_check){.L = L, .workers = workers, .filled = calloc(rows, sizeof *o->filled),
                       .busy = calloc(workers, sizeof *o->busy), .stop_after = stop_after,
                       .stop = &stop};
    ck_assert_ptr_nonnull(o->filled);
    ck_assert_ptr_nonnull(o->busy);
    ck_err err = {{0}};
    return ck_dp_rows_fill(L, workers, &stop, o, check_fill, &err);
}

START_TEST(every_row_once_after_what_it_reads)
{
    /* more workers than a block's items, too: they then reach a block while a row of the
     * one before is still being filled */
    const size_t lengths[] = {1, 2, 7, 8, 9, 16, 17, 40}, workers[] = {1, 2, 3, 4, 5, 8, 12, 24};
    for (size_t k = 0; k < sizeof workers / sizeof *workers; k++)
        for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
            size_t L = lengths[i], w = workers[k], rows = L * (L + 1) / 2 + 2 * L;
            order_check o;
            ck_assert_int_eq(fill(&o, L, w, 0), CK_OK);
            ck_assert_msg(atomic_load(&o.wrong) == 0, "L=%zu, %zu workers: %d rows out of order, "
                          "twice or on a busy worker", L, w, atomic_load(&o.wrong));
            for (size_t r = 0; r < rows; r++)
                ck_assert_msg(atomic_load(&o.filled[r]) == 1, "L=%zu, %zu workers: row %zu filled %d "
                              "times", L, w, r, atomic_load(&o.filled[r]));
            free(o.filled);
            free(o.busy);
        }
}
END_TEST

START_TEST(a_stop_ends_every_worker)
{
    for (size_t w = 1; w <= 4; w++) {
        order_check o;
        ck_assert_int_eq(fill(&o, 60, w, 500), CK_INTERRUPTED);
        int rows = atomic_load(&o.rows);
        /* each worker finishes the row it is in, then leaves */
        ck_assert_msg(rows >= 500 && rows < 500 + (int)w, "%zu workers: %d rows", w, rows);
        ck_assert_int_eq(atomic_load(&o.wrong), 0);
        free(o.filled);
        free(o.busy);
    }
}
END_TEST

START_TEST(dp_is_the_same_on_any_number_of_workers)
{
    ck_rng rng;
    ck_rng_seed(&rng, 14);
    for (int trial = 0; trial < 40; trial++) {
        ck_chain c;
        ck_err err = {{0}};
        size_t L = 1 + ck_rng_below(&rng, 30);
        ck_assert_int_eq(ck_chaingen_random(&c, L, 50, 10, &rng, &err), CK_OK);
        ck_assert_msg(ck_chaingen_variants(&c, 50, 10, &rng, &err) == CK_OK, "%s", err.msg);
        uint64_t peak = ck_test_baseline(&c).peak_bytes;
        uint64_t budget = c.input_bytes + ck_rng_below(&rng, peak - c.input_bytes + 1);
        ck_schedule one = {0};
        int rc_one = 0;
        for (uint32_t threads = 1; threads <= 5; threads += 2) {
            ck_planner_opts opts = {.slots = 64, .variants = true, .threads = threads};
            ck_plan_result r = {.snapshots = -1, .segments = -1};
            uint64_t min_budget = 0;
            int rc = ck_planner_dp.plan(&c, budget, &opts, &r, &min_budget, &err);
            if (threads == 1) {
                rc_one = rc;
                one = r.schedule;
                continue;
            }
            ck_assert_int_eq(rc, rc_one);
            ck_assert_msg(rc != CK_OK || ck_test_same_schedule(&one, &r.schedule),
                          "trial %d (L=%zu): %u workers planned another schedule", trial, L, threads);
            ck_schedule_free(&r.schedule);
        }
        ck_schedule_free(&one);
        ck_chain_free(&c);
    }
}
END_TEST

static Suite *dp_rows_suite(void)
{
    Suite *s = suite_create("dp_rows");
    TCase *tc = tcase_create("dp_rows");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, every_row_once_after_what_it_reads);
    tcase_add_test(tc, a_stop_ends_every_worker);
    tcase_add_test(tc, dp_is_the_same_on_any_number_of_workers);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(dp_rows_suite)
