/* limits: every limit's variable read the one way, as docs/reliability.md says: a positive
 * whole number sets it, anything else (a sign, a space, a zero, a hex or exponent form, a
 * number past ULONG_MAX) leaves the default and is reported. strtoul took "-1" as ULONG_MAX,
 * lifting the limit, and " 5" and "+5" as 5. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/limits.h"
#include "tests/unit/check_main.h"

static const char *const not_numbers[] = {
    "", "0", "000", "-1", "-3", "+5", " 5", "5 ", "\t5", "5x", "twelve", "0x10", "1e3", "5.0",
    "18446744073709551616", "99999999999999999999999",
};

START_TEST(parse_takes_positive_whole_numbers_only)
{
    unsigned long n = 0;
    for (size_t i = 0; i < sizeof not_numbers / sizeof not_numbers[0]; i++)
        ck_assert_msg(!ck_limits_parse(not_numbers[i], &n), "'%s' taken", not_numbers[i]);
    ck_assert(!ck_limits_parse(NULL, &n));
    ck_assert(ck_limits_parse("5", &n) && n == 5);
    ck_assert(ck_limits_parse("007", &n) && n == 7);
    char max[32];
    snprintf(max, sizeof max, "%lu", ULONG_MAX);
    ck_assert(ck_limits_parse(max, &n) && n == ULONG_MAX);
}
END_TEST

/* Every limit of the registry (the class): its own variable, read by ck_limits_get and
 * reported by ck_limits_invalid exactly when it is not a positive whole number. */
START_TEST(every_limit_reads_its_variable_the_same_way)
{
    for (int l = 0; l < CK_N_LIMITS; l++) {
        const char *name = ck_limits_name((ck_limit)l), *value;
        ck_assert_msg(strncmp(name, "CKPLAN_MAX_", 11) == 0, "%s", name);
        for (int other = 0; other < l; other++)
            ck_assert_str_ne(name, ck_limits_name((ck_limit)other));
        unsetenv(name);
        ck_assert_uint_eq(ck_limits_get((ck_limit)l, 42), 42);
        ck_assert(!ck_limits_invalid((ck_limit)l, &value));
        for (size_t i = 0; i < sizeof not_numbers / sizeof not_numbers[0]; i++) {
            setenv(name, not_numbers[i], 1);
            ck_assert_msg(ck_limits_get((ck_limit)l, 42) == 42, "%s='%s' changed it", name,
                          not_numbers[i]);
            ck_assert(ck_limits_invalid((ck_limit)l, &value) && strcmp(value, not_numbers[i]) == 0);
        }
        setenv(name, "7", 1);
        ck_assert_uint_eq(ck_limits_get((ck_limit)l, 42), 7);
        ck_assert(!ck_limits_invalid((ck_limit)l, &value));
        unsetenv(name);
    }
}
END_TEST

static Suite *limits_suite(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("limits");
    tcase_add_test(tc, parse_takes_positive_whole_numbers_only);
    tcase_add_test(tc, every_limit_reads_its_variable_the_same_way);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(limits_suite)
