/* stage_info: which stage is which, written by ck_plan_to_json, read back strictly by
 * ck_plan_from_json, and checked against the model's stages by ck_plan_check_stages. */
#include "planner/plan_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/json.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

#define SHA "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static ck_plan_stage_map map_of(const ck_workload *w)
{
    return (ck_plan_stage_map){&w->chain, w->model, w->stage_first};
}

/* The store-everything plan of w as ckplan plan writes it (with stage_info unless
 * without_map), parsed back from its printed text as run reads a file. */
static cJSON *written(const ck_workload *w, bool without_map)
{
    ck_plan_result res;
    ck_replay plan;
    uint64_t min_budget;
    ck_planner_opts opts = {.slots = 64};
    ck_err err;
    ck_assert_int_eq(ck_planner_run(&w->chain, &ck_planner_none, (1ull << 40), &opts, &res, &plan,
                                    &min_budget, &err), CK_OK);
    ck_plan_doc d = {.planner = "none", .model_path = w->path, .model_sha256 = SHA,
                     .budget_bytes = (1ull << 40), .stages = w->chain.n_stages,
                     .predicted = plan, .baseline = plan, .result = &res,
                     .stage_map = without_map ? (ck_plan_stage_map){0} : map_of(w)};
    cJSON *doc = ck_plan_to_json(&d);
    ck_assert_ptr_nonnull(doc);
    char *text = ck_json_print(doc);
    cJSON_Delete(doc);
    ck_planner_result_free(&res);
    ck_assert_ptr_nonnull(text);
    cJSON *root = NULL;
    ck_assert_int_eq(ck_json_parse("p.json", text, strlen(text), &root, &err), CK_OK);
    free(text);
    return root;
}

static void read_ok(const cJSON *root, ck_plan_file *p)
{
    ck_err err;
    int rc = ck_plan_from_json(root, "p.json", p, &err);
    ck_assert_msg(rc == CK_OK, "%s", err.msg);
}

/* model loaded into w, its plan written into *root and read back into p. */
static void plan_of(const char *model, bool without_map, ck_workload *w, cJSON **root, ck_plan_file *p)
{
    fx_workload_load(model, w);
    *root = written(w, without_map);
    read_ok(*root, p);
}

/* p (read from root) checked against w's stages: accepted when msg is NULL, else refused
 * with exactly msg. Frees all three. */
static void checked_and_freed(ck_plan_file *p, cJSON *root, ck_workload *w, const char *msg)
{
    ck_err err;
    ck_plan_stage_map m = map_of(w);
    ck_assert_int_eq(ck_plan_check_stages(p, &m, &err), msg ? CK_ERR_INPUT : CK_OK);
    if (msg)
        ck_assert_str_eq(err.msg, msg);
    ck_plan_file_free(p);
    cJSON_Delete(root);
    ck_workload_free(w);
}

START_TEST(a_model_plan_names_every_stage_and_its_nodes)
{
    ck_workload w;
    cJSON *root;
    ck_plan_file p;
    plan_of("models/gpt2-tiny.json", false, &w, &root, &p);
    ck_assert_ptr_nonnull(p.stage_info);
    size_t covered = 0;
    for (size_t i = 0; i < w.chain.n_stages; i++) {
        const ck_plan_stage *s = &p.stage_info[i];
        ck_assert_str_eq(s->name, w.chain.stages[i].name);
        ck_assert(s->has_nodes);
        ck_assert_uint_eq(s->n_nodes, w.stage_first[i + 1] - w.stage_first[i]);
        ck_assert_uint_gt(s->n_nodes, 0);
        for (size_t k = 0; k < s->n_nodes; k++, covered++)
            ck_assert_str_eq(s->nodes[k], w.model->nodes[covered].name); /* in model order */
    }
    ck_assert_uint_eq(covered, w.model->n_nodes - 1); /* every node but the loss, once */
    checked_and_freed(&p, root, &w, NULL);
}
END_TEST

START_TEST(a_chain_plan_names_its_stages_without_nodes)
{
    ck_workload w;
    cJSON *root;
    ck_plan_file p;
    plan_of("tests/cli/data/chain10.json", false, &w, &root, &p);
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "stage_info"), 0);
    ck_assert_ptr_null(cJSON_GetObjectItem(first, "nodes")); /* absent, not empty */
    for (size_t i = 0; i < w.chain.n_stages; i++) {
        ck_assert_str_eq(p.stage_info[i].name, w.chain.stages[i].name);
        ck_assert(!p.stage_info[i].has_nodes);
        ck_assert_uint_eq(p.stage_info[i].n_nodes, 0);
    }
    checked_and_freed(&p, root, &w, NULL);
}
END_TEST

START_TEST(a_plan_without_stage_info_is_read_and_passes_the_check)
{
    ck_workload w;
    cJSON *root;
    ck_plan_file p;
    plan_of("models/gpt2-tiny.json", true, &w, &root, &p);
    ck_assert_ptr_null(cJSON_GetObjectItem(root, "stage_info"));
    ck_assert_ptr_null(p.stage_info);
    checked_and_freed(&p, root, &w, NULL);
}
END_TEST

/* The plan of `model` with one part of stage_info replaced by `json`: at `entry` (-1: the
 * whole stage_info), its member `key` (NULL: the entry itself), its element `index` when
 * index >= 0. */
static cJSON *edited(const char *model, int entry, const char *key, int index, const char *json)
{
    ck_workload w;
    fx_workload_load(model, &w);
    cJSON *root = written(&w, false);
    ck_workload_free(&w);
    cJSON *value = cJSON_Parse(json);
    ck_assert_ptr_nonnull(value);
    cJSON *info = cJSON_GetObjectItem(root, "stage_info");
    cJSON *at = entry < 0 ? root : cJSON_GetArrayItem(info, entry);
    const char *member = entry < 0 ? "stage_info" : key;
    if (member && index >= 0)
        ck_assert(cJSON_ReplaceItemInArray(cJSON_GetObjectItem(at, member), index, value));
    else if (member && cJSON_GetObjectItem(at, member))
        ck_assert(cJSON_ReplaceItemInObject(at, member, value));
    else if (member)
        ck_assert(cJSON_AddItemToObject(at, member, value));
    else
        ck_assert(cJSON_ReplaceItemInArray(info, entry, value));
    return root;
}

START_TEST(every_malformed_stage_info_is_refused_naming_its_path)
{
    static const struct {
        int entry;
        const char *key;
        int index;
        const char *json, *msg;
    } cases[] = {
        {-1, NULL, -1, "{}", "p.json: stage_info: expected an array, got an object"},
        {-1, NULL, -1, "[]", "p.json: stage_info: expected 7 entries, one per stage, got 0"},
        {-1, NULL, -1, "[{\"name\": \"embed\"}]", "p.json: stage_info: expected 7 entries, one per stage, got 1"},
        {3, NULL, -1, "\"h.1\"", "p.json: stage_info[3]: expected an object, got the string \"h.1\""},
        {3, NULL, -1, "{\"nodes\": []}", "p.json: stage_info[3].name: missing (expected a string)"},
        {3, "name", -1, "7", "p.json: stage_info[3].name: expected a string, got the number 7"},
        {3, "name", -1, "null", "p.json: stage_info[3].name: expected a string, got null"},
        {3, "nodes", -1, "\"h.1.ln1\"", "p.json: stage_info[3].nodes: expected an array, got the string \"h.1.ln1\""},
        {3, "nodes", 1, "7", "p.json: stage_info[3].nodes[1]: expected a string (a node's name), got the number 7"},
        {3, "nodes", 0, "[\"h.1.ln1\"]", "p.json: stage_info[3].nodes[0]: expected a string (a node's name), got an array"},
        {6, "first", -1, "0", "p.json: stage_info[6].first: unknown field"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cJSON *root = edited("models/gpt2-tiny.json", cases[k].entry, cases[k].key, cases[k].index, cases[k].json);
        ck_plan_file p;
        ck_err err;
        ck_assert_msg(ck_plan_from_json(root, "p.json", &p, &err) == CK_ERR_INPUT, "case %zu", k);
        ck_assert_msg(strncmp(err.msg, cases[k].msg, strlen(cases[k].msg)) == 0,
                      "case %zu: \"%s\", expected \"%s\"", k, err.msg, cases[k].msg);
        cJSON_Delete(root);
    }
}
END_TEST

/* The plan of `model` with its stage_info edited as in `edited`, read back, checked
 * against the model's own stages: refused with this message. */
static void mismatch(const char *model, int entry, const char *key, int index, const char *json,
                     const char *msg)
{
    ck_workload w;
    fx_workload_load(model, &w);
    cJSON *root = edited(model, entry, key, index, json);
    ck_plan_file p;
    read_ok(root, &p);
    checked_and_freed(&p, root, &w, msg);
}

#define OTHER ": the plan was made for other stages; plan it again"

START_TEST(stage_info_that_is_not_the_models_stages_is_refused)
{
    mismatch("models/gpt2-tiny.json", 2, "name", -1, "\"h.2\"",
             "stage_info[2].name: the plan says \"h.2\", the model derives \"h.1\"" OTHER);
    mismatch("models/gpt2-tiny.json", 2, "nodes", 1, "\"h.1.ln2\"",
             "stage_info[2].nodes[1]: the plan says \"h.1.ln2\", the model derives \"h.1.qkv\"" OTHER);
    mismatch("models/gpt2-tiny.json", 2, "nodes", -1, "[\"h.1.ln1\"]",
             "stage_info[2].nodes: the plan says 1 node, the model derives 12 nodes" OTHER);
    mismatch("models/gpt2-tiny.json", 0, NULL, -1, "{\"name\": \"embed..drop_embed\"}",
             "stage_info[0].nodes: the plan says no nodes, the model derives 2 nodes" OTHER);
    mismatch("tests/cli/data/chain10.json", 4, "nodes", -1, "[]",
             "stage_info[4].nodes: the plan says 0 nodes, the model derives no nodes" OTHER);
}
END_TEST

static Suite *stage_info_suite(void)
{
    Suite *s = suite_create("stage_info");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_model_plan_names_every_stage_and_its_nodes);
    tcase_add_test(tc, a_chain_plan_names_its_stages_without_nodes);
    tcase_add_test(tc, a_plan_without_stage_info_is_read_and_passes_the_check);
    tcase_add_test(tc, every_malformed_stage_info_is_refused_naming_its_path);
    tcase_add_test(tc, stage_info_that_is_not_the_models_stages_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(stage_info_suite)
