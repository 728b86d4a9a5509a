/* The main() of every unit-test binary: each tests/unit/test_*.c defines the suite and ends
 * with CK_TEST_MAIN(its_suite). */
#ifndef CK_CHECK_MAIN_H
#define CK_CHECK_MAIN_H

#include <check.h>

#define CK_TEST_MAIN(make_suite)                                                                   \
    int main(void)                                                                                 \
    {                                                                                              \
        SRunner *runner = srunner_create(make_suite());                                           \
        srunner_run_all(runner, CK_NORMAL);                                                        \
        int failed = srunner_ntests_failed(runner);                                                \
        srunner_free(runner);                                                                      \
        return failed ? 1 : 0;                                                                     \
    }

#endif
