#include "planner/size.h"

#include <stdio.h>
#include <string.h>

#include "tests/unit/check_main.h"

static uint64_t parse_ok(const char *text)
{
    uint64_t v = 0;
    ck_err err = {{0}};
    ck_assert_msg(ck_size_parse(text, &v, &err) == CK_OK, "%s: %s", text, err.msg);
    return v;
}

static void parse_bad(const char *text)
{
    uint64_t v = 0;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_size_parse(text, &v, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, text) && strstr(err.msg, "KiB MiB GiB TiB"), "%s", err.msg);
}

/* Each of texts (NULL-terminated) is refused for the reason `why`. */
static void parse_refused(const char *const *texts, const char *why)
{
    for (int i = 0; texts[i]; i++) {
        parse_bad(texts[i]);
        uint64_t v = 0;
        ck_err err = {{0}};
        ck_size_parse(texts[i], &v, &err);
        ck_assert_msg(strstr(err.msg, why), "%s: %s", texts[i], err.msg);
    }
}

START_TEST(binary_and_decimal_units)
{
    ck_assert_uint_eq(parse_ok("0"), 0);
    ck_assert_uint_eq(parse_ok("1048576"), 1048576);
    ck_assert_uint_eq(parse_ok("512B"), 512);
    ck_assert_uint_eq(parse_ok("8G"), 8589934592ULL);
    ck_assert_uint_eq(parse_ok("8g"), 8589934592ULL);
    ck_assert_uint_eq(parse_ok("8GiB"), 8589934592ULL);
    ck_assert_uint_eq(parse_ok("8gib"), 8589934592ULL);
    ck_assert_uint_eq(parse_ok("8GB"), 8000000000ULL);
    ck_assert_uint_eq(parse_ok("3K"), 3072);
    ck_assert_uint_eq(parse_ok("3kb"), 3000);
    ck_assert_uint_eq(parse_ok("2M"), 2097152);
    ck_assert_uint_eq(parse_ok("2MB"), 2000000);
    ck_assert_uint_eq(parse_ok("1T"), 1099511627776ULL);
    ck_assert_uint_eq(parse_ok("1TB"), 1000000000000ULL);
}
END_TEST

START_TEST(whole_decimals_are_whole)
{
    ck_assert_uint_eq(parse_ok("1.0"), 1);
    ck_assert_uint_eq(parse_ok("1."), 1);
    ck_assert_uint_eq(parse_ok("2.50K"), 2560);
    ck_assert_uint_eq(parse_ok("0.5K"), 512);
    ck_assert_uint_eq(parse_ok(".5K"), 512);
    ck_assert_uint_eq(parse_ok("1.5G"), 1610612736ULL);
    ck_assert_uint_eq(parse_ok("2.5MB"), 2500000);
    ck_assert_uint_eq(parse_ok("0.001KB"), 1);
    ck_assert_uint_eq(parse_ok("0.0009765625K"), 1); /* 2^-10 K, exactly */
    /* 2^-40 T = 1 byte: 28 significant digits, more than 64 bits hold */
    ck_assert_uint_eq(parse_ok("0.0000000000009094947017729282379150390625T"), 1);
    ck_assert_uint_eq(parse_ok("1.0000000000000000000000000000000000000000000000000000000000000"
                               "00000000000000000000000000000G"), 1ULL << 30);
    ck_assert_uint_eq(parse_ok("0000000000000000000000000000000000000000000000000000000000000000"
                               "00000000000000000000000000000042"), 42);
}
END_TEST

/* Not a whole number of bytes is refused whatever the unit, for the same reason. */
START_TEST(fractions_of_a_byte_are_refused)
{
    const char *bad[] = {"1.5", "1.5b", "1.5B", "0.3K", "1.0001K", "0.0001KB", "0.1",
                         "0.00048828125K", "0.0000000000009094947017729282379150390624T",
                         "1.0000000001G",
                         "0.50000000000000000000000000000000000000000000000000000000000000000001K",
                         NULL};
    parse_refused(bad, "not a whole number of bytes");
}
END_TEST

/* Every unit, in every case, against exact integer arithmetic: mantissa num/den times the
 * unit is accepted exactly when den divides it, as that quotient. */
START_TEST(every_unit_against_exact_arithmetic)
{
    static const struct {
        const char *suffix;
        uint64_t bytes;
    } units[] = {{"", 1}, {"b", 1}, {"B", 1}, {"k", 1ULL << 10}, {"KiB", 1ULL << 10}, {"kb", 1000},
                 {"M", 1ULL << 20}, {"mib", 1ULL << 20}, {"MB", 1000000}, {"g", 1ULL << 30},
                 {"GiB", 1ULL << 30}, {"gB", 1000000000}, {"T", 1ULL << 40}, {"tib", 1ULL << 40},
                 {"TB", 1000000000000ULL}};
    static const struct {
        const char *text;
        uint64_t num, den;
    } mantissas[] = {{"0", 0, 1}, {"7", 7, 1}, {"1.0", 1, 1}, {"2.50", 5, 2}, {"0.5", 1, 2},
                     {"1.5", 3, 2}, {"0.3", 3, 10}, {"0.25", 1, 4}, {"0.125", 1, 8},
                     {"0.001", 1, 1000}, {"0.000001", 1, 1000000}, {"0.0009765625", 1, 1024},
                     {"3.0517578125", 3125, 1024}, {"0.2", 1, 5}, {"12.75", 51, 4}};
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++)
        for (size_t m = 0; m < sizeof mantissas / sizeof mantissas[0]; m++) {
            char text[64];
            snprintf(text, sizeof text, "%s%s", mantissas[m].text, units[u].suffix);
            uint64_t times = mantissas[m].num * units[u].bytes, v = 0;
            ck_err err = {{0}};
            int rc = ck_size_parse(text, &v, &err);
            if (times % mantissas[m].den == 0) {
                ck_assert_msg(rc == CK_OK, "%s: %s", text, err.msg);
                ck_assert_msg(v == times / mantissas[m].den, "%s: got %llu", text,
                              (unsigned long long)v);
            } else {
                ck_assert_msg(rc == CK_ERR_INPUT && strstr(err.msg, "not a whole number of bytes"),
                              "%s: accepted as %llu", text, (unsigned long long)v);
            }
        }
}
END_TEST

START_TEST(rejects_everything_else)
{
    const char *bad[] = {"", "G", "-1", "1e3", "0x10", " 8G", "8G ", "8 G", "8X", "8GiBs",
                         "inf", "nan", "8..1G", ".", "1.5.", "18446744073709551616",
                         "17179869184G", NULL};
    for (int i = 0; bad[i]; i++)
        parse_bad(bad[i]);
}
END_TEST

/* Sizes are written as JSON numbers, exact only below 2^53: the largest size accepted. */
START_TEST(largest_size_is_below_2_53)
{
    ck_assert_uint_eq(parse_ok("9007199254740991"), CK_EXACT_LIMIT - 1);
    ck_assert_uint_eq(parse_ok("8191T"), 8191ULL << 40);
    ck_assert_uint_eq(parse_ok("8191.9999999999990905052982270717620849609375T"), CK_EXACT_LIMIT - 1);
    ck_assert_uint_eq(parse_ok("9007.199254740991TB"), CK_EXACT_LIMIT - 1);
    const char *large[] = {"9007199254740992", "8192T", "8192.0T", "9000T", "9007.199254740992TB",
                           "18446744073709551615", "18446744073709551616", "16777215T",
                           "99999999999999999999999999999999999999999999999999999999999999999999"
                           "999999999999999999", NULL};
    parse_refused(large, "below 2^53 bytes (8 PiB)");
}
END_TEST

START_TEST(checked_arithmetic)
{
    uint64_t r;
    ck_assert(ck_size_add(1, 2, &r) && r == 3);
    ck_assert(!ck_size_add(UINT64_MAX, 1, &r));
    ck_assert(ck_size_mul(1ULL << 31, 1ULL << 32, &r) && r == 1ULL << 63);
    ck_assert(!ck_size_mul(1ULL << 32, 1ULL << 32, &r));
    ck_assert_uint_eq(ck_size_ceil_div(10, 3), 4);
    ck_assert_uint_eq(ck_size_ceil_div(9, 3), 3);
    ck_assert_uint_eq(ck_size_ceil_div(0, 3), 0);
}
END_TEST

START_TEST(formats_binary_units)
{
    char buf[32];
    ck_size_format(0, buf, sizeof buf);
    ck_assert_str_eq(buf, "0 B");
    ck_size_format(1023, buf, sizeof buf);
    ck_assert_str_eq(buf, "1023 B");
    ck_size_format(1536, buf, sizeof buf);
    ck_assert_str_eq(buf, "1.50 KiB");
    ck_size_format(8589934592ULL, buf, sizeof buf);
    ck_assert_str_eq(buf, "8.00 GiB");
    ck_size_format(300ULL << 20, buf, sizeof buf);
    ck_assert_str_eq(buf, "300 MiB");
    ck_size_format(UINT64_MAX, buf, sizeof buf);
    ck_assert_str_eq(buf, "16.0 EiB");
}
END_TEST

static Suite *size_suite(void)
{
    Suite *s = suite_create("size");
    TCase *tc = tcase_create("size");
    tcase_add_test(tc, binary_and_decimal_units);
    tcase_add_test(tc, whole_decimals_are_whole);
    tcase_add_test(tc, fractions_of_a_byte_are_refused);
    tcase_add_test(tc, every_unit_against_exact_arithmetic);
    tcase_add_test(tc, rejects_everything_else);
    tcase_add_test(tc, largest_size_is_below_2_53);
    tcase_add_test(tc, checked_arithmetic);
    tcase_add_test(tc, formats_binary_units);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(size_suite)
