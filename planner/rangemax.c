#include "planner/rangemax.h"

#include <stdlib.h>
#include <string.h>

uint64_t ck_rangemax_sat_add(uint64_t a, uint64_t b)
{
    return a > CK_SAT - b ? CK_SAT : a + b;
}

uint64_t ck_rangemax_sat_sub(uint64_t a, uint64_t b)
{
    return a == CK_SAT ? CK_SAT : a - b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

int ck_rangemax_init(ck_rangemax *r, const uint64_t *values, size_t n, ck_err *err)
{
    size_t levels = 1;
    while ((size_t)1 << levels <= n)
        levels++;
    memset(r, 0, sizeof *r);
    if (n > SIZE_MAX / sizeof *r->table / levels)
        return ck_err_oom(err);
    r->table = malloc(n * levels * sizeof *r->table);
    if (!r->table)
        return ck_err_oom(err);
    r->n = n;
    r->levels = levels;
    memcpy(r->table, values, n * sizeof *values);
    for (size_t k = 1; k < levels; k++) {
        const uint64_t *below = r->table + (k - 1) * n;
        uint64_t *level = r->table + k * n;
        size_t half = (size_t)1 << (k - 1);
        for (size_t i = 0; i + 2 * half <= n; i++)
            level[i] = max_u64(below[i], below[i + half]);
    }
    return CK_OK;
}

uint64_t ck_rangemax_query(const ck_rangemax *r, size_t lo, size_t hi)
{
    if (lo > hi)
        return 0;
    size_t k = 63 - (size_t)__builtin_clzll((unsigned long long)(hi - lo + 1)); /* floor(log2) */
    const uint64_t *level = r->table + k * r->n;
    return max_u64(level[lo], level[hi + 1 - ((size_t)1 << k)]);
}

void ck_rangemax_free(ck_rangemax *r)
{
    free(r->table);
    memset(r, 0, sizeof *r);
}
