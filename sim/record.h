/* record: the ckplan-run/1 records that `ckplan run` and `ckplan sweep` append to a runs
 * file, one JSON object a line (docs/run-format.md): made from what a run measured and
 * judged, and read back for `ckplan report`. Reading and writing the file are the
 * caller's; here are the lines.
 *
 * Every line is read on its own, so that one corrupt line (cut short by a crash, edited by
 * hand) costs only that line: it is reported with its line number and the others are kept.
 * The records come back as plain structs so that report and the charts read the same
 * figures the same way. */
#ifndef CK_RECORD_H
#define CK_RECORD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/err.h"
#include "planner/plan.h"
#include "planner/plan_check.h"
#include "planner/workload.h"
#include "sim/verify.h"

#define CK_RUN_FORMAT "ckplan-run/1"

/* ---- writing ---- */

/* What the record of a plan that ran says. */
typedef struct {
    const char *plan_path, *plan_sha; /* as the record names the plan; sha256 of its bytes */
    const ck_plan_file *plan;         /* with the replayed figures as its predicted ones */
    const ck_plan_check *check;       /* how the plan file's own figures differ from them */
    const ck_workload *w;
    uint64_t steps, threads, seed;
    bool stateful_rng, verify_performed;
    const ck_run_measure *baseline, *plan_run;
    double measured_overhead;
    const ck_verdict *verdict;
} ck_ran_record;

/* The records, one line of JSON each (no newline); NULL when out of memory. A plan that
 * ran; a plan made in memory and not run (plan_sha of its text); a budget the planner
 * cannot meet, with the smallest whole-step budget it can, for the model loaded with opts
 * (NULL: none). Each record's model.options are those of its plan, as the plan file
 * writes them (a layout's included). */
char *ck_record_ran(const ck_ran_record *r);
char *ck_record_planned(const ck_plan_file *p, const char *plan_sha, const ck_workload *w);
char *ck_record_infeasible(const char *planner, uint64_t budget, uint64_t min_budget,
                           const ck_workload *w, const char *granularity, const ck_model_opts *opts);

/* ---- reading ---- */

/* What a record says happened at its point. Records without "status" were written by
 * `run` before there were others, and are CK_RUN_RAN. */
typedef enum { CK_RUN_RAN, CK_RUN_PLANNED, CK_RUN_INFEASIBLE } ck_run_status;

/* One record. Fields a status does not have are 0 (and the has_ flags false). */
typedef struct {
    size_t line; /* 1-based line of the runs file */
    ck_run_status status;
    char *time, *model, *planner; /* owned */
    char *options; /* owned: model.options as ck_model_opts_text writes them, "" for none */
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
    size_t n_bad;   /* of them, refused (each reported to `bad_line`) */
} ck_runs;

/* Told of each line refused, with "FILE:LINE: [JSON path: ]what is wrong". */
typedef void ck_record_bad_line(void *ctx, const char *msg);

/* Parses the len bytes of text, the contents of the runs file `path` (for messages). A
 * corrupt line is reported to bad_line (or NULL), counted in n_bad and skipped. Out of
 * memory is CK_ERR_RUNTIME. interrupt (or NULL) is polled before each line and at the end:
 * once it is set, the result is CK_INTERRUPTED and nothing is kept. */
int ck_record_parse_runs(const char *path, const char *text, size_t len,
                         ck_record_bad_line *bad_line, void *ctx, const atomic_int *interrupt,
                         ck_runs *out, ck_err *err);
void ck_record_runs_free(ck_runs *r);

/* "passed", "FAILED", "not checked", "infeasible" or "planned only". */
const char *ck_record_outcome(const ck_run_row *r);

#endif
