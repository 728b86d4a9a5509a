#include "planner/ttype.h"

#include <stdio.h>

#include "planner/size.h"

bool ck_ttype_numel(const ck_ttype *t, uint64_t *out)
{
    uint64_t n = 1;
    for (size_t i = 0; i < t->rank; i++)
        if (!ck_size_mul(n, t->dim[i], &n))
            return false;
    *out = n;
    return true;
}

bool ck_ttype_bytes(const ck_ttype *t, uint64_t *out)
{
    uint64_t n;
    return ck_ttype_numel(t, &n) && ck_size_mul(n, ck_dtype_bytes(t->dtype), out);
}

void ck_ttype_format(const ck_ttype *t, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "%s [", ck_dtype_name(t->dtype));
    for (size_t i = 0; i < t->rank && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%llu", i ? ", " : "",
                                 (unsigned long long)t->dim[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
}
