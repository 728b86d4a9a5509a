#include "planner/graph_model.h"

#include <stdlib.h>
#include <string.h>

#include "planner/json.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

static void build(const ck_model *m, ck_graph *g)
{
    ck_cost_model cm;
    ck_derive_cost_model_default(&cm);
    ck_err err = {{0}};
    ck_assert_msg(ck_graph_model_build(m, &cm, g, &err) == CK_OK, "%s", err.msg);
}

static void expect_inputs(const ck_graph *g, size_t v, size_t n, const size_t *ids)
{
    ck_assert_uint_eq(g->nodes[v].n_inputs, n);
    for (size_t k = 0; k < n; k++)
        ck_assert_uint_eq(g->nodes[v].inputs[k], ids[k]);
}

/* x -> linear a -> relu r -> add(r, x) s -> mse(s, y). The op table's rules: linear keeps
 * its input (x, which is no node), relu its output, add nothing; x is a float input, so
 * it takes a gradient; every activation here is B*T*C = 64 floats. */
START_TEST(residual_by_hand)
{
    ck_model *m = fx_load(FX_BASE "'nodes': [{'name': 'a', 'op': 'linear', 'out': 'C', 'inputs': ['x']},"
                          " {'name': 'r', 'op': 'relu', 'inputs': ['a']},"
                          " {'name': 's', 'op': 'add', 'inputs': ['r', 'x']},"
                          " {'name': 'loss', 'op': 'mse', 'inputs': ['s', 'y']}]}");
    ck_graph g;
    build(m, &g);
    const uint64_t act = 64 * 4;
    ck_assert_uint_eq(g.n_nodes, 7);
    ck_assert_uint_eq(g.loss, 3);
    const char *names[] = {"a", "r", "s", "loss", "s.backward", "r.backward", "a.backward"};
    for (size_t v = 0; v < 7; v++) {
        ck_assert_str_eq(g.nodes[v].name, names[v]);
        ck_assert(g.nodes[v].backward == (v >= 3));
        ck_assert(g.nodes[v].cost > 0);
    }
    expect_inputs(&g, 0, 0, NULL);
    expect_inputs(&g, 1, 1, (size_t[]){0});
    expect_inputs(&g, 2, 1, (size_t[]){1});
    expect_inputs(&g, 3, 1, (size_t[]){2});
    expect_inputs(&g, 4, 1, (size_t[]){3});    /* the add keeps nothing */
    expect_inputs(&g, 5, 2, (size_t[]){1, 4}); /* relu's output, and the add's gradient */
    expect_inputs(&g, 6, 1, (size_t[]){5});    /* x is static: only the gradient */
    for (size_t v = 0; v < 3; v++)
        ck_assert_uint_eq(g.nodes[v].bytes, act);
    ck_assert_uint_eq(g.nodes[3].bytes, act);     /* the gradient of s */
    ck_assert_uint_eq(g.nodes[4].bytes, 2 * act); /* of r and of x */
    ck_assert_uint_eq(g.nodes[5].bytes, act);
    ck_assert_uint_eq(g.nodes[6].bytes, act);
    ck_assert_uint_eq(g.nodes[5].n_users, 1);
    ck_assert_uint_eq(g.nodes[5].users[0], 6);
    ck_graph_free(&g);
    ck_model_free(m);
}
END_TEST

/* A node keeps its internal tensors beside its output: dropout's u8 mask. */
START_TEST(internal_tensors_go_with_the_forward_node)
{
    ck_model *m = fx_load(FX_BASE "'nodes': [{'name': 'a', 'op': 'linear', 'out': 'C', 'inputs': ['x']},"
                          " {'name': 'd', 'op': 'dropout', 'p': 0.5, 'inputs': ['a']},"
                          " {'name': 'loss', 'op': 'mse', 'inputs': ['d', 'y']}]}");
    ck_graph g;
    build(m, &g);
    ck_assert_uint_eq(g.nodes[1].bytes, 64 * 4 + 64);
    /* dropout's backward reads its mask, which lives in its forward node */
    expect_inputs(&g, 3, 2, (size_t[]){1, 2});
    ck_graph_free(&g);
    ck_model_free(m);
}
END_TEST

/* Every shipped model: the graph is well formed (ck_graph_finish accepted it), every
 * forward node but the loss's input reaches a backward node or a later forward node, the
 * backward nodes follow the loss, and the no-rematerialization baseline replays. Written
 * out as a Checkmate document and read back, it is the same graph. */
static void check_model_file(const char *path)
{
    ck_model *m = fx_load_file(path);
    ck_graph g;
    build(m, &g);
    size_t backward = 0;
    for (size_t k = 0; k + 1 < m->n_nodes; k++)
        backward += m->nodes[k].backward;
    ck_assert_uint_eq(g.n_nodes, m->n_nodes + backward);
    for (size_t v = 0; v < g.loss; v++)
        ck_assert_msg(g.nodes[v].n_users > 0, "%s: %s is read by nothing", path, g.nodes[v].name);
    ck_graph_schedule base;
    ck_graph_replay r;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_graph_schedule_baseline(&g, &base, &err), CK_OK);
    ck_assert_msg(ck_graph_replay_schedule(&g, &base, &r, &err) == CK_OK, "%s: %s", path, err.msg);
    ck_assert_uint_eq(r.computes, g.n_nodes);

    cJSON *written = ck_graph_to_checkmate(&g), *doc;
    ck_assert_ptr_nonnull(written);
    char *text = ck_json_print(written);
    ck_assert_int_eq(ck_json_parse("g.json", text, strlen(text), &doc, &err), CK_OK);
    free(text);
    cJSON_Delete(written);
    ck_graph back;
    ck_assert_msg(ck_graph_from_checkmate(doc, "g.json", &back, &err) == CK_OK, "%s", err.msg);
    ck_assert_uint_eq(back.n_nodes, g.n_nodes);
    for (size_t v = 0; v < g.n_nodes; v++) {
        ck_assert_str_eq(back.nodes[v].name, g.nodes[v].name);
        ck_assert(back.nodes[v].backward == g.nodes[v].backward);
        ck_assert(back.nodes[v].cost == g.nodes[v].cost);
        ck_assert_uint_eq(back.nodes[v].bytes, g.nodes[v].bytes);
        ck_assert_uint_eq(back.nodes[v].transient_bytes, g.nodes[v].transient_bytes);
        ck_assert_uint_eq(back.nodes[v].n_inputs, g.nodes[v].n_inputs);
        for (size_t k = 0; k < g.nodes[v].n_inputs; k++) /* a node without inputs may have none */
            ck_assert_uint_eq(back.nodes[v].inputs[k], g.nodes[v].inputs[k]);
    }
    ck_graph_replay again;
    ck_assert_int_eq(ck_graph_replay_schedule(&back, &base, &again, &err), CK_OK);
    ck_assert_uint_eq(again.peak_bytes, r.peak_bytes);
    ck_graph_free(&back);
    cJSON_Delete(doc);
    ck_graph_schedule_free(&base);
    ck_graph_free(&g);
    ck_model_free(m);
}

START_TEST(shipped_models)
{
    const char *files[] = {"models/gpt2-tiny.json", "models/llama-tiny.json", "models/mlp-deep.json",
                           "models/gpt2-small.json"};
    for (size_t k = 0; k < sizeof files / sizeof *files; k++)
        check_model_file(files[k]);
}
END_TEST

static Suite *graph_model_suite(void)
{
    Suite *s = suite_create("graph_model");
    TCase *tc = tcase_create("graph_model");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, residual_by_hand);
    tcase_add_test(tc, internal_tensors_go_with_the_forward_node);
    tcase_add_test(tc, shipped_models);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(graph_model_suite)
