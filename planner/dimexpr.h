/* dimexpr: size expressions, the arithmetic that model files write sizes in ("4*C",
 * "(H+2*KV)*D", "C/H"): positive integers, dim names, + - * / and parentheses, with the
 * usual precedence, left to right. Every intermediate value is a whole number in
 * [0, 2^64): a subtraction below zero, a division that leaves a remainder or divides by
 * zero, and a product or sum past 64 bits are errors, so a size is exact or refused. */
#ifndef CK_DIMEXPR_H
#define CK_DIMEXPR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parentheses nest at most this deep. */
#define CK_DIMEXPR_MAX_DEPTH 32

/* Looks up the dim called name[0, len): true and *value set, or false if there is none. */
typedef bool (*ck_dimexpr_lookup)(const void *ctx, const char *name, size_t len, uint64_t *value);

/* Evaluates text into *out. On failure returns false and writes what went wrong, without
 * the text itself, into why (at most why_size bytes): "unknown dim \"Q\"", "C/7 leaves a
 * remainder (768 = 7*109 + 5)". The result may be 0; callers that need a positive size say
 * so. */
bool ck_dimexpr_eval(const char *text, ck_dimexpr_lookup lookup, const void *ctx, uint64_t *out,
                     char *why, size_t why_size);

#endif
