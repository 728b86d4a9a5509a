#include "planner/index.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/check_main.h"

static void index_names(ck_index *ix, const char *const *names, size_t n)
{
    ck_assert(ck_index_alloc(ix, n));
    for (size_t i = 0; i < n; i++)
        ck_index_set_name(ix, i, names[i]);
    ck_index_sort(ix);
}

START_TEST(finds_each_name_and_only_those)
{
    static const char *const names[] = {"wte", "h", "ln_f", "lm_head", "x", "a", "ab", "b"};
    ck_index ix;
    index_names(&ix, names, 8);
    for (size_t i = 0; i < 8; i++)
        ck_assert_uint_eq(ck_index_find_name(&ix, names[i]), i);
    ck_assert_uint_eq(ck_index_find_name(&ix, "abc"), CK_INDEX_NONE);
    ck_assert_uint_eq(ck_index_find_name(&ix, ""), CK_INDEX_NONE);
    ck_assert_uint_eq(ck_index_find_name(&ix, "lm_hea"), CK_INDEX_NONE);
    ck_assert_uint_eq(ck_index_find(&ix, "ab", 1), 5); /* a prefix of the bytes is "a" */
    size_t first;
    ck_assert_ptr_null(ck_index_first_repeat(&ix, &first));
    ck_index_free(&ix);
}
END_TEST

/* Equal keys are found by their smallest id, and the first repeat is the one at the
 * smallest later position, not the first in sorted order: "a" sorts before "b", but b
 * repeats at 4, before a does at 9. */
START_TEST(the_first_repeat_is_in_order_of_position)
{
    static const char *const names[] = {"z", "a", "q", "b", "b", "c", "b", "d", "e", "a"};
    ck_index ix;
    index_names(&ix, names, 10);
    ck_assert_uint_eq(ck_index_find_name(&ix, "b"), 3);
    ck_assert_uint_eq(ck_index_find_name(&ix, "a"), 1);
    size_t first = 99;
    const ck_index_entry *again = ck_index_first_repeat(&ix, &first);
    ck_assert_ptr_nonnull(again);
    ck_assert_uint_eq(again->id, 4);
    ck_assert_uint_eq(first, 3);
    ck_assert_str_eq(again->key, "b");
    ck_index_free(&ix);
}
END_TEST

START_TEST(many_keys)
{
    enum { N = 50000 };
    static char names[N][12];
    ck_index ix;
    ck_assert(ck_index_alloc(&ix, N));
    for (size_t i = 0; i < N; i++) {
        /* in an order unlike the sorted one */
        snprintf(names[i], sizeof names[i], "n%zu", (i * 7919) % N);
        ck_index_set_name(&ix, i, names[i]);
    }
    ck_index_sort(&ix);
    for (size_t i = 0; i < N; i++)
        ck_assert_uint_eq(ck_index_find_name(&ix, names[i]), i);
    size_t first;
    ck_assert_ptr_null(ck_index_first_repeat(&ix, &first));
    ck_index_free(&ix);
}
END_TEST

/* Keys are bytes: numbers laid out in an array, zero bytes included. */
START_TEST(binary_keys)
{
    uint64_t keys[4][2] = {{50257, 768}, {0, 0}, {768, 50257}, {50257, 768}};
    ck_index ix;
    ck_assert(ck_index_alloc(&ix, 4));
    for (size_t i = 0; i < 4; i++)
        ck_index_set(&ix, i, keys[i], sizeof keys[i]);
    ck_index_sort(&ix);
    const uint64_t wanted[2] = {50257, 768}, absent[2] = {50257, 769}, zero[2] = {0, 0};
    ck_assert_uint_eq(ck_index_find(&ix, wanted, sizeof wanted), 0);
    ck_assert_uint_eq(ck_index_find(&ix, zero, sizeof zero), 1);
    ck_assert_uint_eq(ck_index_find(&ix, absent, sizeof absent), CK_INDEX_NONE);
    size_t first;
    const ck_index_entry *again = ck_index_first_repeat(&ix, &first);
    ck_assert(again && again->id == 3 && first == 0);
    ck_index_free(&ix);
}
END_TEST

START_TEST(empty_index)
{
    ck_index ix = {0};
    ck_assert_uint_eq(ck_index_find_name(&ix, "x"), CK_INDEX_NONE);
    ck_index_free(&ix);
    ck_assert(ck_index_alloc(&ix, 0));
    ck_index_sort(&ix);
    size_t first;
    ck_assert_ptr_null(ck_index_first_repeat(&ix, &first));
    ck_assert_uint_eq(ck_index_find_name(&ix, "x"), CK_INDEX_NONE);
    ck_index_free(&ix);
}
END_TEST

static Suite *index_suite(void)
{
    Suite *s = suite_create("index");
    TCase *tc = tcase_create("index");
    tcase_add_test(tc, finds_each_name_and_only_those);
    tcase_add_test(tc, the_first_repeat_is_in_order_of_position);
    tcase_add_test(tc, many_keys);
    tcase_add_test(tc, binary_keys);
    tcase_add_test(tc, empty_index);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(index_suite)
