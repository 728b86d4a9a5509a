/* runs: reading the records that `ckplan run` and `ckplan sweep` append to a runs file
 * (ckplan-run/1, one JSON object a line; docs/run-format.md).
 *
 * Every line is read on its own, so that one corrupt line (cut short by a crash, edited by
 * hand) costs only that line: it is reported with its line number and the others are kept.
 * The records come back as plain structs so that report and the charts read the same
 * figures the same way. */
#ifndef CK_RUNS_H
#define CK_RUNS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "planner/err.h"

#define CK_RUN_FORMAT "ckplan-run/1"

/* What a record says happened at its point. Records without "status" were written by
 * `run` before there were others, and are CK_RUN_RAN. */
typedef enum { CK_RUN_RAN, CK_RUN_PLANNED, CK_RUN_INFEASIBLE } ck_run_status;

/* One record. Fields a status does not have are 0 (and the has_ flags false). */
typedef struct {
    size_t line; /* 1-based line of the runs file */
    ck_run_status status;
    char *time, *model, *planner; /* owned */
    uint64_t budget_bytes;
    uint64_t min_budget_bytes; /* infeasible: the planner's smallest whole-step budget */
    bool has_predicted;        /* ran, planned */
    uint64_t predicted_peak, predicted_baseline_peak, static_bytes;
    double predicted_time, predicted_baseline_time, predicted_overhead;
    bool has_measured; /* ran */
    uint64_t measured_peak, measured_rss, baseline_peak, baseline_rss;
    double measured_time, baseline_time, measured_overhead;
    bool verify_performed, verify_passed;
} ck_run_row;

typedef struct {
    ck_run_row *rows;
    size_t n;
    size_t n_lines; /* non-blank lines read */
    size_t n_bad;   /* of them, refused (each reported on `warn`) */
} ck_runs;

/* Reads path. A file that cannot be read is CK_ERR_INPUT in err; a corrupt line is
 * reported on `warn` as "ckplan: FILE:LINE: [JSON path: ]what is wrong", counted in n_bad
 * and skipped. Out of memory is CK_ERR_RUNTIME. interrupt (or NULL) is polled before each
 * line and at the end: once it is set, the result is CK_INTERRUPTED and nothing is kept. */
int ck_runs_read(const char *path, FILE *warn, const atomic_int *interrupt, ck_runs *out,
                 ck_err *err);
void ck_runs_free(ck_runs *r);

/* "passed", "FAILED", "not checked", "infeasible" or "planned only". */
const char *ck_runs_outcome(const ck_run_row *r);

#endif
