/* How a whole-step budget splits into static memory and activations
 * (ck_planner_activation_budget, ck_planner_step_budget). */
#include "planner/planner.h"

#include "tests/unit/check_main.h"

START_TEST(activation_budget_is_what_static_memory_leaves)
{
    uint64_t act = 12345;
    ck_assert(ck_planner_activation_budget(22 << 20, 5 << 20, &act));
    ck_assert_uint_eq(act, 17 << 20);
    ck_assert(ck_planner_activation_budget(1000, 1000, &act)); /* static memory exactly fits */
    ck_assert_uint_eq(act, 0);
    ck_assert(ck_planner_activation_budget(UINT64_MAX, 0, &act));
    ck_assert_uint_eq(act, UINT64_MAX);
}
END_TEST

START_TEST(static_memory_over_budget_leaves_nothing)
{
    uint64_t act = 12345;
    ck_assert(!ck_planner_activation_budget(999, 1000, &act));
    ck_assert_uint_eq(act, 0);
    ck_assert(!ck_planner_activation_budget(0, UINT64_MAX, &act));
    ck_assert_uint_eq(act, 0);
}
END_TEST

START_TEST(step_budget_adds_up_and_saturates)
{
    ck_assert_uint_eq(ck_planner_step_budget(5 << 20, 17 << 20), 22 << 20);
    ck_assert_uint_eq(ck_planner_step_budget(0, 0), 0);
    ck_assert_uint_eq(ck_planner_step_budget(UINT64_MAX - 1, 1), UINT64_MAX);
    ck_assert_uint_eq(ck_planner_step_budget(UINT64_MAX - 1, 2), UINT64_MAX);
    ck_assert_uint_eq(ck_planner_step_budget(2, UINT64_MAX), UINT64_MAX);
    /* the two are inverse where the sum fits */
    uint64_t act;
    for (uint64_t s = 0; s < (1ull << 40); s = 3 * s + 7) {
        ck_assert(ck_planner_activation_budget(ck_planner_step_budget(s, 1ull << 33), s, &act));
        ck_assert_uint_eq(act, 1ull << 33);
    }
}
END_TEST

static Suite *budget_suite(void)
{
    Suite *s = suite_create("budget");
    TCase *tc = tcase_create("budget");
    tcase_add_test(tc, activation_budget_is_what_static_memory_leaves);
    tcase_add_test(tc, static_memory_over_budget_leaves_nothing);
    tcase_add_test(tc, step_budget_adds_up_and_saturates);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(budget_suite)
