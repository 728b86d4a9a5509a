/* Loading models with many names: every name found through the indexes resolves to the
 * right node, input, block or table; repeats are reported at the first repeated position
 * in file order; count limits are checked before the entries they count are read. */
#include "planner/model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/json.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

/* A growing text, for models too large for the fixtures' printf buffer. */
typedef struct {
    char *s;
    size_t len, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    ck_assert_int_ge(n, 0);
    while (t->len + (size_t)n + 1 > t->cap) {
        t->cap = t->cap ? 2 * t->cap : 4096;
        t->s = realloc(t->s, t->cap);
        ck_assert_ptr_nonnull(t->s);
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

/* Loads t (and frees it): the model, or NULL with the message in err. */
static ck_model *load(text *t, ck_err *err)
{
    cJSON *root = NULL;
    ck_model *m = NULL;
    int rc = ck_json_parse(FX_FILE, t->s, t->len, &root, err);
    if (rc == CK_OK)
        rc = ck_model_from_json(root, FX_FILE, &m, err);
    cJSON_Delete(root);
    free(t->s);
    ck_assert(rc == CK_OK || m == NULL);
    return m;
}

static ck_model *load_ok(text *t)
{
    ck_err err = {{0}};
    ck_model *m = load(t, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    return m;
}

static const char *load_refused(text *t)
{
    static ck_err err;
    ck_model *m = load(t, &err);
    ck_assert_ptr_null(m);
    return err.msg;
}

#define HEAD "{\"format\": \"ckplan-model/1\", \"dims\": {\"B\": 2, \"C\": 4}, "
#define N 3000

#define NAME_MAX_LEN 32

/* The name of entry i - 1 of a chain of entries named <prefix>0, <prefix>1...: x for i = 0. */
static const char *before(char buf[NAME_MAX_LEN], const char *prefix, size_t i)
{
    if (i == 0)
        return "x";
    snprintf(buf, NAME_MAX_LEN, "%.8s%zu", prefix, i - 1);
    return buf;
}

/* Node i reads node i - 1 and input i + 1 (the inputs are defined in the reverse order of
 * their use, so that positions in the file and in sorted order differ). */
START_TEST(many_nodes_and_inputs_resolve)
{
    text t = {0};
    put(&t, HEAD "\"inputs\": [{\"name\": \"x\", \"shape\": [\"B\", \"C\"]}");
    for (size_t i = N; i-- > 0;)
        put(&t, ", {\"name\": \"in%zu\", \"shape\": [\"B\", \"C\"]}", i);
    put(&t, ", {\"name\": \"y\", \"shape\": [\"B\", \"C\"]}], \"nodes\": [");
    char prev[NAME_MAX_LEN];
    for (size_t i = 0; i < N; i++)
        put(&t, "{\"name\": \"s%zu\", \"op\": \"add\", \"inputs\": [\"%s\", \"in%zu\"]}, ",
            i, before(prev, "s", i), i);
    put(&t, "{\"name\": \"loss\", \"op\": \"mse\", \"inputs\": [\"s%d\", \"y\"]}]}", N - 1);
    ck_model *m = load_ok(&t);
    ck_assert_uint_eq(m->n_nodes, N + 1);
    ck_assert_uint_eq(m->n_inputs, N + 2);
    ck_assert_uint_eq(m->nodes[0].inputs[0], 0);
    for (size_t i = 0; i < N; i++) {
        if (i > 0)
            ck_assert_uint_eq(m->nodes[i].inputs[0], m->nodes[i - 1].output);
        size_t in = m->nodes[i].inputs[1];
        ck_assert_uint_eq(in, N - i); /* in<N-1> is tensor 1 */
        char want[NAME_MAX_LEN];
        snprintf(want, sizeof want, "in%zu", i);
        ck_assert_str_eq(m->tensors[in].name, want);
    }
    ck_assert_str_eq(m->tensors[m->nodes[N].inputs[1]].name, "y");
    ck_model_free(m);
}
END_TEST

/* Block i is a linear layer to width i + 5, and the instances use the blocks in the
 * reverse order of their definition: each output's width says which block was expanded. */
START_TEST(many_blocks_resolve)
{
    text t = {0};
    put(&t, HEAD "\"inputs\": [{\"name\": \"x\", \"shape\": [\"B\", \"C\"]},"
               " {\"name\": \"y\", \"shape\": [\"B\", 5]}], \"blocks\": {");
    for (size_t i = 0; i < N; i++)
        put(&t, "%s\"b%zu\": {\"input\": \"u\", \"nodes\": [{\"name\": \"l\", \"op\": \"linear\","
                " \"out\": %zu, \"inputs\": [\"u\"]}]}", i ? ", " : "", i, i + 5);
    put(&t, "}, \"nodes\": [");
    char prev[NAME_MAX_LEN];
    for (size_t k = 0; k < N; k++)
        put(&t, "{\"name\": \"h%zu\", \"block\": \"b%zu\", \"inputs\": [\"%s\"]}, ", k,
            N - 1 - k, before(prev, "h", k));
    put(&t, "{\"name\": \"loss\", \"op\": \"mse\", \"inputs\": [\"h%d\", \"y\"]}]}", N - 1);
    ck_model *m = load_ok(&t);
    ck_assert_uint_eq(m->n_nodes, N + 1);
    for (size_t k = 0; k < N; k++) {
        const ck_tensor *out = &m->tensors[m->nodes[k].output];
        ck_assert_uint_eq(out->type.dim[out->type.rank - 1], N - 1 - k + 5);
    }
    ck_model_free(m);
}
END_TEST

/* Embedding i has vocab i + 2, and head i is tied to it: each finds its own table. */
START_TEST(many_tied_heads_find_their_tables)
{
    text t = {0};
    put(&t, HEAD "\"inputs\": [{\"name\": \"x\", \"shape\": [\"B\", \"C\"]},"
               " {\"name\": \"ids\", \"shape\": [\"B\"], \"dtype\": \"int32\"},"
               " {\"name\": \"y\", \"shape\": [\"B\", \"C\"]}], \"nodes\": [");
    char prev[NAME_MAX_LEN];
    for (size_t i = 0; i < N / 4; i++) {
        put(&t, "{\"name\": \"e%zu\", \"op\": \"embedding\", \"vocab\": %zu, \"dim\": \"C\","
                " \"inputs\": [\"ids\"]}, ", i, i + 2);
        put(&t, "{\"name\": \"j%zu\", \"op\": \"add\", \"inputs\": [\"%s\", \"e%zu\"]}, ", i,
            before(prev, "p", i), i);
        put(&t, "{\"name\": \"t%zu\", \"op\": \"linear\", \"out\": %zu, \"bias\": false,"
                " \"tied\": true, \"inputs\": [\"j%zu\"]}, ", i, i + 2, i);
        put(&t, "{\"name\": \"p%zu\", \"op\": \"linear\", \"out\": \"C\", \"inputs\": [\"t%zu\"]}, ",
            i, i);
    }
    put(&t, "{\"name\": \"loss\", \"op\": \"mse\", \"inputs\": [\"%s\", \"y\"]}]}",
        before(prev, "p", N / 4));
    ck_model *m = load_ok(&t);
    ck_assert_uint_eq(m->n_nodes, N + 1);
    for (size_t i = 0; i < N / 4; i++) {
        const ck_node *head = &m->nodes[4 * i + 2];
        ck_assert(head->attrs.tied);
        ck_assert_uint_eq(head->info.n_params, 0); /* the table is the embedding's */
        ck_assert_uint_eq(head->tied_to, 4 * i);
        ck_assert_uint_eq(m->nodes[4 * i].attrs.vocab, i + 2);
    }
    ck_model_free(m);
}
END_TEST

/* The table must come earlier in the step: one of the right sizes after the head does not
 * count, and one inside an earlier block instance does. */
START_TEST(tied_heads_need_an_earlier_table)
{
    fx_assert_has(fx_refuse("{'format': 'ckplan-model/1', 'dims': {'B': 2, 'C': 4},"
                            " 'inputs': [{'name': 'x', 'shape': ['B', 'C']},"
                            "  {'name': 'ids', 'shape': ['B'], 'dtype': 'int32'},"
                            "  {'name': 'y', 'shape': ['B', 'C']}],"
                            " 'nodes': [{'name': 't', 'op': 'linear', 'out': 'C', 'bias': false,"
                            "  'tied': true, 'inputs': ['x']},"
                            "  {'name': 'e', 'op': 'embedding', 'vocab': 'C', 'dim': 'C', 'inputs': ['ids']},"
                            "  {'name': 'j', 'op': 'add', 'inputs': ['t', 'e']},"
                            "  {'name': 'loss', 'op': 'mse', 'inputs': ['j', 'y']}]}"),
                  FX_FILE ": nodes[0].tied: expected an earlier embedding with vocab = out (4)", NULL);
    ck_model *m = fx_load("{'format': 'ckplan-model/1', 'dims': {'B': 2, 'C': 4},"
                          " 'inputs': [{'name': 'ids', 'shape': ['B'], 'dtype': 'int32'},"
                          "  {'name': 'y', 'shape': ['B', 'C']}],"
                          " 'blocks': {'emb': {'input': 'u', 'nodes': [{'name': 'e', 'op': 'embedding',"
                          "  'vocab': 'C', 'dim': 'C', 'inputs': ['u']}]}},"
                          " 'nodes': [{'name': 'h', 'block': 'emb', 'inputs': ['ids']},"
                          "  {'name': 't', 'op': 'linear', 'out': 'C', 'bias': false, 'tied': true,"
                          "  'inputs': ['h']},"
                          "  {'name': 'loss', 'op': 'mse', 'inputs': ['t', 'y']}]}");
    ck_assert(m->nodes[1].attrs.tied);
    ck_assert_uint_eq(m->nodes[1].tied_to, 0);
    ck_assert_uint_eq(m->nodes[0].tied_to, CK_NO_NODE);
    ck_model_free(m);
    /* Of two tables of the head's sizes, the first is the one it shares. */
    m = fx_load("{'format': 'ckplan-model/1', 'dims': {'B': 2, 'C': 4},"
                " 'inputs': [{'name': 'ids', 'shape': ['B'], 'dtype': 'int32'},"
                "  {'name': 'y', 'shape': ['B', 'C']}],"
                " 'nodes': [{'name': 'e', 'op': 'embedding', 'vocab': 'C', 'dim': 'C', 'inputs': ['ids']},"
                "  {'name': 'f', 'op': 'embedding', 'vocab': 'C', 'dim': 'C', 'inputs': ['ids']},"
                "  {'name': 's', 'op': 'add', 'inputs': ['e', 'f']},"
                "  {'name': 't', 'op': 'linear', 'out': 'C', 'bias': false, 'tied': true,"
                "  'inputs': ['s']},"
                "  {'name': 'loss', 'op': 'mse', 'inputs': ['t', 'y']}]}");
    ck_assert_uint_eq(m->nodes[3].tied_to, 0);
    ck_model_free(m);
}
END_TEST

/* Of many repeated names, the one reported is the first repeat in file order, named at
 * both positions: here q repeats at nodes[2001] (first at nodes[1500]), while a, which
 * sorts first, repeats only at nodes[2500]. */
START_TEST(the_first_repeat_in_file_order_is_reported)
{
    text t = {0};
    put(&t, HEAD "\"inputs\": [{\"name\": \"x\", \"shape\": [\"B\", \"C\"]}], \"nodes\": [");
    for (size_t i = 0; i < N; i++) {
        char name[NAME_MAX_LEN];
        snprintf(name, sizeof name, "n%zu", i);
        const char *shown = i == 10 || i == 2500 ? "a" : i == 1500 || i == 2001 ? "q" : name;
        put(&t, "%s{\"name\": \"%s\", \"op\": \"relu\", \"inputs\": [\"x\"]}", i ? ", " : "", shown);
    }
    put(&t, "]}");
    fx_assert_has(load_refused(&t), FX_FILE ": nodes[2001]: duplicate name \"q\" (also nodes[1500])",
                  NULL);
}
END_TEST

/* Errors come in file order whether a repeat or another mistake comes first. */
START_TEST(repeats_and_other_errors_in_file_order)
{
    const char *r = "{'name': 'r', 'op': 'relu', 'inputs': ['x']}";
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [%s, %s, 5]}", r, r),
                  FX_FILE ": nodes[1]: duplicate name \"r\" (also nodes[0])", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [%s, 5, %s]}", r, r),
                  FX_FILE ": nodes[1]: expected a node object, got the number 5", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [%s, {'name': '9'}, %s]}", r, r),
                  FX_FILE ": nodes[1].name: expected a name made of letters", NULL);
    const char *x = "{'name': 'x', 'shape': [2]}";
    fx_assert_has(fx_refuse("{'format': 'ckplan-model/1', 'inputs': [%s, %s, {'name': 'z'}],"
                            " 'nodes': []}", x, x),
                  FX_FILE ": inputs[1]: duplicate name \"x\" (also inputs[0])", NULL);
    fx_assert_has(fx_refuse("{'format': 'ckplan-model/1', 'inputs': [%s, {'name': 'z'}, %s],"
                            " 'nodes': []}", x, x),
                  FX_FILE ": inputs[1].shape: missing", NULL);
    const char *b = "{'input': 'u', 'nodes': [{'name': 'r', 'op': 'relu', 'inputs': ['u']}]}";
    fx_assert_has(fx_refuse(FX_BASE "'blocks': {'b': %s, 'c': %s, 'b': {'input': 'u', 'nodes': []}},"
                            " 'nodes': []}", b, b),
                  FX_FILE ": blocks.b: field given twice", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'blocks': {'b': {'nodes': 3}, 'b': %s}, 'nodes': []}", b),
                  FX_FILE ": blocks.b: field given twice", NULL);
    fx_assert_has(fx_refuse("{'format': 'ckplan-model/1', 'dims': {'B': 2, 'C': 4, 'B': 3},"
                            " 'inputs': [], 'nodes': []}"),
                  FX_FILE ": dims.B: field given twice", NULL);
}
END_TEST

/* `count` entries of `entry` as the node list at `where` of a model, which is refused for
 * their number before any of them is read: the entries are not even node objects. */
static const char *too_many(const char *where, size_t count, const char *entry)
{
    text t = {0};
    put(&t, HEAD "\"inputs\": [{\"name\": \"x\", \"shape\": [\"B\", \"C\"]}], %s[", where);
    for (size_t i = 0; i < count; i++)
        put(&t, "%s%s", i ? "," : "", entry);
    put(&t, "]%s}", strncmp(where, "\"blocks\"", 8) == 0 ? "}}, \"nodes\": [0]" : "");
    return load_refused(&t);
}

START_TEST(node_counts_are_checked_before_the_nodes)
{
    fx_assert_has(too_many("\"nodes\": ", CK_MODEL_MAX_NODES + 1, "0"),
                  FX_FILE ": nodes: 200001 nodes is more than the limit of 200000 nodes",
                  "CK_MODEL_MAX_NODES", NULL);
    fx_assert_has(too_many("\"blocks\": {\"b\": {\"input\": \"u\", \"nodes\": ", CK_MODEL_MAX_NODES + 1, "0"),
                  FX_FILE ": blocks.b.nodes: 200001 nodes is more than the limit of 200000 nodes", NULL);
    /* at the limit the entries are read, and the first is wrong */
    fx_assert_has(too_many("\"nodes\": ", CK_MODEL_MAX_NODES, "0"),
                  FX_FILE ": nodes[0]: expected a node object", NULL);
}
END_TEST

static Suite *loading_suite(void)
{
    Suite *s = suite_create("loading");
    TCase *tc = tcase_create("loading");
    tcase_set_timeout(tc, 60); /* the sanitizer build */
    tcase_add_test(tc, many_nodes_and_inputs_resolve);
    tcase_add_test(tc, many_blocks_resolve);
    tcase_add_test(tc, many_tied_heads_find_their_tables);
    tcase_add_test(tc, tied_heads_need_an_earlier_table);
    tcase_add_test(tc, the_first_repeat_in_file_order_is_reported);
    tcase_add_test(tc, repeats_and_other_errors_in_file_order);
    tcase_add_test(tc, node_counts_are_checked_before_the_nodes);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(loading_suite)
