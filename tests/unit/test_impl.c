/* Implementation profiles (planner/impl, docs/profiles.md): every choice names a boolean
 * attribute of its op; a profile fills what a node leaves unset and nothing a node says;
 * --impl wins over training.impl; unknown names are refused with the file and the field. */
#include "planner/impl.h"

#include <string.h>

#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

/* The op of kind k, found through the table's names. */
static const ck_op_def *op_of_kind(ck_op_kind k)
{
    char names[1024];
    snprintf(names, sizeof names, "%s", ck_op_names());
    for (char *save = NULL, *name = strtok_r(names, ", ", &save); name;
         name = strtok_r(NULL, ", ", &save)) {
        const ck_op_def *op = ck_op_find(name);
        if (op && op->kind == k)
            return op;
    }
    return NULL;
}

START_TEST(every_choice_names_a_boolean_attribute)
{
    ck_assert_uint_eq(ck_impl_count(), 3);
    for (size_t i = 0; i < ck_impl_count(); i++) {
        const ck_impl *p = ck_impl_at(i);
        ck_assert_ptr_eq(ck_impl_find(p->name), p);
        ck_assert(!p->base || p->base->base == NULL); /* one level: a base is listed itself */
        ck_assert_ptr_nonnull(strstr(ck_impl_names(), p->name));
        for (size_t c = 0; c < p->n_choices; c++) {
            const ck_op_def *op = op_of_kind(p->choices[c].op);
            ck_assert_ptr_nonnull(op);
            bool found = false;
            for (size_t a = 0; a < op->n_attrs; a++)
                found |= op->attrs[a].kind == CK_ATTR_BOOL &&
                         strcmp(op->attrs[a].name, p->choices[c].attr) == 0;
            ck_assert_msg(found, "%s: %s has no boolean attribute %s", p->name, op->name,
                          p->choices[c].attr);
        }
    }
    ck_assert_ptr_null(ck_impl_find("HF"));
    ck_assert_ptr_null(ck_impl_at(ck_impl_count()));
}
END_TEST

/* hf writes out what fused fuses; each profile sets the same attributes, opposite ways. */
START_TEST(hf_and_fused_set_the_attributes_opposite_ways)
{
    const char *ops[] = {"rmsnorm", "gelu", "swiglu", "geglu", "cross_entropy"};
    const ck_impl *hf = ck_impl_find("hf"), *fused = ck_impl_find("fused");
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        const ck_op_def *op = ck_op_find(ops[i]);
        ck_attrs a, b;
        ck_op_default_attrs(op, &a);
        ck_op_default_attrs(op, &b);
        ck_impl_apply(hf, op, &a);
        ck_impl_apply(fused, op, &b);
        ck_assert_msg(!a.fused && b.fused, "%s", ops[i]);
    }
    const ck_op_def *attention = ck_op_find("attention"), *ce = ck_op_find("cross_entropy");
    ck_attrs a;
    ck_op_default_attrs(attention, &a);
    ck_impl_apply(hf, attention, &a);
    ck_assert(a.expand_kv);
    ck_impl_apply(fused, attention, &a);
    ck_assert(!a.expand_kv);
    ck_op_default_attrs(ce, &a);
    ck_impl_apply(hf, ce, &a);
    ck_assert(a.upcast);
}
END_TEST

#define RMS_MODEL(training, node_attrs)                                                          \
    FX_BASE "'training': {" training "},"                                                       \
    " 'nodes': [{'name': 'n1', 'op': 'rmsnorm', 'inputs': ['x']" node_attrs "},"                \
    " {'name': 'n2', 'op': 'rmsnorm', 'inputs': ['n1']},"                                       \
    " {'name': 'loss', 'op': 'mse', 'inputs': ['n2', 'y']}]}"

/* n1 says fused: true, n2 nothing: the profile fills n2 only; --impl wins over the file. */
START_TEST(a_profile_fills_only_what_a_node_leaves_unset)
{
    ck_model *m = fx_load(RMS_MODEL("'impl': 'hf'", ", 'fused': true"));
    ck_assert_ptr_eq(m->impl, ck_impl_find("hf"));
    ck_assert(m->nodes[0].attrs.fused && !m->nodes[1].attrs.fused);
    ck_model_free(m);
    ck_model_opts o = {.impl = "fused"};
    m = fx_load_opts(&o, RMS_MODEL("'impl': 'hf'", ""));
    ck_assert_ptr_eq(m->impl, ck_impl_find("fused"));
    ck_assert(m->nodes[0].attrs.fused && m->nodes[1].attrs.fused);
    ck_model_free(m);
    m = fx_load(RMS_MODEL("", ""));
    ck_assert_ptr_null(m->impl); /* the op table's defaults */
    ck_assert(m->nodes[1].attrs.fused);
    ck_model_free(m);
}
END_TEST

START_TEST(unknown_profiles_are_refused)
{
    const char *msg = fx_refuse(RMS_MODEL("'impl': 'liger'", ""));
    ck_assert_msg(strstr(msg, "t.json: training.impl: expected one of hf, fused, hf-cpu, got \"liger\""),
                  "%s", msg);
    ck_model_opts o = {.impl = "nope"};
    msg = fx_refuse_opts(&o, RMS_MODEL("", ""));
    ck_assert_msg(strstr(msg, "t.json: --impl: expected one of hf, fused, hf-cpu, got \"nope\""), "%s", msg);
}
END_TEST

static Suite *impl_suite(void)
{
    Suite *s = suite_create("impl");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, every_choice_names_a_boolean_attribute);
    tcase_add_test(tc, hf_and_fused_set_the_attributes_opposite_ways);
    tcase_add_test(tc, a_profile_fills_only_what_a_node_leaves_unset);
    tcase_add_test(tc, unknown_profiles_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(impl_suite)
