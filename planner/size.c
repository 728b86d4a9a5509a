#include "planner/size.h"

#include <stdlib.h>

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

bool ck_size_add(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

bool ck_size_mul(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

uint64_t ck_size_ceil_div(uint64_t bytes, uint64_t unit)
{
    return bytes / unit + (bytes % unit != 0);
}

/* A unit multiplies by 2^twos * 5^fives (1024^p = 2^10p, 1000^p = 2^3p * 5^3p): kept as
 * factors so that the 10^d of d decimals can be divided out exactly. */
typedef struct {
    const char *suffix;
    unsigned twos, fives;
} size_unit;

static const size_unit size_units[] = {
    {"", 0, 0},   {"b", 0, 0},
    {"k", 10, 0}, {"kib", 10, 0}, {"kb", 3, 3},
    {"m", 20, 0}, {"mib", 20, 0}, {"mb", 6, 6},
    {"g", 30, 0}, {"gib", 30, 0}, {"gb", 9, 9},
    {"t", 40, 0}, {"tib", 40, 0}, {"tb", 12, 12},
};

/* Significant digits worth keeping: with at most 40 decimals (see exact_bytes), more
 * digits than this make at least 10^40 bytes. */
#define SIZE_MAX_DIGITS 80

static int size_usage(ck_err *err, const char *text, const char *why)
{
    return ck_err_fail(err, CK_ERR_INPUT,
                   "invalid size '%s' (%s): expected bytes (1048576) or a number with a "
                   "unit: K M G T or KiB MiB GiB TiB (powers of 1024), KB MB GB TB "
                   "(powers of 1000), e.g. 8G, 1.5GiB, 500MB",
                   text, why);
}

static int size_too_large(ck_err *err, const char *text)
{
    return size_usage(err, text, "too large: " CK_EXACT_LIMIT_WHY);
}

/* Divides the decimal digits d[0..n) (most significant first) by `by` in place; returns
 * the remainder. */
static unsigned divide_digits(char *d, size_t n, unsigned by)
{
    unsigned rem = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned cur = rem * 10 + (unsigned)(d[i] - '0');
        d[i] = (char)('0' + cur / by);
        rem = cur % by;
    }
    return rem;
}

/* Divides the mantissa by `prime`, out of the unit's factors while it has some (*left of
 * them), else out of the digits; false when that leaves a remainder. */
static bool divide_out(unsigned *left, char *digits, size_t n, unsigned prime)
{
    if (*left) {
        (*left)--;
        return true;
    }
    return divide_digits(digits, n, prime) == 0;
}

/* The value of the digits in [start, end) (perhaps one '.' among them, with `decimals`
 * digits after it, the last of which is not 0) times the unit, when it is a whole number of
 * bytes below CK_EXACT_LIMIT. */
static int exact_bytes(const char *text, const char *start, const char *end, size_t decimals,
                       const size_unit *u, uint64_t *out, ck_err *err)
{
    /* The mantissa does not end in 0, so it lacks a factor 2 or a factor 5: dividing by
     * 10^decimals leaves a fraction unless the unit supplies that many. */
    if (decimals > u->twos && decimals > u->fives)
        return size_usage(err, text, "not a whole number of bytes");
    char digits[SIZE_MAX_DIGITS];
    size_t n = 0;
    for (const char *q = start; q < end; q++) {
        if (*q == '.' || (n == 0 && *q == '0'))
            continue;
        if (n == SIZE_MAX_DIGITS)
            return size_too_large(err, text);
        digits[n++] = *q;
    }
    unsigned twos = u->twos, fives = u->fives;
    for (size_t k = 0; k < decimals; k++)
        if (!divide_out(&twos, digits, n, 2) || !divide_out(&fives, digits, n, 5))
            return size_usage(err, text, "not a whole number of bytes");
    uint64_t bytes = 0, scale = UINT64_C(1) << twos;
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++)
        ok = ck_size_mul(bytes, 10, &bytes) && ck_size_add(bytes, (uint64_t)(digits[i] - '0'), &bytes);
    while (fives--)
        scale *= 5; /* at most 2^40 or 10^12 */
    if (!ok || !ck_size_mul(bytes, scale, &bytes) || bytes >= CK_EXACT_LIMIT)
        return size_too_large(err, text);
    *out = bytes;
    return CK_OK;
}

int ck_size_parse(const char *text, uint64_t *out, ck_err *err)
{
    /* Digits, at most one '.', then a unit: parsed by hand so that "0x10", "1e3", " 8G",
     * "-1" and "inf", which strtod would accept, are refused, and read exactly. */
    const char *p = text;
    size_t n_digits = 0, decimals = 0;
    while (isdigit((unsigned char)*p))
        p++, n_digits++;
    const char *significant_end = p; /* trailing zeros of decimals do not count: 2.50 is 2.5 */
    if (*p == '.') {
        const char *first_decimal = ++p;
        for (; isdigit((unsigned char)*p); p++, n_digits++)
            if (*p != '0')
                significant_end = p + 1;
        if (significant_end > first_decimal)
            decimals = (size_t)(significant_end - first_decimal);
    }
    if (n_digits == 0)
        return size_usage(err, text, "no number");
    for (size_t i = 0; i < sizeof size_units / sizeof size_units[0]; i++)
        if (strcasecmp(p, size_units[i].suffix) == 0)
            return exact_bytes(text, text, significant_end, decimals, &size_units[i], out, err);
    return size_usage(err, text, "unknown unit");
}

void ck_size_format(uint64_t bytes, char *buf, size_t len)
{
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
        return;
    }
    double v = (double)bytes;
    int u = -1;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, len, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
}

bool ck_size_reserve(void **items, size_t *cap, size_t n, size_t item_size)
{
    if (n < *cap)
        return true;
    size_t grown = *cap ? 2 * *cap : 64;
    if (grown < *cap || grown > SIZE_MAX / item_size)
        return false;
    void *p = realloc(*items, grown * item_size);
    if (!p)
        return false;
    *items = p;
    *cap = grown;
    return true;
}
