#include "planner/err.h"

#include <stdarg.h>
#include <stdio.h>

int ck_err_fail(ck_err *err, int status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return status;
}

int ck_err_oom(ck_err *err)
{
    return ck_err_fail(err, CK_ERR_RUNTIME, "out of memory");
}

int ck_err_check_stop(const atomic_int *stop, ck_err *err)
{
    return stop && atomic_load(stop) ? ck_err_fail(err, CK_INTERRUPTED, "interrupted") : CK_OK;
}
