/* chart: SVG charts of plans, for people to look at.
 *
 * Each chart is one standalone SVG 1.1 document: no script, no external resource, generic
 * sans-serif fonts, so that it opens the same in a browser, an image viewer or a report.
 * Text given by the caller (titles, labels, planner names) is escaped for XML.
 *
 * Every series is a <g class="series"> whose <title> names it, and every legend entry a
 * <g class="legend-item"> whose <text> names it, so that tests (tests/cli/check_svg.py) can
 * find them. */
#ifndef CK_CHART_H
#define CK_CHART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/err.h"
#include "planner/schedule.h"

/* One schedule's memory timeline: live activation bytes after each of its operations. */
typedef struct {
    const char *label;           /* panel title, e.g. "plan (dp)" or "baseline" */
    const ck_schedule *schedule; /* at least one operation */
    const uint64_t *predicted;   /* schedule->n entries: ck_schedule_replay's live_after */
    const uint64_t *measured;    /* schedule->n entries (ck_exec_trace's live_after), or NULL */
} ck_chart_timeline;

/* The memory timeline chart: x is the operation index, y the live activation bytes after
 * each operation. The plan's panel comes first and, when baseline is non-NULL, the
 * baseline's panel beside it with its own x range and the same y scale. Predicted bytes
 * are a line, measured ones markers on it (so exact agreement shows as markers sitting on
 * the line). Forward and backward phases (before and after the loss operation) are shaded
 * differently; under the x axis a band marks recomputing forward operations (every forward
 * operation after the loss) and F_ck/F_none operations of the first forward (activations
 * dropped). budget (activation bytes, the planners' budget) is drawn as a labelled line
 * when non-zero. On success *svg (caller frees) holds *len bytes and a terminating NUL. */
int ck_chart_memory_svg(const char *title, const ck_chart_timeline *plan,
                        const ck_chart_timeline *baseline, uint64_t budget, char **svg,
                        size_t *len, ck_err *err);
/* The same, written atomically to path. */
int ck_chart_memory_write(const char *path, const char *title, const ck_chart_timeline *plan,
                          const ck_chart_timeline *baseline, uint64_t budget, ck_err *err);

/* One point of the trade-off chart. */
typedef struct {
    const char *planner; /* series name: points with the same name form one series */
    uint64_t peak_bytes; /* x */
    double overhead_pct; /* y: time over the baseline's, in percent (may be negative) */
    bool measured;       /* measured by a run rather than predicted */
} ck_chart_point;

/* The memory/time trade-off chart: x is peak bytes (x_label says which peak, default
 * "activation peak" when NULL), y the overhead in percent. One polyline per planner through
 * its predicted points sorted by peak, each planner with its own colour and marker; measured
 * points of a planner are hollow markers joined by a dashed line. n >= 1. */
int ck_chart_tradeoff_svg(const char *title, const char *x_label, const ck_chart_point *pts,
                          size_t n, char **svg, size_t *len, ck_err *err);
/* The same written to path, a name report made inside --svg DIR: whatever is at path, a
 * symbolic link included, is replaced, never written through (ck_files_write_in_dir). */
int ck_chart_tradeoff_write(const char *path, const char *title, const char *x_label,
                            const ck_chart_point *pts, size_t n, ck_err *err);

/* The memory timeline of a plan and of its store-everything baseline on chain c, with the
 * predicted live bytes replayed here and the measured ones when given (arrays of each
 * schedule's length, or NULL), written atomically to path. budget is in activation bytes. */
int ck_chart_schedules_write(const char *path, const char *title, const ck_chain *c,
                             const char *plan_label, const ck_schedule *plan,
                             const uint64_t *plan_measured, const uint64_t *baseline_measured,
                             uint64_t budget, ck_err *err);

#endif
