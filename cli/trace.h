/* trace: executed steps as Chrome trace-event JSON, for chrome://tracing, Perfetto
 * (ui.perfetto.dev) or speedscope.
 *
 * The document is the "JSON object format": {"traceEvents": [...], "displayTimeUnit": "ms"}.
 * Each run is one process (pid 1, 2, ... in the order given, named by its label) with one
 * thread of complete events ("ph": "X", ts and dur in microseconds since the step started),
 * one per operation, named like "F_all h.3", "loss" or "B lm_head", with the operation kind
 * as category; and, when the run has live bytes, a counter track ("ph": "C") named
 * "live activation bytes" holding the tracked bytes after every operation (and x_0's bytes
 * at time 0). Runs share the time origin, so a plan and its baseline line up. */
#ifndef CK_TRACE_H
#define CK_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "planner/chain.h"
#include "planner/err.h"
#include "planner/schedule.h"

typedef struct {
    const char *label;           /* process name, e.g. "plan (dp)" or "baseline" */
    const ck_chain *chain;       /* stage names, x_0's size */
    const ck_schedule *schedule; /* the operations that were executed */
    const double *start;         /* schedule->n entries: ck_exec_trace's start (seconds) */
    const double *seconds;       /* schedule->n entries: ck_exec_trace's seconds */
    const uint64_t *live_after;  /* schedule->n entries (ck_exec_trace's live_after), or NULL */
} ck_trace_run;

/* The trace of n_runs >= 1 runs. On success *json (caller frees) holds *len bytes and a
 * terminating NUL. Times must be finite and non-negative, stages within the chain. */
int ck_trace_json(const ck_trace_run *runs, size_t n_runs, char **json, size_t *len,
                  ck_err *err);
/* The same, written atomically to path. */
int ck_trace_write(const char *path, const ck_trace_run *runs, size_t n_runs, ck_err *err);

#endif
