/* The device table's budgets and rates, and each warning's bytes, against hand counts. */
#include "planner/device.h"
#include "planner/warning.h"

#include <stdio.h>
#include <string.h>

#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

#define GIB (UINT64_C(1) << 30)

START_TEST(device_budget_is_memory_less_reserve)
{
    /* reserve = 1 GiB + 5% of the memory, rounded up; by hand: */
    static const struct {
        const char *name;
        uint64_t budget;
    } want[] = {
        {"h100-80gb", 85899345920 - 1073741824 - 4294967296},  /* 80 GiB, 5% = 4 GiB */
        {"h200", 151397597184 - 1073741824 - 7569879860},      /* 141 GiB, 5% = 7569879859.2 */
        {"a100-40gb", 42949672960 - 1073741824 - 2147483648},  /* 40 GiB, 5% = 2 GiB */
        {"a100-80gb", 85899345920 - 1073741824 - 4294967296},
        {"l40s", 51539607552 - 1073741824 - 2576980378},       /* 48 GiB, 5% = 2576980377.6 */
        {"rtx4090", 25769803776 - 1073741824 - 1288490189},    /* 24 GiB, 5% = 1288490188.8 */
        {"mi300x", 206158430208 - 1073741824 - 10307921511},   /* 192 GiB, 5% = 10307921510.4 */
    };
    size_t n = sizeof want / sizeof want[0];
    for (size_t i = 0; i < n; i++) {
        const ck_device *d = ck_device_find(want[i].name);
        ck_assert_msg(d, "%s", want[i].name);
        ck_assert_uint_eq(ck_device_budget(d), want[i].budget);
        ck_assert_uint_eq(ck_device_reserve(d) + ck_device_budget(d), d->memory_bytes);
        ck_assert_msg(strstr(ck_device_names(), want[i].name), "%s", ck_device_names());
    }
    /* the names list has exactly these */
    size_t commas = 0;
    for (const char *c = ck_device_names(); *c; c++)
        commas += *c == ',';
    ck_assert_uint_eq(commas + 1, n);
}
END_TEST

START_TEST(device_rates_are_dense_16_bit)
{
    /* Half the sparse datasheet figure where the datasheet gives that (docs/devices.md). */
    const ck_device *h100 = ck_device_find("h100-80gb"), *a100 = ck_device_find("a100-40gb");
    const ck_device *mi = ck_device_find("mi300x"), *l40s = ck_device_find("l40s");
    ck_assert(h100->dense16_flops == 1978.8e12 / 2 && h100->mem_bandwidth == 3350e9);
    ck_assert(a100->dense16_flops == 624e12 / 2 && a100->mem_bandwidth == 1555e9);
    ck_assert(mi->dense16_flops == 2614.8e12 / 2 && mi->mem_bandwidth == 5300e9);
    ck_assert(l40s->dense16_flops == 724.1e12 / 2 && l40s->mem_bandwidth == 864e9);
    ck_assert(ck_device_find("h200")->dense16_flops == h100->dense16_flops); /* same GH100 */
}
END_TEST

START_TEST(unknown_devices_are_not_found)
{
    static const char *const bad[] = {"", "h100", "H100-80GB", "h100-80gb ", "a100", "mi300", NULL};
    for (int i = 0; bad[i]; i++)
        ck_assert_msg(!ck_device_find(bad[i]), "'%s'", bad[i]);
}
END_TEST

START_TEST(kv_cache_bytes_by_hand)
{
    ck_err err = {{0}};
    uint64_t kv;
    ck_model *m = fx_load_file("models/llama-tiny.json");
    ck_assert_int_eq(ck_warning_kv_cache_bytes(m, &kv, &err), CK_OK);
    /* 2 x 4 layers x B 4 x T 64 x 2 kv heads x head size 16 x 4 bytes */
    ck_assert_uint_eq(kv, 2 * 4 * 4 * 64 * 2 * 16 * 4);
    ck_model_free(m);
    /* 3 layers, B 2, T 16, width 32 over 4 heads (head size 8, kv heads = heads), bf16 */
    m = fx_gpt(2, 16, 32, 4, "bf16", false, 3);
    ck_assert_int_eq(ck_warning_kv_cache_bytes(m, &kv, &err), CK_OK);
    ck_assert_uint_eq(kv, 2 * 3 * 2 * 16 * 4 * 8 * 2);
    ck_model_free(m);
}
END_TEST

static void load_gpt2_at(uint64_t t, ck_workload *w)
{
    ck_err err = {{0}};
    ck_workload_opts wo;
    ck_workload_opts_default(&wo);
    ck_assert(ck_model_opts_set(&wo.model, "T", 1, t));
    ck_assert_msg(ck_workload_load("models/gpt2-tiny.json", &wo, w, &err) == CK_OK, "%s", err.msg);
}

START_TEST(attention_scores_by_hand)
{
    ck_err err = {{0}};
    ck_workload w;
    load_gpt2_at(512, &w);
    ck_attention_scores a;
    ck_assert_int_eq(ck_warning_attention_scores(&w, &a, &err), CK_OK);
    uint64_t scores = UINT64_C(4) * 4 * 512 * 512; /* B x H x T x T */
    ck_assert_str_eq(w.model->nodes[a.node].name, "h.0.attn");
    /* dropout 0.1: probabilities f32 + mask u8 + dropped probabilities f32 */
    ck_assert_uint_eq(a.kept, scores * 9);
    ck_assert_uint_eq(a.workspace, scores * 4); /* the f32 scores before softmax */
    ck_assert_uint_eq(a.flash, 4 * 4 * 512 * 4 + 512 * 8); /* lse rows + a row of backward */
    ck_warnings ws;
    ck_assert_int_eq(ck_warning_training(&w, &ws, &err), CK_OK);
    ck_assert_uint_eq(ws.n, 1);
    ck_assert_str_eq(ws.items[0].code, "attention_scores");
    ck_assert_uint_eq(ws.items[0].bytes, scores * 13);
    ck_workload_free(&w);
    /* at T=64 the rest of the stage saves more than the scores: no warning */
    load_gpt2_at(64, &w);
    ck_assert_int_eq(ck_warning_attention_scores(&w, &a, &err), CK_OK);
    ck_assert_uint_lt(a.kept + a.workspace, a.stage_rest);
    ck_assert_int_eq(ck_warning_training(&w, &ws, &err), CK_OK);
    ck_assert_uint_eq(ws.n, 0);
    ck_workload_free(&w);
    /* a flash attention has no score matrix */
    fx_workload_load("models/llama-tiny.json", &w);
    ck_assert_int_eq(ck_warning_attention_scores(&w, &a, &err), CK_OK);
    ck_assert_uint_eq(a.node, CK_NO_NODE);
    ck_workload_free(&w);
}
END_TEST

static Suite *warnings_suite(void)
{
    Suite *s = suite_create("warnings");
    TCase *tc = tcase_create("warnings");
    tcase_add_test(tc, device_budget_is_memory_less_reserve);
    tcase_add_test(tc, device_rates_are_dense_16_bit);
    tcase_add_test(tc, unknown_devices_are_not_found);
    tcase_add_test(tc, kv_cache_bytes_by_hand);
    tcase_add_test(tc, attention_scores_by_hand);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(warnings_suite)
