/* ck_json_number: every finite double ckplan writes reads back as exactly itself, and
 * every integer below 2^53 (sizes, counts, seeds) is written in full. ck_json_put, which
 * writes a number (or any value) over a member, keeps the member's name and place. */
#include "planner/json.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_main.h"

/* The text ck_json_number gives v, as cJSON prints it inside a document. */
static void written(double v, char *buf, size_t len)
{
    cJSON *item = ck_json_number(v);
    ck_assert_ptr_nonnull(item);
    char *text = cJSON_PrintUnformatted(item);
    ck_assert_ptr_nonnull(text);
    snprintf(buf, len, "%s", text);
    free(text);
    cJSON_Delete(item);
}

static void reads_back(double v)
{
    char text[64];
    written(v, text, sizeof text);
    cJSON *parsed = cJSON_Parse(text);
    ck_assert_msg(cJSON_IsNumber(parsed), "%.17g written as %s", v, text);
    ck_assert_msg(parsed->valuedouble == v, "%.17g written as %s, read as %.17g", v, text,
                  parsed->valuedouble);
    cJSON_Delete(parsed);
}

START_TEST(integers_below_2_53_are_written_in_full)
{
    uint64_t edges[] = {0, 1, 999999999999999ULL, 1000000000000001ULL, CK_EXACT_LIMIT - 3,
                        CK_EXACT_LIMIT - 2, CK_EXACT_LIMIT - 1};
    uint64_t state = 88172645463325252ULL;
    for (int k = 0; k < 2000; k++) {
        uint64_t v;
        if (k < (int)(sizeof edges / sizeof edges[0])) {
            v = edges[k];
        } else {
            state ^= state << 13, state ^= state >> 7, state ^= state << 17;
            v = state % (CK_EXACT_LIMIT >> (k % 50)); /* every magnitude */
        }
        char text[64], want[32];
        written((double)v, text, sizeof text);
        snprintf(want, sizeof want, "%llu", (unsigned long long)v);
        ck_assert_str_eq(text, want);
    }
}
END_TEST

START_TEST(doubles_read_back_exactly)
{
    double edges[] = {0, 5e-324, DBL_MIN, 1e-300, 0.1, 1.0 / 3, 1e100, nextafter(1e100, 0),
                      1.0000000000000002e100, 1e300, DBL_MAX, nextafter(DBL_MAX, 0)};
    for (size_t k = 0; k < sizeof edges / sizeof edges[0]; k++)
        reads_back(edges[k]);
    uint64_t state = 2463534242ULL;
    for (int k = 0; k < 20000; k++) { /* random bit patterns: every exponent, every mantissa */
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        double v;
        memcpy(&v, &state, sizeof v);
        if (isfinite(v))
            reads_back(fabs(v));
    }
}
END_TEST

START_TEST(shortest_text_that_reads_back)
{
    char text[64];
    written(0.1, text, sizeof text);
    ck_assert_str_eq(text, "0.1");
    written(1e100, text, sizeof text);
    ck_assert_str_eq(text, "1e+100");
    written(2.5, text, sizeof text);
    ck_assert_str_eq(text, "2.5");
}
END_TEST

START_TEST(non_finite_is_null)
{
    char text[64];
    written(INFINITY, text, sizeof text);
    ck_assert_str_eq(text, "null");
    written(NAN, text, sizeof text);
    ck_assert_str_eq(text, "null");
}
END_TEST

/* obj printed without spaces, compared with want. */
static void prints_as(const cJSON *obj, const char *want)
{
    char *text = cJSON_PrintUnformatted(obj);
    ck_assert_ptr_nonnull(text);
    ck_assert_str_eq(text, want);
    free(text);
}

START_TEST(put_replaces_in_place_and_appends_new_keys)
{
    cJSON *obj = cJSON_Parse("{\"a\":1,\"b\":2,\"c\":3}");
    ck_assert_ptr_nonnull(obj);
    /* A member whose key is a literal (cJSON's "CS" adders): replacing it must neither free
     * the literal nor leave the new member nameless. */
    cJSON_AddItemToObjectCS(obj, "lit", cJSON_CreateNumber(4));
    ck_assert(ck_json_put(obj, "b", cJSON_CreateNumber(9)));
    ck_assert(ck_json_put(obj, "lit", cJSON_CreateString("x")));
    ck_assert(ck_json_put(obj, "d", cJSON_CreateTrue()));
    prints_as(obj, "{\"a\":1,\"b\":9,\"c\":3,\"lit\":\"x\",\"d\":true}");
    cJSON_Delete(obj);
}
END_TEST

static void *failing_malloc(size_t size)
{
    (void)size;
    return NULL;
}

/* With every cJSON allocation failing: replacing needs none (cJSON 1.7.15's own replace
 * copies the key and, when that fails, leaves a member without a name); adding a new key
 * fails and changes nothing. */
START_TEST(put_out_of_memory_loses_no_name)
{
    cJSON *obj = cJSON_Parse("{\"a\":1,\"b\":2}");
    cJSON *nine = cJSON_CreateNumber(9), *seven = cJSON_CreateNumber(7);
    ck_assert(obj && nine && seven);
    cJSON_Hooks failing = {.malloc_fn = failing_malloc, .free_fn = free};
    cJSON_InitHooks(&failing);
    bool replaced = ck_json_put(obj, "b", nine), added = ck_json_put(obj, "c", seven);
    cJSON_InitHooks(NULL);
    ck_assert(replaced);
    ck_assert(!added);
    prints_as(obj, "{\"a\":1,\"b\":9}");
    cJSON_Delete(seven);
    cJSON_Delete(obj);
}
END_TEST

static Suite *json_numbers_suite(void)
{
    Suite *s = suite_create("json_numbers");
    TCase *tc = tcase_create("json_numbers");
    tcase_add_test(tc, integers_below_2_53_are_written_in_full);
    tcase_add_test(tc, doubles_read_back_exactly);
    tcase_add_test(tc, shortest_text_that_reads_back);
    tcase_add_test(tc, non_finite_is_null);
    tcase_add_test(tc, put_replaces_in_place_and_appends_new_keys);
    tcase_add_test(tc, put_out_of_memory_loses_no_name);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(json_numbers_suite)
