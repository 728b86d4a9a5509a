/* runs: reading a runs file, whose records sim/record.h parses, for `ckplan report`. */
#ifndef CK_RUNS_H
#define CK_RUNS_H

#include <stdatomic.h>
#include <stdio.h>

#include "planner/err.h"
#include "sim/record.h"

/* Reads path, once (it may be a FIFO). A file that cannot be read, or a plan file given
 * for a runs file, is CK_ERR_INPUT in err; a corrupt line is
 * reported on `warn` as "ckplan: FILE:LINE: [JSON path: ]what is wrong (line skipped)",
 * counted in n_bad and skipped. Out of memory is CK_ERR_RUNTIME. interrupt (or NULL) is
 * polled before each line and at the end: once it is set, the result is CK_INTERRUPTED
 * and nothing is kept. Free with ck_record_runs_free. */
int ck_runs_read(const char *path, FILE *warn, const atomic_int *interrupt, ck_runs *out,
                 ck_err *err);

#endif
