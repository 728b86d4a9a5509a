/* safename: the file-name stems report --svg makes from model names. Whatever the names,
 * every stem is a plain visible file name (no '/', no leading '.', bounded), and different
 * names get different stems, also where case is ignored. */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/safename.h"
#include "planner/sha256.h"

#include "tests/unit/check_main.h"

static bool safe_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.';
}

static void assert_plain_file_name(const char *stem, const char *name)
{
    size_t len = strlen(stem);
    ck_assert_msg(len > 0 && len < CK_SAFE_STEM_MAX, "stem of '%s' has length %zu", name, len);
    ck_assert_msg(stem[0] != '.' && stem[0] != '-', "stem '%s' of '%s' starts with '%c'", stem,
                  name, stem[0]);
    for (size_t i = 0; i < len; i++)
        ck_assert_msg(safe_char(stem[i]), "stem '%s' of '%s' holds byte 0x%02x", stem, name,
                      (unsigned char)stem[i]);
}

static char (*sorted_stems)[CK_SAFE_STEM_MAX];

static int compare_stems(const void *a, const void *b)
{
    return strcasecmp(sorted_stems[*(const size_t *)a], sorted_stems[*(const size_t *)b]);
}

/* Stems for names[0..n): each a plain file name, all different regardless of case. */
static char (*stems_of(const char *const *names, size_t n))[CK_SAFE_STEM_MAX]
{
    char(*stems)[CK_SAFE_STEM_MAX] = malloc((n + 1) * sizeof *stems);
    ck_assert_ptr_nonnull(stems);
    ck_err err;
    ck_assert_int_eq(ck_safename_distinct_stems(names, n, stems, &err), CK_OK);
    for (size_t i = 0; i < n; i++)
        assert_plain_file_name(stems[i], names[i]);
    /* distinct: sorted regardless of case, no two neighbours equal */
    size_t *order = malloc((n + 1) * sizeof *order);
    ck_assert_ptr_nonnull(order);
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    sorted_stems = stems;
    qsort(order, n, sizeof *order, compare_stems);
    for (size_t k = 1; k < n; k++)
        ck_assert_msg(strcasecmp(stems[order[k - 1]], stems[order[k]]) != 0,
                      "'%s' and '%s' both get '%s'", names[order[k - 1]], names[order[k]],
                      stems[order[k]]);
    free(order);
    return stems;
}

static const char *const hostile[] = {
    "../pwned", "..", ".", "", ".hidden", "a/b", "a:b", "a\\b", "/etc/passwd", "a/b/../../c",
    "-rf", "esc\x1b[2J", "tab\there", "nl\nx", "del\x7f", "caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac",
    "bad\xff\xfe", "c1\xc2\x9b", "sp ace", "A", "a", "gpt2", "GPT2", "a_b", "unnamed",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxy",
};
#define N_HOSTILE (sizeof hostile / sizeof hostile[0])

START_TEST(hostile_names_give_plain_distinct_names)
{
    char(*stems)[CK_SAFE_STEM_MAX] = stems_of(hostile, N_HOSTILE);
    free(stems);
}
END_TEST

START_TEST(safe_names_are_kept_and_others_marked)
{
    char stem[CK_SAFE_STEM_MAX];
    const char *const kept_as_is[] = {"gpt2-tiny", "llama_7B.v2", "A"};
    for (size_t i = 0; i < 3; i++) {
        ck_safename_stem(kept_as_is[i], stem);
        ck_assert_str_eq(stem, kept_as_is[i]);
    }
    /* a changed name keeps what it can read and says it was changed with its hash */
    char hex[65];
    ck_sha256_hex("a/b", 3, hex);
    char want[32];
    snprintf(want, sizeof want, "a_b-%.8s", hex);
    ck_safename_stem("a/b", stem);
    ck_assert_str_eq(stem, want);
    ck_safename_stem("", stem);
    ck_assert_str_eq(stem, "unnamed-e3b0c442"); /* SHA-256 of nothing */
    ck_safename_stem("\xe6\x97\xa5\xe6\x9c\xac", stem); /* one '_' a character, not a byte */
    ck_assert_int_eq(strncmp(stem, "__-", 3), 0);
}
END_TEST

/* Names that give the same stem before the counter: a literal name that looks like a
 * changed one's stem, names equal but for case, and 4096 case variants of one word. */
START_TEST(collisions_get_counters)
{
    char changed[CK_SAFE_STEM_MAX];
    ck_safename_stem("a/b", changed); /* "a_b-<hash>", itself a safe name */
    const char *const names[] = {"a/b", changed, "a_b", "A_B"};
    char(*stems)[CK_SAFE_STEM_MAX] = stems_of(names, 4);
    ck_assert_str_eq(stems[0], changed);
    ck_assert_str_ne(stems[1], changed);
    ck_assert_str_eq(stems[2], "a_b");
    ck_assert_str_eq(stems[3], "A_B-2");
    free(stems);

    enum { WORD = 12, VARIANTS = 1 << WORD };
    char(*variants)[WORD + 1] = malloc(VARIANTS * sizeof *variants);
    const char **many = malloc(VARIANTS * sizeof *many);
    ck_assert(variants && many);
    for (size_t v = 0; v < VARIANTS; v++) {
        for (size_t i = 0; i < WORD; i++)
            variants[v][i] = (char)((v >> i & 1) ? 'A' : 'a');
        variants[v][WORD] = '\0';
        many[v] = variants[v];
    }
    stems = stems_of(many, VARIANTS);
    free(stems);
    free(many);
    free(variants);
}
END_TEST

/* The stem of a name does not depend on the other names unless they collide. */
START_TEST(stems_depend_on_the_name)
{
    const char *const forward[] = {"../pwned", "gpt2", ""};
    const char *const backward[] = {"", "gpt2", "../pwned"};
    char(*a)[CK_SAFE_STEM_MAX] = stems_of(forward, 3);
    char(*b)[CK_SAFE_STEM_MAX] = stems_of(backward, 3);
    for (size_t i = 0; i < 3; i++)
        ck_assert_str_eq(a[i], b[2 - i]);
    free(a);
    free(b);
}
END_TEST

/* Random byte strings (no NUL), many of them near the length limit. */
START_TEST(random_names)
{
    enum { N = 5000, LEN = 100 };
    char(*text)[LEN + 1] = malloc(N * sizeof *text);
    const char **names = malloc(N * sizeof *names);
    ck_assert(text && names);
    unsigned long long x = 88172645463325252ull;
    for (size_t i = 0; i < N; i++) {
        size_t len = (size_t)(i % (LEN + 1));
        for (size_t k = 0; k < len; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            text[i][k] = (char)(1 + x % 255);
        }
        text[i][len] = '\0';
        /* "<i>/<random bytes>" (or "<i>" alone): different names, whatever the bytes */
        snprintf(text[i], 8, "%zu", i);
        text[i][strlen(text[i])] = len > 8 ? '/' : '\0';
        names[i] = text[i];
    }
    free(stems_of(names, N));
    free(names);
    free(text);
}
END_TEST

static Suite *safename_suite(void)
{
    Suite *s = suite_create("safename");
    TCase *tc = tcase_create("safename");
    tcase_add_test(tc, hostile_names_give_plain_distinct_names);
    tcase_add_test(tc, safe_names_are_kept_and_others_marked);
    tcase_add_test(tc, collisions_get_counters);
    tcase_add_test(tc, stems_depend_on_the_name);
    tcase_add_test(tc, random_names);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(safename_suite)
