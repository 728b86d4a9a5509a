#include "planner/dimexpr.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "planner/size.h"

/* A recursive-descent parser over the grammar
 *     sum     = product { ("+" | "-") product }
 *     product = factor { ("*" | "/") factor }
 *     factor  = integer | name | "(" sum ")"
 * evaluating as it goes. Spaces are allowed between tokens. */
typedef struct {
    const char *text, *p;
    ck_dimexpr_lookup lookup;
    const void *ctx;
    int depth;
    char *why;
    size_t why_size;
} parser;

static bool failed(parser *ps, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->why, ps->why_size, fmt, ap);
    va_end(ap);
    return false;
}

/* "unexpected 'x' at character 4", or the byte in hex when it is not printable. */
static bool unexpected(parser *ps)
{
    unsigned char c = (unsigned char)*ps->p;
    size_t at = (size_t)(ps->p - ps->text) + 1;
    if (isgraph(c) && c < 0x80)
        return failed(ps, "unexpected '%c' at character %zu", c, at);
    return failed(ps, "unexpected byte 0x%02x at character %zu", c, at);
}

static void skip_spaces(parser *ps)
{
    while (*ps->p == ' ')
        ps->p++;
}

static bool sum(parser *ps, uint64_t *out);

static bool integer(parser *ps, uint64_t *out)
{
    uint64_t v = 0;
    while (isdigit((unsigned char)*ps->p))
        if (!ck_size_mul(v, 10, &v) || !ck_size_add(v, (uint64_t)(*ps->p++ - '0'), &v))
            return failed(ps, "a number overflows 64 bits");
    *out = v;
    return true;
}

static bool name(parser *ps, uint64_t *out)
{
    const char *start = ps->p;
    while (isalnum((unsigned char)*ps->p) || *ps->p == '_')
        ps->p++;
    size_t len = (size_t)(ps->p - start);
    if (len == 0) {
        if (*ps->p == '\0')
            return failed(ps, "it ends where a number, a dim or '(' was expected");
        return unexpected(ps);
    }
    if (!ps->lookup(ps->ctx, start, len, out))
        return failed(ps, "unknown dim \"%.*s\"", len > 200 ? 200 : (int)len, start);
    return true;
}

static bool factor(parser *ps, uint64_t *out)
{
    skip_spaces(ps);
    if (*ps->p != '(')
        return isdigit((unsigned char)*ps->p) ? integer(ps, out) : name(ps, out);
    if (++ps->depth > CK_DIMEXPR_MAX_DEPTH)
        return failed(ps, "parentheses nest deeper than %d", CK_DIMEXPR_MAX_DEPTH);
    ps->p++;
    if (!sum(ps, out))
        return false;
    skip_spaces(ps);
    if (*ps->p != ')')
        return failed(ps, "a '(' is not closed");
    ps->p++;
    ps->depth--;
    return true;
}

/* *acc = *acc op rhs, under the rules of the header. */
static bool apply(parser *ps, char op, uint64_t *acc, uint64_t rhs)
{
    unsigned long long a = *acc, b = rhs;
    switch (op) {
    case '+':
        return ck_size_add(*acc, rhs, acc) || failed(ps, "a sum overflows 64 bits");
    case '-':
        if (rhs > *acc)
            return failed(ps, "a subtraction goes below zero (%llu - %llu)", a, b);
        *acc -= rhs;
        return true;
    case '*':
        return ck_size_mul(*acc, rhs, acc) || failed(ps, "a product overflows 64 bits");
    default:
        if (rhs == 0)
            return failed(ps, "it divides by zero");
        if (*acc % rhs != 0)
            return failed(ps, "a division leaves a remainder (%llu / %llu)", a, b);
        *acc /= rhs;
        return true;
    }
}

/* A sum (level 0) or a product (level 1): operands of the next level joined by this
 * level's operators, applied left to right. */
static bool level(parser *ps, int lv, uint64_t *out)
{
    const char *ops = lv == 0 ? "+-" : "*/";
    if (!(lv == 0 ? level(ps, 1, out) : factor(ps, out)))
        return false;
    for (;;) {
        skip_spaces(ps);
        char op = *ps->p;
        if (op == '\0' || !strchr(ops, op))
            return true;
        ps->p++;
        uint64_t rhs;
        if (!(lv == 0 ? level(ps, 1, &rhs) : factor(ps, &rhs)) || !apply(ps, op, out, rhs))
            return false;
    }
}

static bool sum(parser *ps, uint64_t *out)
{
    return level(ps, 0, out);
}

bool ck_dimexpr_eval(const char *text, ck_dimexpr_lookup lookup, const void *ctx, uint64_t *out,
                     char *why, size_t why_size)
{
    parser ps = {text, text, lookup, ctx, 0, why, why_size};
    if (!sum(&ps, out))
        return false;
    skip_spaces(&ps);
    if (*ps.p == ')')
        return failed(&ps, "a ')' has no '('");
    if (*ps.p != '\0')
        return unexpected(&ps);
    return true;
}
