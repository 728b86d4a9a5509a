/* plan_check: a plan file's figures against the replay of its schedule. */
#include "planner/plan_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/json.h"
#include "planner/planner.h"
#include "tests/unit/chaingen.h"
#include "tests/unit/check_main.h"

#define STATIC_BYTES 100
/* The model's static memory by part, summing to STATIC_BYTES. */
static const ck_static_mem statics = {.n_params = 10, .params = 40, .grads = 20, .optimizer = 30,
                                      .master = 6, .held_inputs = 4, .total = STATIC_BYTES};

/* Eight stages of 4 bytes, time 1 each way: the baseline takes 16. */
#define STAGES 8
#define BUDGET 24

/* A plan file as ckplan plan writes it for that chain with STATIC_BYTES of static memory:
 * the dp plan at an activation budget of BUDGET, read back from its JSON text. */
static void written_plan(ck_chain *c, ck_plan_file *p)
{
    ck_assert_int_eq(ck_chaingen_uniform(c, STAGES, 4, NULL), CK_OK);
    ck_plan_result res;
    ck_replay plan, base;
    uint64_t min_budget;
    ck_planner_opts opts = {.slots = BUDGET};
    ck_err err;
    ck_assert_int_eq(ck_planner_run(c, &ck_planner_dp, BUDGET, &opts, &res, &plan, &min_budget, &err), CK_OK);
    ck_schedule bs = {0};
    ck_assert_int_eq(ck_schedule_baseline(c, &bs, NULL), CK_OK);
    ck_assert_int_eq(ck_schedule_replay(c, &bs, &base, NULL, NULL, NULL), CK_OK);
    ck_schedule_free(&bs);
    ck_assert_uint_gt(base.peak_bytes, BUDGET); /* a plan that recomputes */
    ck_cost_model cost = {3e9, 7e8};
    ck_plan_doc d = {.planner = "dp", .model_path = "m.json", .model_sha256 =
                     "00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff",
                     .budget_bytes = STATIC_BYTES + BUDGET, .static_bytes = STATIC_BYTES,
                     .statics = &statics,
                     .stages = c->n_stages, .predicted = plan, .baseline = base, .result = &res,
                     .cost_model = &cost, .costs_path = "costs.json"};
    cJSON *written = ck_plan_to_json(&d);
    ck_assert_ptr_nonnull(written);
    char *text = ck_json_print(written); /* numbers are written as text: read them as run does */
    cJSON_Delete(written);
    ck_assert_ptr_nonnull(text);
    cJSON *json = NULL;
    ck_assert_int_eq(ck_json_parse("p.json", text, strlen(text), &json, &err), CK_OK);
    free(text);
    int rc = ck_plan_from_json(json, "p.json", p, &err);
    ck_assert_msg(rc == CK_OK, "%s", err.msg);
    cJSON_Delete(json);
    ck_planner_result_free(&res);
    ck_assert(p->has_cost_model);
    ck_assert_double_eq(p->cost_model.gemm_flops, 3e9);
    ck_assert_double_eq(p->cost_model.mem_bandwidth, 7e8);
    ck_assert_str_eq(p->costs_path, "costs.json");
    /* what ckplan adds for a model: its parameter count and the static memory by part */
    ck_assert(p->has_parameters);
    ck_assert_uint_eq(p->parameters, 10);
    ck_assert(p->predicted.has_static);
    const uint64_t parts[CK_PLAN_STATIC_PARTS] = {40, 20, 30, 6, 4};
    ck_assert_mem_eq(p->predicted.statics.bytes, parts, sizeof parts);
}

static ck_plan_check checked(const ck_chain *c, const ck_plan_file *p)
{
    ck_plan_check out;
    ck_err err;
    int rc = ck_plan_check_replay(p, c, NULL, STATIC_BYTES, &out, &err);
    ck_assert_msg(rc == CK_OK, "%s", err.msg);
    ck_plan_check_statics(p, &statics, &out);
    return out;
}

START_TEST(a_written_plan_matches_its_replay)
{
    ck_chain c;
    ck_plan_file p;
    written_plan(&c, &p);
    ck_plan_check out = checked(&c, &p);
    ck_assert_uint_eq(out.n_differences, 0);
    ck_assert_double_eq(out.replayed.baseline_time, 2 * STAGES);
    ck_assert_uint_eq(out.replayed.baseline_peak_bytes, STATIC_BYTES + out.replayed.baseline_activation_peak_bytes);
    ck_assert_uint_le(out.replayed.activation_peak_bytes, BUDGET);
    ck_assert_double_gt(out.replayed.time, 2 * STAGES);
    ck_assert_uint_eq(out.replayed.peak_bytes, STATIC_BYTES + out.replayed.activation_peak_bytes);
    ck_assert_uint_eq(out.replayed.static_bytes, STATIC_BYTES);
    ck_assert_double_eq(out.replayed.overhead, out.replayed.time / (2 * STAGES) - 1);
    ck_assert_mem_eq(&out.replayed, &p.predicted, sizeof p.predicted);
    ck_plan_file_free(&p);
    ck_chain_free(&c);
}
END_TEST

/* Each figure edited on its own is found, named, with both values. */
START_TEST(every_edited_figure_is_named)
{
    ck_chain c;
    ck_plan_file p;
    written_plan(&c, &p);
    ck_plan_figures f = p.predicted;
    uint64_t parameters = p.parameters;
    struct { const char *field; void *at; bool is_time; } fields[] = {
        {"model.parameters", &p.parameters, false},
        {"predicted.static.parameters", &p.predicted.statics.bytes[0], false},
        {"predicted.static.gradients", &p.predicted.statics.bytes[1], false},
        {"predicted.static.optimizer_state", &p.predicted.statics.bytes[2], false},
        {"predicted.static.master_weights", &p.predicted.statics.bytes[3], false},
        {"predicted.static.inputs", &p.predicted.statics.bytes[4], false},
        {"predicted.peak_bytes", &p.predicted.peak_bytes, false},
        {"predicted.activation_peak_bytes", &p.predicted.activation_peak_bytes, false},
        {"predicted.static_bytes", &p.predicted.static_bytes, false},
        {"predicted.baseline_peak_bytes", &p.predicted.baseline_peak_bytes, false},
        {"predicted.baseline_activation_peak_bytes", &p.predicted.baseline_activation_peak_bytes, false},
        {"predicted.time", &p.predicted.time, true},
        {"predicted.baseline_time", &p.predicted.baseline_time, true},
        {"predicted.overhead", &p.predicted.overhead, true},
    };
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++)
        for (int sign = -1; sign <= 1; sign += 2) {
            p.predicted = f;
            p.parameters = parameters;
            if (fields[k].is_time)
                *(double *)fields[k].at += sign * 0.5;
            else
                *(uint64_t *)fields[k].at += (uint64_t)(int64_t)sign;
            ck_plan_check out = checked(&c, &p);
            ck_assert_uint_eq(out.n_differences, 1);
            const ck_plan_difference *d = &out.differences[0];
            ck_assert_str_eq(d->field, fields[k].field);
            ck_assert(d->is_time == fields[k].is_time);
            char what[256], plan[64], replayed[64];
            ck_plan_check_describe(d, what, sizeof what);
            if (d->is_time) {
                ck_assert_double_eq(d->plan_time, *(double *)fields[k].at);
                snprintf(plan, sizeof plan, "says %.15g", d->plan_time);
                snprintf(replayed, sizeof replayed, "gives %.15g", d->replayed_time);
            } else {
                ck_assert_uint_eq(d->plan_bytes, *(uint64_t *)fields[k].at);
                ck_assert_uint_eq(d->replayed_bytes + (uint64_t)(int64_t)sign, d->plan_bytes);
                snprintf(plan, sizeof plan, "says %llu", (unsigned long long)d->plan_bytes);
                snprintf(replayed, sizeof replayed, "%s %llu", d->is_count ? "the model has" : "gives",
                         (unsigned long long)d->replayed_bytes);
            }
            ck_assert_msg(strstr(what, fields[k].field) && strstr(what, plan) && strstr(what, replayed),
                          "%s", what);
        }
    ck_plan_file_free(&p);
    ck_chain_free(&c);
}
END_TEST

START_TEST(a_budget_below_the_replayed_peak_is_found)
{
    ck_chain c;
    ck_plan_file p;
    written_plan(&c, &p);
    uint64_t peak = p.predicted.peak_bytes;
    p.budget_bytes = peak;
    ck_assert_uint_eq(checked(&c, &p).n_differences, 0);
    p.budget_bytes = peak - 1;
    ck_plan_check out = checked(&c, &p);
    ck_assert_uint_eq(out.n_differences, 1);
    ck_assert_str_eq(out.differences[0].field, "budget_bytes");
    ck_assert_uint_eq(out.differences[0].plan_bytes, peak - 1);
    ck_assert_uint_eq(out.differences[0].replayed_bytes, peak);
    /* Lowering the claimed peak with it hides nothing: the replay decides. */
    p.predicted.peak_bytes = peak - 1;
    ck_assert_uint_eq(checked(&c, &p).n_differences, 2);
    ck_plan_file_free(&p);
    ck_chain_free(&c);
}
END_TEST

START_TEST(times_agree_within_the_tolerance_only)
{
    ck_chain c;
    ck_plan_file p;
    written_plan(&c, &p);
    double t = p.predicted.time;
    p.predicted.time = t * (1 + CK_PLAN_TIME_TOLERANCE / 4);
    ck_assert_uint_eq(checked(&c, &p).n_differences, 0);
    p.predicted.time = t * (1 + 4 * CK_PLAN_TIME_TOLERANCE);
    ck_assert_uint_eq(checked(&c, &p).n_differences, 1);
    ck_plan_file_free(&p);
    ck_chain_free(&c);
}
END_TEST

/* A schedule edited into another valid one replays to other figures than the file's. */
START_TEST(an_edited_schedule_no_longer_matches)
{
    ck_chain c;
    ck_plan_file p;
    written_plan(&c, &p);
    ck_schedule_free(&p.schedule);
    ck_assert_int_eq(ck_schedule_baseline(&c, &p.schedule, NULL), CK_OK);
    ck_plan_check out = checked(&c, &p);
    ck_assert_uint_gt(out.n_differences, 0);
    ck_assert_uint_gt(out.replayed.activation_peak_bytes, BUDGET);
    ck_assert_str_eq(out.differences[0].field, "budget_bytes");
    ck_plan_file_free(&p);
    ck_chain_free(&c);
}
END_TEST

START_TEST(an_invalid_schedule_is_an_input_error)
{
    ck_chain c;
    ck_plan_file p;
    written_plan(&c, &p);
    p.schedule.n--; /* no longer ends with y_0 */
    ck_plan_check out;
    ck_err err;
    ck_assert_int_eq(ck_plan_check_replay(&p, &c, NULL, STATIC_BYTES, &out, &err), CK_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(err.msg, "y_0"));
    ck_plan_file_free(&p);
    ck_chain_free(&c);
}
END_TEST

START_TEST(a_sha256_that_is_not_64_hex_digits_is_refused)
{
    const char *bad[] = {"xyz", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeef",
                         "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff0",
                         "g0112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "{\"format\": \"ckplan-plan/1\", \"planner\": \"none\", \"model\": {\"path\": \"m\", "
                 "\"sha256\": \"%s\"}, \"budget_bytes\": 1, \"stages\": 1, \"predicted\": {}, "
                 "\"schedule\": []}", bad[k]);
        cJSON *root = cJSON_Parse(text);
        ck_plan_file p;
        ck_err err;
        ck_assert_int_eq(ck_plan_from_json(root, "p.json", &p, &err), CK_ERR_INPUT);
        ck_assert_msg(strstr(err.msg, "p.json: model.sha256: expected 64 hexadecimal digits"), "%s", err.msg);
        cJSON_Delete(root);
    }
}
END_TEST

static Suite *plan_check_suite(void)
{
    Suite *s = suite_create("plan_check");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, a_written_plan_matches_its_replay);
    tcase_add_test(tc, every_edited_figure_is_named);
    tcase_add_test(tc, a_budget_below_the_replayed_peak_is_found);
    tcase_add_test(tc, times_agree_within_the_tolerance_only);
    tcase_add_test(tc, an_edited_schedule_no_longer_matches);
    tcase_add_test(tc, an_invalid_schedule_is_an_input_error);
    tcase_add_test(tc, a_sha256_that_is_not_64_hex_digits_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(plan_check_suite)
