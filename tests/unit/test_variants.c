/* Stage variants in files: what ckplan writes it reads back. A chain with variants survives
 * its chain file field by field; a plan's F_all variants survive its plan file by name and
 * bind back to the same numbers, so the replay is the same; a name the chain lacks, or a
 * variant on another operation, is refused naming the operation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/json.h"
#include "planner/plan.h"
#include "planner/planner.h"
#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"

static cJSON *reparse(cJSON *written)
{
    ck_assert_ptr_nonnull(written);
    char *text = ck_json_print(written); /* numbers as text, as a file holds them */
    cJSON_Delete(written);
    ck_assert_ptr_nonnull(text);
    cJSON *root = NULL;
    ck_err err = {{0}};
    ck_assert_msg(ck_json_parse("f.json", text, strlen(text), &root, &err) == CK_OK, "%s", err.msg);
    free(text);
    return root;
}

static void random_chain(ck_chain *c, ck_rng *rng, size_t L)
{
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chaingen_random(c, L, 50, 10, rng, &err), CK_OK);
    ck_assert_msg(ck_chaingen_variants(c, 50, 10, rng, &err) == CK_OK, "%s", err.msg);
    for (size_t i = 0; i < L; i++) { /* stage_info names them */
        char name[32];
        snprintf(name, sizeof name, "s%zu", i);
        ck_assert_ptr_nonnull(c->stages[i].name = strdup(name));
    }
}

START_TEST(chain_files_keep_variants)
{
    ck_rng rng;
    ck_rng_seed(&rng, 13);
    for (unsigned k = 0; k < 50; k++) {
        ck_chain c, back;
        ck_err err = {{0}};
        random_chain(&c, &rng, 1 + k % 8);
        cJSON *root = reparse(ck_chain_to_json(&c));
        ck_assert_msg(ck_chain_from_json(root, "f.json", "", &back, &err) == CK_OK, "%s", err.msg);
        cJSON_Delete(root);
        for (size_t i = 0; i < c.n_stages; i++) {
            ck_assert_uint_eq(back.stages[i].n_variants, c.stages[i].n_variants);
            for (size_t v = 0; v <= c.stages[i].n_variants; v++) {
                ck_variant a = ck_chain_variant(&c, i, v), b = ck_chain_variant(&back, i, v);
                ck_assert_str_eq(a.name, b.name);
                ck_assert_uint_eq(a.saved_bytes, b.saved_bytes);
                ck_assert_uint_eq(a.fwd_tmp_bytes, b.fwd_tmp_bytes);
                ck_assert_uint_eq(a.bwd_tmp_bytes, b.bwd_tmp_bytes);
                ck_assert_double_eq(a.bwd_time, b.bwd_time);
            }
        }
        ck_chain_free(&back);
        ck_chain_free(&c);
    }
}
END_TEST

/* A dp plan with variants as a plan file, read back and bound on its chain. */
static void read_back(const ck_chain *c, const ck_plan_result *res, const ck_replay *replay,
                      ck_plan_file *out)
{
    ck_plan_doc d = {.planner = "dp", .model_path = "c.json", .model_sha256 =
                     "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
                     .budget_bytes = replay->peak_bytes, .stages = c->n_stages,
                     .predicted = *replay, .baseline = *replay, .result = res,
                     .stage_map = {c, NULL, NULL}};
    cJSON *root = reparse(ck_plan_to_json(&d));
    ck_err err = {{0}};
    ck_assert_msg(ck_plan_from_json(root, "p.json", out, &err) == CK_OK, "%s", err.msg);
    cJSON_Delete(root);
}

START_TEST(plan_files_keep_variants)
{
    ck_rng rng;
    ck_rng_seed(&rng, 2022);
    unsigned with_variants = 0;
    for (unsigned k = 0; k < 80; k++) {
        ck_chain c;
        random_chain(&c, &rng, 2 + k % 7);
        ck_replay base, replay;
        ck_plan_result res;
        ck_err err = {{0}};
        uint64_t least = 0;
        ck_planner_opts opts = {.slots = 2000, .variants = true};
        ck_schedule bs = {0};
        ck_assert_int_eq(ck_schedule_baseline(&c, &bs, &err), CK_OK);
        ck_assert_int_eq(ck_schedule_replay(&c, &bs, &base, NULL, NULL, &err), CK_OK);
        ck_schedule_free(&bs);
        uint64_t budget = base.peak_bytes * 3 / 4;
        if (ck_planner_run(&c, &ck_planner_dp, budget, &opts, &res, &replay, &least, &err) != CK_OK) {
            ck_chain_free(&c);
            continue;
        }
        ck_plan_file p;
        read_back(&c, &res, &replay, &p);
        size_t named = 0;
        for (size_t a = 0; a < res.schedule.n; a++)
            named += res.schedule.actions[a].variant > 0;
        ck_assert_uint_eq(p.n_variants, named);
        with_variants += named > 0;
        ck_schedule bound = {0};
        ck_assert_msg(ck_plan_bind_variants(&p, &c, "p.json", &bound, &err) == CK_OK, "%s", err.msg);
        ck_assert_uint_eq(bound.n, res.schedule.n);
        for (size_t a = 0; a < bound.n; a++) {
            ck_assert_int_eq(bound.actions[a].kind, res.schedule.actions[a].kind);
            ck_assert_uint_eq(bound.actions[a].stage, res.schedule.actions[a].stage);
            ck_assert_uint_eq(bound.actions[a].variant, res.schedule.actions[a].variant);
        }
        ck_replay again;
        ck_assert_int_eq(ck_schedule_replay(&c, &bound, &again, NULL, NULL, &err), CK_OK);
        ck_assert_uint_eq(again.peak_bytes, replay.peak_bytes);
        ck_assert_double_eq(again.time, replay.time);
        if (named) { /* a chain without the variant refuses the plan, naming the operation */
            size_t op = p.variants[0].op, stage = bound.actions[op].stage;
            ck_assert_int_eq(ck_chain_set_variants(&c, stage, NULL, 0, &err), CK_OK);
            ck_schedule none = {0};
            ck_assert_int_eq(ck_plan_bind_variants(&p, &c, "p.json", &none, &err), CK_ERR_INPUT);
            char want[64];
            snprintf(want, sizeof want, "p.json: schedule[%zu].variant: stage %zu has no variant", op, stage);
            ck_assert_msg(strstr(err.msg, want) && strstr(err.msg, "(it has all)"), "%s", err.msg);
            ck_schedule_free(&none);
        }
        ck_schedule_free(&bound);
        ck_plan_file_free(&p);
        ck_planner_result_free(&res);
        ck_chain_free(&c);
    }
    ck_assert_uint_gt(with_variants, 10);
}
END_TEST

/* Replaying an F_all whose variant the stage lacks, or a variant on B, is an input error. */
START_TEST(replay_refuses_variants_out_of_range)
{
    ck_chain c;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_chaingen_hetero3(&c, &err), CK_OK);
    ck_schedule s = {0};
    ck_assert_int_eq(ck_schedule_baseline(&c, &s, &err), CK_OK);
    ck_replay r;
    s.actions[1].variant = 1;
    ck_assert_int_eq(ck_schedule_replay(&c, &s, &r, NULL, NULL, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "schedule[1] (F_all 1): variant 1 out of range"), "%s", err.msg);
    s.actions[1].variant = 0;
    s.actions[s.n - 1].variant = 1;
    ck_assert_int_eq(ck_schedule_replay(&c, &s, &r, NULL, NULL, &err), CK_ERR_INPUT);
    ck_schedule_free(&s);
    ck_chain_free(&c);
}
END_TEST

static Suite *variants_suite(void)
{
    Suite *s = suite_create("variants");
    TCase *tc = tcase_create("variants");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, chain_files_keep_variants);
    tcase_add_test(tc, plan_files_keep_variants);
    tcase_add_test(tc, replay_refuses_variants_out_of_range);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(variants_suite)
