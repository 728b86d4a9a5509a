#include "planner/size.h"

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

START_TEST(decimals_round_down_to_bytes)
{
    ck_assert_uint_eq(parse_ok("1.5G"), 1610612736ULL);
    ck_assert_uint_eq(parse_ok("0.5KiB"), 512);
    ck_assert_uint_eq(parse_ok("1.0001K"), 1024); /* 1024.1024 bytes */
    ck_assert_uint_eq(parse_ok("2.5MB"), 2500000);
    ck_assert_uint_eq(parse_ok(".5K"), 512);
}
END_TEST

START_TEST(rejects_everything_else)
{
    const char *bad[] = {"", "G", "-1", "1e3", "0x10", " 8G", "8G ", "8 G", "8X", "8GiBs",
                         "1.5", "inf", "nan", "8..1G", "18446744073709551616",
                         "17179869184G", NULL};
    for (int i = 0; bad[i]; i++)
        parse_bad(bad[i]);
}
END_TEST

START_TEST(largest_size_parses)
{
    ck_assert_uint_eq(parse_ok("18446744073709551615"), UINT64_MAX);
    ck_assert_uint_eq(parse_ok("16777215T"), 16777215ULL << 40);
}
END_TEST

START_TEST(checked_arithmetic)
{
    uint64_t r;
    ck_assert(ck_add(1, 2, &r) && r == 3);
    ck_assert(!ck_add(UINT64_MAX, 1, &r));
    ck_assert(ck_mul(1ULL << 31, 1ULL << 32, &r) && r == 1ULL << 63);
    ck_assert(!ck_mul(1ULL << 32, 1ULL << 32, &r));
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
    tcase_add_test(tc, decimals_round_down_to_bytes);
    tcase_add_test(tc, rejects_everything_else);
    tcase_add_test(tc, largest_size_parses);
    tcase_add_test(tc, checked_arithmetic);
    tcase_add_test(tc, formats_binary_units);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(size_suite)
