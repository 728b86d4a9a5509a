/* size: byte counts as people write them and read them, and overflow-checked arithmetic.
 *
 * Every size in ckplan is a uint64_t number of bytes. Every sum or product of sizes goes
 * through ck_size_add / ck_size_mul, which report overflow instead of wrapping. */
#ifndef CK_SIZE_H
#define CK_SIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/err.h"

/* *out = a + b; false on overflow (then *out is unspecified). */
bool ck_size_add(uint64_t a, uint64_t b, uint64_t *out);
/* *out = a * b; false on overflow. */
bool ck_size_mul(uint64_t a, uint64_t b, uint64_t *out);

/* Every number ckplan accepts must be one it can write and read back. JSON numbers are
 * doubles, exact for integers below 2^53: the JSON readers refuse integers from there on,
 * so every size ckplan takes in (budgets, the sizes of models and chains and the figures
 * derived from them, whatever else it records) is refused from this limit on. */
#define CK_EXACT_LIMIT (UINT64_C(1) << 53)
/* What a refusal says about the limit. */
#define CK_EXACT_LIMIT_WHY "sizes must stay below 2^53 bytes (8 PiB) so that JSON readers keep them exact"

/* Parses a size: plain bytes ("1048576"), or a decimal number with a unit: K M G T and
 * KiB MiB GiB TiB are powers of 1024, KB MB GB TB powers of 1000, B is bytes; units are
 * case-insensitive. The decimal is read exactly (no floating point): the value must be a
 * whole number of bytes whatever the unit ("1.0", "2.50K" = 2560 and "0.5K" = 512 are;
 * "1.5", "1.5B" and "0.3K" = 307.2 bytes are not) and below CK_EXACT_LIMIT.
 * Returns CK_OK, or CK_ERR_INPUT with a message saying why and naming the accepted forms. */
int ck_size_parse(const char *text, uint64_t *out, ck_err *err);

/* Writes a human-readable size with binary units ("8.0 GiB", "512 B") into buf. */
void ck_size_format(uint64_t bytes, char *buf, size_t len);

/* Rounds bytes up to whole units of `unit` bytes (unit >= 1). */
uint64_t ck_size_ceil_div(uint64_t bytes, uint64_t unit);

/* Makes room for one more item in the growable array *items of *cap items of item_size
 * bytes, n of them used: doubles it (from 64) when full. False when out of memory or past
 * SIZE_MAX (the array is left as it was). */
bool ck_size_reserve(void **items, size_t *cap, size_t n, size_t item_size);

#endif
