#include "planner/schedule.h"

#include <string.h>

#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"

static void push(ck_schedule *s, ck_action_kind kind, size_t stage)
{
    ck_assert(ck_schedule_push(s, kind, stage));
}

/* The baseline of hetero-3, by hand (x0=1; x1=2, x̄1=5; x2=1, x̄2=3; x3=1, x̄3=1):
 *   F_all 0: 1 + 5 = 6, +1 tmp -> peak 7      F_all 1: 6 + 3 = 9      F_all 2: 9 + 1 = 10
 *   loss: 10 + y3(1) = 11                      B 2: 11 + y2(1) = 12, frees y3, x̄3 -> 10
 *   B 1: 10 + y1(2) = 12, frees y2, x̄2 -> 8   B 0: 8 + y0(1) + 5 tmp = 14, frees x0, y1, x̄1 -> 1
 * time 1+5+3 + 0 + 2+2+2 = 15. */
START_TEST(baseline_of_spec_example)
{
    ck_chain c;
    ck_assert_int_eq(ck_chaingen_hetero3(&c, NULL), CK_OK);
    ck_schedule s = {0};
    ck_assert_int_eq(ck_schedule_baseline(&c, &s, NULL), CK_OK);
    ck_assert_uint_eq(s.n, 7);
    ck_replay r;
    uint64_t live[7], peak[7];
    ck_err err;
    ck_assert_int_eq(ck_schedule_replay(&c, &s, &r, live, peak, &err), CK_OK);
    const uint64_t want_live[7] = {6, 9, 10, 11, 10, 8, 1};
    const uint64_t want_peak[7] = {7, 9, 10, 11, 12, 12, 14};
    for (int k = 0; k < 7; k++) {
        ck_assert_uint_eq(live[k], want_live[k]);
        ck_assert_uint_eq(peak[k], want_peak[k]);
    }
    ck_assert_uint_eq(r.peak_bytes, 14);
    ck_assert_uint_eq(r.peak_op, 6);
    ck_assert_double_eq(r.time, 15);
    ck_assert_uint_eq(r.count[CK_F_ALL], 3);
    ck_assert_uint_eq(r.count[CK_B], 3);
    ck_assert_uint_eq(r.count[CK_LOSS], 1);
    ck_schedule_free(&s);
    ck_chain_free(&c);
}
END_TEST

/* Checkpoint x1 and drop stage 1's input on the way, recompute later:
 *   F_ck 0: 1+2 = 3 (+1 tmp: 4)   F_none 1: 3+1 = 4, frees x1 -> 2   F_all 2: 2+1 = 3
 *   loss: 4   B 2: needs x̄3, y3 and x2: 4+1 = 5, frees x2 (plain), y3, x̄3 -> 2 (x0, y2)
 *   F_all 0: 2+5 = 7 (+1: 8)  F_all 1: 7+3 = 10  B 1: 10+2 = 12, frees y2, x̄2 -> 8 (x0, x̄1, y1)
 *   B 0: 8+1+5 = 14 -> frees x0, y1, x̄1 -> 1.  time: 1+5+3+0+2+1+5+2+2 = 21. */
START_TEST(recompute_frees_plain_inputs)
{
    ck_chain c;
    ck_assert_int_eq(ck_chaingen_hetero3(&c, NULL), CK_OK);
    ck_schedule s = {0};
    push(&s, CK_F_CK, 0);
    push(&s, CK_F_NONE, 1);
    push(&s, CK_F_ALL, 2);
    push(&s, CK_LOSS, 0);
    push(&s, CK_B, 2);
    push(&s, CK_F_ALL, 0);
    push(&s, CK_F_ALL, 1);
    push(&s, CK_B, 1);
    push(&s, CK_B, 0);
    ck_replay r;
    uint64_t live[9];
    ck_err err;
    ck_assert_msg(ck_schedule_replay(&c, &s, &r, live, NULL, &err) == CK_OK, "%s", err.msg);
    const uint64_t want_live[9] = {3, 2, 3, 4, 2, 7, 10, 8, 1};
    for (int k = 0; k < 9; k++)
        ck_assert_uint_eq(live[k], want_live[k]);
    ck_assert_uint_eq(r.peak_bytes, 14);
    ck_assert_double_eq(r.time, 21);
    ck_assert_uint_eq(r.count[CK_F_CK], 1);
    ck_assert_uint_eq(r.count[CK_F_NONE], 1);
    ck_schedule_free(&s);
    ck_chain_free(&c);
}
END_TEST

static void expect_invalid(const ck_chain *c, const ck_schedule *s, const char *fragment)
{
    ck_replay r;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_schedule_replay(c, s, &r, NULL, NULL, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, fragment), "message '%s' lacks '%s'", err.msg, fragment);
}

/* Partitioned checkpoints (DeepSpeed's partition_activations, planner/action.h), by hand.
 * x0 = 10, x1 = 20, x2 = 30, x3 = 40 (x̄ the same); stages 1 and 2 keep a shard of 5 and 7.
 *   F_ck 0: stage 0 keeps x0 whole: 10 + 20 = 30
 *   F_ck 1: its shard of x1 first (5): 35, + x2 -> peak and held 65; x1 stays whole
 *   F_none 2: the segment goes on: 65 + 40 = 105, frees x2 -> 75 (F_none keeps no shard)
 *   loss: the segment ends, x1 held as its shard: 75 - 20 = 55; + y3 -> 95
 *   F_ck 1: gathers x1: 95 + 20 = 115 (a peak), frees the shard -> 110; a new shard: 115;
 *           + x2 -> 145
 *   F_all 2: the segment ends: 145 - 20 = 125; + x̄3 -> 165 (F_all keeps no shard)
 *   B 2: 165 + y2 = 195, frees x2, y3, x̄3 -> 85
 *   F_all 1: gathers x1: 85 + 20 = 105, frees the shard -> 100; + x̄2 -> 130
 *   B 1: 130 + y1 = 150 -> frees x1, y2, x̄2 -> 70
 *   F_all 0: 70 + 20 = 90     B 0: 90 + 10 = 100 -> frees x0, y1, x̄1 -> 50 (x3, y0)
 * Whole checkpoints peak at 210 (B 2) on the same schedule. */
START_TEST(partitioned_checkpoints_by_hand)
{
    ck_chain c;
    ck_assert_int_eq(ck_chain_alloc(&c, "p", 3, NULL), CK_OK);
    c.input_bytes = 10;
    for (size_t i = 0; i < 3; i++)
        c.stages[i].out_bytes = c.stages[i].saved_bytes = 20 + 10 * i;
    ck_schedule s = {0};
    const ck_action_kind kinds[] = {CK_F_CK, CK_F_CK, CK_F_NONE, CK_LOSS, CK_F_CK, CK_F_ALL,
                                    CK_B,    CK_F_ALL, CK_B,     CK_F_ALL, CK_B};
    const size_t stages[] = {0, 1, 2, 0, 1, 2, 2, 1, 1, 0, 0};
    for (size_t k = 0; k < 11; k++)
        push(&s, kinds[k], stages[k]);
    ck_replay r;
    uint64_t live[11], peak[11];
    ck_assert_int_eq(ck_schedule_replay(&c, &s, &r, NULL, NULL, NULL), CK_OK);
    ck_assert_uint_eq(r.peak_bytes, 210);
    ck_assert(!ck_chain_partitioned(&c));
    c.stages[1].shard_bytes = 5;
    c.stages[2].shard_bytes = 7;
    ck_assert(ck_chain_partitioned(&c));
    ck_assert_int_eq(ck_schedule_replay(&c, &s, &r, live, peak, NULL), CK_OK);
    const uint64_t want_live[11] = {30, 65, 75, 95, 145, 165, 85, 130, 70, 90, 50};
    const uint64_t want_peak[11] = {30, 65, 105, 95, 145, 165, 195, 130, 150, 90, 100};
    for (int k = 0; k < 11; k++) {
        ck_assert_msg(live[k] == want_live[k], "live after %d: %llu", k, (unsigned long long)live[k]);
        ck_assert_msg(peak[k] == want_peak[k], "peak of %d: %llu", k, (unsigned long long)peak[k]);
    }
    ck_assert_uint_eq(r.peak_bytes, 195);
    /* a gather can be the peak: F_all 1 with an output of 1 byte peaks at its gather */
    c.stages[1].out_bytes = c.stages[1].saved_bytes = 1;
    ck_assert_int_eq(ck_schedule_replay(&c, &s, &r, live, peak, NULL), CK_OK);
    ck_assert_uint_eq(peak[7], live[6] + 20);
    ck_schedule_free(&s);
    ck_chain_free(&c);
}
END_TEST

START_TEST(invalid_schedules_are_named)
{
    ck_chain c;
    ck_assert_int_eq(ck_chaingen_hetero3(&c, NULL), CK_OK);
    ck_schedule s = {0};

    push(&s, CK_F_ALL, 1);
    expect_invalid(&c, &s, "schedule[0] (F_all 1): needs x_1 or x̄_1, neither is live");
    s.n = 0;
    push(&s, CK_LOSS, 0);
    expect_invalid(&c, &s, "schedule[0] (loss): needs x_3 or x̄_3");
    s.n = 0;
    push(&s, CK_F_CK, 0);
    push(&s, CK_F_CK, 0);
    expect_invalid(&c, &s, "schedule[1] (F_ck 0): would compute x_1, which is already live");
    s.n = 0;
    push(&s, CK_F_ALL, 3);
    expect_invalid(&c, &s, "stage out of range (the chain has stages 0 to 2)");
    s.n = 0;
    /* B without the gradient from above, then without x̄ of its output. */
    push(&s, CK_F_ALL, 0);
    push(&s, CK_B, 0);
    expect_invalid(&c, &s, "schedule[1] (B 0): needs y_1, which is not live");
    s.n = 0;
    push(&s, CK_F_CK, 0);
    push(&s, CK_F_ALL, 1);
    push(&s, CK_F_ALL, 2);
    push(&s, CK_LOSS, 0);
    push(&s, CK_B, 2);
    push(&s, CK_B, 1);
    push(&s, CK_B, 0);
    expect_invalid(&c, &s, "schedule[6] (B 0): needs x̄_1, which is not live");
    /* F_none 0 drops x_0, which nothing can recompute. */
    s.n = 0;
    push(&s, CK_F_NONE, 0);
    push(&s, CK_F_ALL, 1);
    push(&s, CK_F_ALL, 2);
    push(&s, CK_LOSS, 0);
    push(&s, CK_B, 2);
    push(&s, CK_B, 1);
    push(&s, CK_F_ALL, 0);
    expect_invalid(&c, &s, "schedule[6] (F_all 0): needs x_0 or x̄_0");
    /* A schedule that stops early. */
    s.n = 0;
    push(&s, CK_F_ALL, 0);
    expect_invalid(&c, &s, "ends without y_0");
    ck_schedule_free(&s);
    ck_chain_free(&c);
}
END_TEST

START_TEST(overflowing_memory_is_an_error_not_a_wrap)
{
    ck_chain c;
    ck_assert_int_eq(ck_chaingen_uniform(&c, 3, UINT64_MAX / 4, NULL), CK_OK);
    ck_schedule s = {0};
    ck_assert_int_eq(ck_schedule_baseline(&c, &s, NULL), CK_OK);
    expect_invalid(&c, &s, "exceeds 2^64 bytes");
    ck_schedule_free(&s);
    ck_chain_free(&c);
}
END_TEST

START_TEST(opkind_names_round_trip)
{
    for (int k = 0; k < CK_N_ACTIONS; k++) {
        ck_action_kind parsed;
        ck_assert(ck_action_parse(ck_action_name((ck_action_kind)k), &parsed));
        ck_assert_int_eq(parsed, k);
    }
    ck_action_kind parsed;
    ck_assert(!ck_action_parse("F_some", &parsed));
    ck_assert_str_eq(ck_action_name(CK_F_NONE), "F_none");
}
END_TEST

static Suite *schedule_suite(void)
{
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("replay");
    tcase_add_test(tc, baseline_of_spec_example);
    tcase_add_test(tc, recompute_frees_plain_inputs);
    tcase_add_test(tc, partitioned_checkpoints_by_hand);
    tcase_add_test(tc, invalid_schedules_are_named);
    tcase_add_test(tc, overflowing_memory_is_an_error_not_a_wrap);
    tcase_add_test(tc, opkind_names_round_trip);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(schedule_suite)
