#include "planner/size.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

bool ck_add(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

bool ck_mul(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

uint64_t ck_size_ceil_div(uint64_t bytes, uint64_t unit)
{
    return bytes / unit + (bytes % unit != 0);
}

static const struct {
    const char *suffix;
    uint64_t base;
    int power;
} size_units[] = {
    {"", 1, 0},     {"b", 1, 0},
    {"k", 1024, 1}, {"kib", 1024, 1}, {"kb", 1000, 1},
    {"m", 1024, 2}, {"mib", 1024, 2}, {"mb", 1000, 2},
    {"g", 1024, 3}, {"gib", 1024, 3}, {"gb", 1000, 3},
    {"t", 1024, 4}, {"tib", 1024, 4}, {"tb", 1000, 4},
};

static int size_usage(ck_err *err, const char *text, const char *why)
{
    return ck_fail(err, CK_ERR_INPUT,
                   "invalid size '%s' (%s): expected bytes (1048576) or a number with a "
                   "unit: K M G T or KiB MiB GiB TiB (powers of 1024), KB MB GB TB "
                   "(powers of 1000), e.g. 8G, 1.5GiB, 500MB",
                   text, why);
}

int ck_size_parse(const char *text, uint64_t *out, ck_err *err)
{
    /* Digits, at most one '.', then a unit: parsed by hand so that "0x10", "1e3", " 8G",
     * "-1" and "inf", which strtod would accept, are rejected. */
    const char *p = text;
    uint64_t whole = 0;
    int n_digits = 0;
    while (isdigit((unsigned char)*p)) {
        if (!ck_mul(whole, 10, &whole) || !ck_add(whole, (uint64_t)(*p - '0'), &whole))
            return size_usage(err, text, "too large");
        p++;
        n_digits++;
    }
    uint64_t frac_num = 0, frac_den = 1;
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            if (frac_den < 1000000000000ULL) { /* 12 decimals are plenty for bytes */
                frac_num = frac_num * 10 + (uint64_t)(*p - '0');
                frac_den *= 10;
            }
            p++;
            n_digits++;
        }
    }
    if (n_digits == 0)
        return size_usage(err, text, "no number");
    for (size_t i = 0; i < sizeof size_units / sizeof size_units[0]; i++) {
        if (strcasecmp(p, size_units[i].suffix) != 0)
            continue;
        uint64_t scale = 1;
        for (int k = 0; k < size_units[i].power; k++)
            scale *= size_units[i].base;
        uint64_t bytes;
        if (!ck_mul(whole, scale, &bytes))
            return size_usage(err, text, "larger than 2^64 bytes");
        /* frac_num/frac_den < 1 and scale <= 2^40, so frac_num * scale fits only if we
         * divide first where needed; long double keeps 64 bits of mantissa. */
        long double frac_bytes = (long double)frac_num * (long double)scale / (long double)frac_den;
        if (!ck_add(bytes, (uint64_t)floorl(frac_bytes), &bytes))
            return size_usage(err, text, "larger than 2^64 bytes");
        if (*p == '\0' && frac_den != 1)
            return size_usage(err, text, "a fraction of a byte");
        *out = bytes;
        return CK_OK;
    }
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
