/* err: the status codes every fallible function returns, and the error record it fills.
 *
 * Status values are the process exit codes of the command line (see docs/), so that a
 * status can travel up unchanged from the function that detected the problem to main().
 * Below cli/ nothing prints and nothing exits: a function sets the message and returns. */
#ifndef CK_ERR_H
#define CK_ERR_H

#include <stdatomic.h>

enum {
    CK_OK = 0,
    CK_ERR_RUNTIME = 1,    /* verification or runtime failure (also: out of memory) */
    CK_ERR_INPUT = 2,      /* usage or input error */
    CK_ERR_INFEASIBLE = 3, /* the budget cannot be met */
    CK_INTERRUPTED = 130   /* stopped by a signal: main exits 128 + its number, as shells
                              say (cli/interrupt.h), which for SIGINT (Ctrl-C) is this */
};

typedef struct {
    char msg[1024];
} ck_err;

/* Formats the message into err (if err is non-NULL) and returns status, so that callers
 * can write `return ck_err_fail(err, CK_ERR_INPUT, "%s: ...", file);`. */
int ck_err_fail(ck_err *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The out-of-memory failure, worded once for the whole program. */
int ck_err_oom(ck_err *err);

/* What long loops below cli/ poll: CK_INTERRUPTED with the message "interrupted" once *stop
 * is non-zero (a signal handler in cli/ sets it), else CK_OK. A NULL stop is never set. */
int ck_err_check_stop(const atomic_int *stop, ck_err *err);

#endif
