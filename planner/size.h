/* size: byte counts as people write them and read them, and overflow-checked arithmetic.
 *
 * Every size in ckplan is a uint64_t number of bytes. Every sum or product of sizes goes
 * through ck_add / ck_mul, which report overflow instead of wrapping. */
#ifndef CK_SIZE_H
#define CK_SIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/err.h"

/* *out = a + b; false on overflow (then *out is unspecified). */
bool ck_add(uint64_t a, uint64_t b, uint64_t *out);
/* *out = a * b; false on overflow. */
bool ck_mul(uint64_t a, uint64_t b, uint64_t *out);

/* Parses a budget: plain bytes ("1048576"), or a number, decimals allowed, with a unit:
 * K M G T and KiB MiB GiB TiB are powers of 1024, KB MB GB TB powers of 1000, B is bytes;
 * units are case-insensitive. A fractional result is rounded down to whole bytes.
 * Returns CK_OK, or CK_ERR_INPUT with a message naming the accepted forms. */
int ck_size_parse(const char *text, uint64_t *out, ck_err *err);

/* Writes a human-readable size with binary units ("8.0 GiB", "512 B") into buf. */
void ck_size_format(uint64_t bytes, char *buf, size_t len);

/* Rounds bytes up to whole units of `unit` bytes (unit >= 1). */
uint64_t ck_size_ceil_div(uint64_t bytes, uint64_t unit);

#endif
