/* Size expressions against an independent evaluator: random expression trees are printed
 * with as few parentheses as precedence allows (plus random redundant ones and spaces),
 * parsed by ck_dimexpr_eval, and compared with the tree's own evaluation in 128-bit
 * arithmetic under the documented rules. */
#include "planner/dimexpr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_main.h"

static const struct {
    const char *name;
    uint64_t value;
} dims[] = {{"A", 7}, {"B2", 12}, {"C", 4096}, {"zero", 0}, {"big_one", (uint64_t)1 << 63}};

static bool lookup(const void *ctx, const char *name, size_t len, uint64_t *value)
{
    (void)ctx;
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (strlen(dims[i].name) == len && strncmp(dims[i].name, name, len) == 0) {
            *value = dims[i].value;
            return true;
        }
    return false;
}

typedef struct tree {
    char op; /* 0: a leaf */
    uint64_t value;
    const char *name; /* a leaf's dim, or NULL for a number */
    struct tree *l, *r;
} tree;

static unsigned rng_state = 12345;
static unsigned next_rand(void)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return rng_state >> 8;
}

static tree *random_tree(int depth)
{
    static const uint64_t numbers[] = {0, 1, 2, 3, 5, 8, 64, 4096, (uint64_t)1 << 32, UINT64_MAX};
    tree *t = calloc(1, sizeof *t);
    ck_assert_ptr_nonnull(t);
    if (depth == 0 || next_rand() % 3 == 0) {
        if (next_rand() % 2) {
            size_t i = next_rand() % (sizeof dims / sizeof dims[0]);
            t->name = dims[i].name;
            t->value = dims[i].value;
        } else {
            t->value = numbers[next_rand() % (sizeof numbers / sizeof numbers[0])];
        }
        return t;
    }
    t->op = "+-*/"[next_rand() % 4];
    t->l = random_tree(depth - 1);
    t->r = random_tree(depth - 1);
    return t;
}

static void free_tree(tree *t)
{
    if (t) {
        free_tree(t->l);
        free_tree(t->r);
        free(t);
    }
}

/* Left to right, depth first, as a parser that evaluates as it reads: the first rule broken
 * makes the whole expression fail. */
static bool evaluate(const tree *t, uint64_t *out)
{
    if (!t->op) {
        *out = t->value;
        return true;
    }
    uint64_t a, b;
    if (!evaluate(t->l, &a) || !evaluate(t->r, &b))
        return false;
    unsigned __int128 wide;
    switch (t->op) {
    case '+': wide = (unsigned __int128)a + b; break;
    case '*': wide = (unsigned __int128)a * b; break;
    case '-':
        if (b > a)
            return false;
        wide = a - b;
        break;
    default:
        if (b == 0 || a % b)
            return false;
        wide = a / b;
    }
    if (wide > UINT64_MAX)
        return false;
    *out = (uint64_t)wide;
    return true;
}

static int precedence(char op)
{
    return op == '+' || op == '-' ? 1 : op ? 2 : 3;
}

static void print_tree(const tree *t, char *buf, size_t size, size_t *used, bool parens)
{
    const char *space = next_rand() % 4 == 0 ? " " : "";
    if (parens || next_rand() % 8 == 0) {
        *used += (size_t)snprintf(buf + *used, size - *used, "(%s", space);
        print_tree(t, buf, size, used, false);
        *used += (size_t)snprintf(buf + *used, size - *used, "%s)", space);
        return;
    }
    if (!t->op) {
        if (t->name)
            *used += (size_t)snprintf(buf + *used, size - *used, "%s", t->name);
        else
            *used += (size_t)snprintf(buf + *used, size - *used, "%llu", (unsigned long long)t->value);
        return;
    }
    print_tree(t->l, buf, size, used, precedence(t->l->op) < precedence(t->op));
    *used += (size_t)snprintf(buf + *used, size - *used, "%s%c%s", space, t->op, space);
    /* equal precedence on the right needs parentheses: a-(b-c), and a*(b*c) whose inner
     * product may overflow where (a*b)*c does not */
    print_tree(t->r, buf, size, used, precedence(t->r->op) <= precedence(t->op));
}

START_TEST(random_expressions_match_a_tree_evaluation)
{
    int agreed_ok = 0, agreed_fail = 0;
    for (int i = 0; i < 20000; i++) {
        tree *t = random_tree(1 + i % 5);
        char text[4096], why[256] = "";
        size_t used = 0;
        print_tree(t, text, sizeof text, &used, false);
        ck_assert_uint_lt(used, sizeof text);
        uint64_t want = 0, got = 0;
        bool want_ok = evaluate(t, &want);
        bool got_ok = ck_dimexpr_eval(text, lookup, NULL, &got, why, sizeof why);
        ck_assert_msg(got_ok == want_ok, "%s: parser %s (%s), tree %s", text,
                      got_ok ? "accepts" : "refuses", why, want_ok ? "accepts" : "refuses");
        if (want_ok)
            ck_assert_msg(got == want, "%s: %llu, expected %llu", text, (unsigned long long)got,
                          (unsigned long long)want);
        want_ok ? agreed_ok++ : agreed_fail++;
        free_tree(t);
    }
    /* both outcomes are well represented, so neither half of the comparison is idle */
    ck_assert_int_gt(agreed_ok, 2000);
    ck_assert_int_gt(agreed_fail, 2000);
}
END_TEST

static uint64_t eval_ok(const char *text)
{
    uint64_t v = 0;
    char why[256] = "";
    ck_assert_msg(ck_dimexpr_eval(text, lookup, NULL, &v, why, sizeof why), "%s: %s", text, why);
    return v;
}

static void eval_refused(const char *text, const char *why_part)
{
    uint64_t v = 0;
    char why[256] = "";
    ck_assert_msg(!ck_dimexpr_eval(text, lookup, NULL, &v, why, sizeof why), "%s accepted", text);
    ck_assert_msg(strstr(why, why_part), "%s: '%s' lacks '%s'", text, why, why_part);
}

START_TEST(precedence_and_examples)
{
    ck_assert_uint_eq(eval_ok("(32+2*8)*128"), 6144); /* a LLaMA-style packed qkv width */
    ck_assert_uint_eq(eval_ok("C/32"), 128);
    ck_assert_uint_eq(eval_ok("A+B2*2"), 31);
    ck_assert_uint_eq(eval_ok("C - 4*A - 1"), 4067);
    ck_assert_uint_eq(eval_ok("C/8/2"), 256); /* left to right: (C/8)/2 */
    ck_assert_uint_eq(eval_ok(" ( ( A ) ) "), 7);
    ck_assert_uint_eq(eval_ok("zero"), 0); /* callers decide that a size must be positive */
}
END_TEST

START_TEST(errors_say_what_is_wrong)
{
    eval_refused("C/3", "a division leaves a remainder (4096 / 3)");
    eval_refused("C/zero", "divides by zero");
    eval_refused("A-B2", "goes below zero (7 - 12)");
    eval_refused("big_one*2", "a product overflows 64 bits");
    eval_refused("big_one+big_one", "a sum overflows 64 bits");
    eval_refused("18446744073709551616", "a number overflows 64 bits");
    eval_refused("4*Q", "unknown dim \"Q\"");
    eval_refused("(A+1", "a '(' is not closed");
    eval_refused("A+1)", "a ')' has no '('");
    eval_refused("A+", "it ends where a number, a dim or '(' was expected");
    eval_refused("", "it ends where");
    eval_refused("A%2", "unexpected '%' at character 2");
    eval_refused("A\x01", "unexpected byte 0x01 at character 2");
    eval_refused("2 3", "unexpected '3' at character 3");
    char deep[128] = "";
    for (int i = 0; i <= CK_DIMEXPR_MAX_DEPTH; i++)
        strcat(deep, "(");
    strcat(deep, "1");
    eval_refused(deep, "parentheses nest deeper than");
}
END_TEST

static Suite *dimexpr_suite(void)
{
    Suite *s = suite_create("dimexpr");
    TCase *tc = tcase_create("dimexpr");
    tcase_add_test(tc, random_expressions_match_a_tree_evaluation);
    tcase_add_test(tc, precedence_and_examples);
    tcase_add_test(tc, errors_say_what_is_wrong);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(dimexpr_suite)
