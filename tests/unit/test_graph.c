#include "planner/graph.h"

#include <stdlib.h>
#include <string.h>

#include "planner/json.h"
#include "tests/unit/check_main.h"

/* A forward diamond and its backward: 0 -> 1, 0 -> 2, (1, 2) -> 3, then the loss 4 reads 3,
 * and the gradients: 5 reads 4, 1, 2; 6 reads 5, 0. Bytes 10, 20, 30, 40, 1, 2, 3; costs
 * 1 .. 7. Links are listed out of order on purpose. */
static const char diamond[] =
    "{\"directed\": true, \"multigraph\": false, \"graph\": {\"name\": \"diamond\"},"
    " \"nodes\": ["
    "{\"id\": 1, \"name\": \"b\", \"backward\": false, \"cost_cpu\": 2, \"cost_ram\": 20},"
    "{\"id\": 0, \"name\": \"a\", \"backward\": false, \"cost_cpu\": 1, \"cost_ram\": 10},"
    "{\"id\": 2, \"name\": \"c\", \"backward\": false, \"cost_cpu\": 3, \"cost_ram\": 30},"
    "{\"id\": 3, \"name\": \"d\", \"backward\": false, \"cost_cpu\": 4, \"cost_ram\": 40},"
    "{\"id\": 4, \"name\": \"Loss\", \"backward\": true, \"cost_cpu\": 5, \"cost_ram\": 1},"
    "{\"id\": 5, \"name\": \"gd\", \"backward\": true, \"cost_cpu\": 6, \"cost_ram\": 2},"
    "{\"id\": 6, \"name\": \"ga\", \"backward\": true, \"cost_cpu\": 7.5, \"cost_ram\": 3}],"
    " \"links\": [{\"source\": 2, \"target\": 3}, {\"source\": 0, \"target\": 1},"
    " {\"source\": 0, \"target\": 2}, {\"source\": 1, \"target\": 3}, {\"source\": 3, \"target\": 4},"
    " {\"source\": 4, \"target\": 5}, {\"source\": 2, \"target\": 5}, {\"source\": 1, \"target\": 5},"
    " {\"source\": 5, \"target\": 6}, {\"source\": 0, \"target\": 6}]}";

static int load_text(const char *text, ck_graph *g, ck_err *err)
{
    cJSON *root = NULL;
    int rc = ck_json_parse("g.json", text, strlen(text), &root, err);
    if (rc == CK_OK)
        rc = ck_graph_from_checkmate(root, "g.json", g, err);
    cJSON_Delete(root);
    return rc;
}

static void load_diamond(ck_graph *g)
{
    ck_err err;
    ck_assert_msg(load_text(diamond, g, &err) == CK_OK, "%s", err.msg);
}

START_TEST(loads_nodes_inputs_users_and_loss)
{
    ck_graph g;
    load_diamond(&g);
    ck_assert_str_eq(g.name, "diamond");
    ck_assert_uint_eq(g.n_nodes, 7);
    ck_assert_uint_eq(g.loss, 4);
    ck_assert_str_eq(g.nodes[0].name, "a");
    ck_assert_uint_eq(g.nodes[3].bytes, 40);
    ck_assert_double_eq(g.nodes[6].cost, 7.5);
    ck_assert(!g.nodes[3].backward && g.nodes[4].backward);
    const size_t in5[] = {1, 2, 4};
    ck_assert_uint_eq(g.nodes[5].n_inputs, 3);
    for (int k = 0; k < 3; k++)
        ck_assert_uint_eq(g.nodes[5].inputs[k], in5[k]);
    const size_t users0[] = {1, 2, 6}, users1[] = {3, 5};
    ck_assert_uint_eq(g.nodes[0].n_users, 3);
    for (int k = 0; k < 3; k++)
        ck_assert_uint_eq(g.nodes[0].users[k], users0[k]);
    ck_assert_uint_eq(g.nodes[1].n_users, 2);
    for (int k = 0; k < 2; k++)
        ck_assert_uint_eq(g.nodes[1].users[k], users1[k]);
    ck_assert_uint_eq(g.nodes[6].n_users, 0);
    ck_graph_free(&g);
}
END_TEST

static void push(ck_graph_schedule *s, ck_graph_op_kind kind, size_t node)
{
    ck_assert(ck_graph_schedule_push(s, kind, node));
}

/* The baseline, by hand: c0 10; c1 30; c2 60; c3 100, frees nothing (1 and 2 are read by 5);
 * c4 101, frees 3 -> 61; c5 63, frees 1, 2, 4 -> 12; c6 15, frees 0, 5 -> 3. Peak 101 at
 * the loss (op 4), time 1+2+3+4+5+6+7.5 = 28.5. */
START_TEST(baseline_by_hand)
{
    ck_graph g;
    load_diamond(&g);
    ck_graph_schedule s;
    ck_err err;
    ck_assert_int_eq(ck_graph_schedule_baseline(&g, &s, &err), CK_OK);
    const ck_graph_op want[] = {{CK_GRAPH_COMPUTE, 0}, {CK_GRAPH_COMPUTE, 1}, {CK_GRAPH_COMPUTE, 2},
                                {CK_GRAPH_COMPUTE, 3}, {CK_GRAPH_COMPUTE, 4}, {CK_GRAPH_FREE, 3},
                                {CK_GRAPH_COMPUTE, 5}, {CK_GRAPH_FREE, 1},    {CK_GRAPH_FREE, 2},
                                {CK_GRAPH_FREE, 4},    {CK_GRAPH_COMPUTE, 6}, {CK_GRAPH_FREE, 0},
                                {CK_GRAPH_FREE, 5}};
    ck_assert_uint_eq(s.n, sizeof want / sizeof want[0]);
    for (size_t k = 0; k < s.n; k++) {
        ck_assert_int_eq(s.ops[k].kind, want[k].kind);
        ck_assert_uint_eq(s.ops[k].node, want[k].node);
    }
    ck_graph_replay r;
    ck_assert_msg(ck_graph_replay_schedule(&g, &s, &r, &err) == CK_OK, "%s", err.msg);
    ck_assert_uint_eq(r.peak_bytes, 101);
    ck_assert_uint_eq(r.peak_op, 4);
    ck_assert_double_eq(r.time, 28.5);
    ck_assert_uint_eq(r.computes, 7);
    ck_graph_schedule_free(&s);
    ck_graph_free(&g);
}
END_TEST

/* Rematerialize 1 and 2 for the backward: c0 10, c1 30, c2 60, c3 100, free 1, free 2 (40 +
 * 10 = 50), c4 51, free 3 (11), c1 31, c2 61, c5 63, free 1, 2, 4 (12), c6 15. Peak 100 at
 * op 3, time 28.5 + 2 + 3. */
START_TEST(replay_with_recomputation)
{
    ck_graph g;
    load_diamond(&g);
    ck_graph_schedule s = {0};
    const size_t c[] = {0, 1, 2, 3};
    for (int k = 0; k < 4; k++)
        push(&s, CK_GRAPH_COMPUTE, c[k]);
    push(&s, CK_GRAPH_FREE, 1);
    push(&s, CK_GRAPH_FREE, 2);
    push(&s, CK_GRAPH_COMPUTE, 4);
    push(&s, CK_GRAPH_FREE, 3);
    push(&s, CK_GRAPH_COMPUTE, 1);
    push(&s, CK_GRAPH_COMPUTE, 2);
    push(&s, CK_GRAPH_COMPUTE, 5);
    push(&s, CK_GRAPH_COMPUTE, 6);
    ck_graph_replay r;
    ck_err err;
    ck_assert_msg(ck_graph_replay_schedule(&g, &s, &r, &err) == CK_OK, "%s", err.msg);
    ck_assert_uint_eq(r.peak_bytes, 100);
    ck_assert_uint_eq(r.peak_op, 3);
    ck_assert_double_eq(r.time, 33.5);
    ck_assert_uint_eq(r.computes, 9);
    ck_graph_schedule_free(&s);
    ck_graph_free(&g);
}
END_TEST

/* Each way a schedule can be invalid, with the operation the message must name. */
START_TEST(replay_names_the_first_bad_operation)
{
    static const struct {
        ck_graph_op ops[4];
        size_t n;
        const char *msg;
    } cases[] = {
        {{{CK_GRAPH_COMPUTE, 0}, {CK_GRAPH_COMPUTE, 3}}, 2,
         "schedule[1] (compute 3): needs node 1 (b), which is not resident"},
        {{{CK_GRAPH_COMPUTE, 0}, {CK_GRAPH_FREE, 0}, {CK_GRAPH_COMPUTE, 1}}, 3,
         "schedule[2] (compute 1): needs node 0 (a), which is not resident"},
        {{{CK_GRAPH_COMPUTE, 0}, {CK_GRAPH_COMPUTE, 0}}, 2,
         "schedule[1] (compute 0): node 0 (a) is already resident"},
        {{{CK_GRAPH_COMPUTE, 0}, {CK_GRAPH_FREE, 1}}, 2, "schedule[1] (free 1): node 1 (b) is not resident"},
        {{{CK_GRAPH_COMPUTE, 7}}, 1, "schedule[0] (compute 7): no such node (the graph has 7)"},
        {{{CK_GRAPH_FREE, 9}}, 1, "schedule[0] (free 9): no such node"},
        {{{CK_GRAPH_COMPUTE, 0}, {CK_GRAPH_COMPUTE, 1}}, 2, "schedule: never computes node 2 (c)"},
    };
    ck_graph g;
    load_diamond(&g);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_graph_schedule s = {0};
        for (size_t k = 0; k < cases[i].n; k++)
            push(&s, cases[i].ops[k].kind, cases[i].ops[k].node);
        ck_graph_replay r;
        ck_err err = {{0}};
        ck_assert_int_eq(ck_graph_replay_schedule(&g, &s, &r, &err), CK_ERR_INPUT);
        ck_assert_msg(strstr(err.msg, cases[i].msg), "case %zu: %s", i, err.msg);
        ck_graph_schedule_free(&s);
    }
    ck_graph_free(&g);
}
END_TEST

/* A schedule that stops before the backward is done. */
START_TEST(replay_needs_every_backward_node)
{
    ck_graph g;
    load_diamond(&g);
    ck_graph_schedule s = {0};
    for (size_t v = 0; v < 6; v++)
        push(&s, CK_GRAPH_COMPUTE, v);
    ck_graph_replay r;
    ck_err err;
    ck_assert_int_eq(ck_graph_replay_schedule(&g, &s, &r, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "never computes node 6 (ga), a backward node"), "%s", err.msg);
    push(&s, CK_GRAPH_COMPUTE, 6);
    ck_assert_int_eq(ck_graph_replay_schedule(&g, &s, &r, &err), CK_OK);
    ck_assert_uint_eq(r.peak_bytes, 10 + 20 + 30 + 40 + 1 + 2 + 3);
    ck_graph_schedule_free(&s);
    ck_graph_free(&g);
}
END_TEST

/* A graph built in memory, past what the loader allows: the replay's sum is checked. */
START_TEST(replay_checks_the_resident_sum)
{
    ck_graph_node nodes[2] = {{.name = "x", .bytes = UINT64_MAX - 5},
                              {.name = "y", .bytes = 10}};
    ck_graph g = {.name = "", .n_nodes = 2, .nodes = nodes, .loss = 2};
    ck_graph_schedule s = {0};
    push(&s, CK_GRAPH_COMPUTE, 0);
    push(&s, CK_GRAPH_COMPUTE, 1);
    ck_graph_replay r;
    ck_err err;
    ck_assert_int_eq(ck_graph_replay_schedule(&g, &s, &r, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "schedule[1] (compute 1): the resident bytes overflow"), "%s", err.msg);
    ck_graph_schedule_free(&s);
}
END_TEST

/* Replaces the first `from` in diamond by `to`. */
static char *edited(const char *from, const char *to)
{
    const char *at = strstr(diamond, from);
    ck_assert_ptr_nonnull(at);
    size_t head = (size_t)(at - diamond), len = strlen(diamond) - strlen(from) + strlen(to);
    char *s = malloc(len + 1);
    ck_assert_ptr_nonnull(s);
    memcpy(s, diamond, head);
    strcpy(s + head, to);
    strcat(s, at + strlen(from));
    return s;
}

/* Each class of bad document, with the file, the path and what was expected. */
START_TEST(loader_names_file_path_and_expectation)
{
    static const struct {
        const char *from, *to, *msg;
    } cases[] = {
        {"\"directed\": true", "\"directed\": false", "g.json: directed: expected true, got false"},
        {"\"multigraph\": false", "\"multigraph\": true", "g.json: multigraph: expected false"},
        {"\"graph\": {\"name\": \"diamond\"}", "\"graph\": {\"nme\": 1}", "g.json: graph.nme: unknown field"},
        {"\"id\": 0,", "\"id\": 1,", "g.json: nodes[1].id: id 1 is also nodes[0]'s"},
        {"\"id\": 0,", "\"id\": 7,", "g.json: nodes[1].id: expected an id below the number of nodes (7)"},
        {"\"id\": 0,", "\"id\": -1,", "g.json: nodes[1].id: expected a non-negative integer"},
        {"\"id\": 0,", "", "g.json: nodes[1].id: missing"},
        {"\"cost_ram\": 10}", "\"cost_ram\": 1.5}", "g.json: nodes[1].cost_ram: expected a non-negative integer"},
        {"\"cost_ram\": 10}", "\"cost_ram\": 9007199254740992}", "g.json: nodes[1].cost_ram: expected"},
        {"\"cost_ram\": 10}", "\"cost_ram\": 9007199254740990}", "g.json: nodes[0].cost_ram: the nodes' bytes add up past 2^53"},
        {"\"cost_cpu\": 1,", "\"cost_cpu\": -1,", "g.json: nodes[1].cost_cpu: expected a finite non-negative number"},
        {"\"cost_cpu\": 1,", "\"cost_cpu\": 1e300,", "g.json: nodes[1].cost_cpu: expected a number from 0 to"},
        {"\"cost_cpu\": 1,", "\"cost_cpu\": \"1\",", "g.json: nodes[1].cost_cpu: expected a finite non-negative number"},
        {"\"backward\": false, \"cost_cpu\": 3", "\"backward\": true, \"cost_cpu\": 3",
         "g.json: nodes[3].backward: expected true, got false: node 3 comes after the first backward node (2"},
        {"\"backward\": false, \"cost_cpu\": 2", "\"cost_cpu\": 2", "g.json: nodes[0].backward: missing"},
        {"\"name\": \"a\"", "\"name\": 5", "g.json: nodes[1].name: expected a string"},
        {"\"name\": \"a\"", "\"nam\": \"a\"", "g.json: nodes[1].nam: unknown field"},
        {"{\"source\": 0, \"target\": 1}", "{\"source\": 1, \"target\": 0}",
         "g.json: links[1]: expected a source below the target, got 1 -> 0"},
        {"{\"source\": 0, \"target\": 1}", "{\"source\": 1, \"target\": 1}", "g.json: links[1]: expected a source below"},
        {"{\"source\": 0, \"target\": 1}", "{\"source\": 0, \"target\": 7}", "g.json: links[1].target: expected a node id below 7, got 7"},
        {"{\"source\": 0, \"target\": 1}", "{\"source\": 0}", "g.json: links[1].target: missing"},
        {"{\"source\": 0, \"target\": 1}", "{\"source\": 0, \"target\": 1, \"key\": 0}", "g.json: links[1].key: unknown field"},
        {"{\"source\": 0, \"target\": 1}", "{\"source\": 1, \"target\": 3}",
         "g.json: links[3]: expected each link once, got a repeat of links[1]"},
        {"{\"source\": 0, \"target\": 1}", "7", "g.json: links[1]: expected an object"},
        {"\"links\": [", "\"links\": 3, \"x\": [", "g.json: x: unknown field"},
        {"\"links\": [", "\"edges\": [", "g.json: edges: unknown field"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = edited(cases[i].from, cases[i].to);
        ck_graph g;
        ck_err err = {{0}};
        ck_assert_msg(load_text(text, &g, &err) == CK_ERR_INPUT, "case %zu loads", i);
        ck_assert_msg(strstr(err.msg, cases[i].msg), "case %zu: %s", i, err.msg);
        free(text);
    }
}
END_TEST

START_TEST(loader_refuses_empty_and_missing_arrays)
{
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"{\"nodes\": [], \"links\": []}", "g.json: nodes: expected at least one node"},
        {"{\"links\": []}", "g.json: nodes: missing"},
        {"{\"nodes\": [{\"id\": 0, \"backward\": false, \"cost_cpu\": 0, \"cost_ram\": 0}]}",
         "g.json: links: missing"},
        {"[1]", "g.json: (top level): expected an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_graph g;
        ck_err err = {{0}};
        ck_assert_int_eq(load_text(cases[i].text, &g, &err), CK_ERR_INPUT);
        ck_assert_msg(strstr(err.msg, cases[i].msg), "case %zu: %s", i, err.msg);
    }
    ck_graph g;
    ck_err err;
    ck_assert_int_eq(load_text("{\"nodes\": [{\"id\": 0, \"backward\": false, \"cost_cpu\": 0, "
                               "\"cost_ram\": 0}], \"links\": []}", &g, &err), CK_OK);
    ck_assert_str_eq(g.nodes[0].name, "n0");
    ck_assert_uint_eq(g.loss, 1);
    ck_graph_free(&g);
}
END_TEST

START_TEST(detects_checkmate_documents)
{
    const char *yes[] = {"{\"nodes\": [], \"links\": []}", "{\"nodes\": []}", "{\"links\": 1}"};
    const char *no[] = {"{\"format\": \"x\", \"nodes\": [], \"links\": []}", "{\"model_type\": 1}", "[]",
                        "{\"format\": \"ckplan-model/1\", \"nodes\": []}"};
    cJSON *root;
    ck_err err;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        ck_assert_int_eq(ck_json_parse("y", yes[i], strlen(yes[i]), &root, &err), CK_OK);
        ck_assert_msg(ck_graph_is_checkmate(root), "%s", yes[i]);
        cJSON_Delete(root);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        ck_assert_int_eq(ck_json_parse("n", no[i], strlen(no[i]), &root, &err), CK_OK);
        ck_assert_msg(!ck_graph_is_checkmate(root), "%s", no[i]);
        cJSON_Delete(root);
    }
}
END_TEST

static size_t *ids(size_t n, const size_t *v)
{
    size_t *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    memcpy(p, v, n * sizeof *p);
    return p;
}

/* A chain a -> b -> loss built in memory: finish fills users and the loss, and refuses what
 * the loader refuses. */
START_TEST(finish_completes_and_checks_built_graphs)
{
    static const size_t in1[] = {0}, in2[] = {1}, bad[] = {1, 0};
    ck_graph g = {.name = strdup("built"), .n_nodes = 3, .nodes = calloc(3, sizeof(ck_graph_node))};
    ck_assert_ptr_nonnull(g.nodes);
    for (size_t v = 0; v < 3; v++) {
        g.nodes[v].name = strdup(v == 2 ? "loss" : "f");
        g.nodes[v].bytes = v + 1;
        g.nodes[v].backward = v == 2;
    }
    g.nodes[1].inputs = ids(1, in1);
    g.nodes[1].n_inputs = 1;
    g.nodes[2].inputs = ids(1, in2);
    g.nodes[2].n_inputs = 1;
    ck_err err;
    ck_assert_msg(ck_graph_finish(&g, &err) == CK_OK, "%s", err.msg);
    ck_assert_uint_eq(g.loss, 2);
    ck_assert_uint_eq(g.nodes[0].n_users, 1);
    ck_assert_uint_eq(g.nodes[0].users[0], 1);
    ck_assert_uint_eq(g.nodes[2].n_users, 0);
    free(g.nodes[2].inputs);
    g.nodes[2].inputs = ids(2, bad);
    g.nodes[2].n_inputs = 2;
    ck_assert_int_eq(ck_graph_finish(&g, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "graph node 2: input 0"), "%s", err.msg);
    g.nodes[2].n_inputs = 1;
    g.nodes[1].backward = true;
    g.nodes[2].backward = false;
    ck_assert_int_eq(ck_graph_finish(&g, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "graph node 2: backward: expected true"), "%s", err.msg);
    ck_graph_free(&g);
}
END_TEST

static Suite *graph_suite(void)
{
    Suite *s = suite_create("graph");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, loads_nodes_inputs_users_and_loss);
    tcase_add_test(tc, baseline_by_hand);
    tcase_add_test(tc, replay_with_recomputation);
    tcase_add_test(tc, replay_names_the_first_bad_operation);
    tcase_add_test(tc, replay_needs_every_backward_node);
    tcase_add_test(tc, replay_checks_the_resident_sum);
    tcase_add_test(tc, loader_names_file_path_and_expectation);
    tcase_add_test(tc, loader_refuses_empty_and_missing_arrays);
    tcase_add_test(tc, detects_checkmate_documents);
    tcase_add_test(tc, finish_completes_and_checks_built_graphs);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(graph_suite)
