/* options: the model options' help lists every one of them, so that what reads the help for
 * the options (tests/cli/suites/import-options.sh, option-errors.sh) covers each option the
 * registry, CK_MODEL_LONG_OPTIONS, holds, those added later too; and a model file is said to
 * hold exactly the options that change the graph, its dims or its training. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"
#include "tests/unit/check_main.h"

static const struct option model[] = {CK_MODEL_LONG_OPTIONS, {NULL, 0, NULL, 0}};

START_TEST(the_help_lists_every_model_option)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    ck_options_model_help(f);
    ck_assert_int_eq(fclose(f), 0);
    for (const struct option *o = model; o->name; o++) {
        char word[64];
        snprintf(word, sizeof word, "--%s ", o->name); /* its line, not a longer option's */
        char line[64];
        snprintf(line, sizeof line, "--%s\n", o->name);
        ck_assert_msg(strstr(text, word) || strstr(text, line), "--%s is not in the help", o->name);
    }
    free(text);
}
END_TEST

/* The layout of ranks is planned beside the graph; everything else a model file holds. */
START_TEST(a_model_file_holds_all_but_the_layout_of_ranks)
{
    const int beside[] = {CK_OPT_DP, CK_OPT_ZERO, CK_OPT_FSDP, CK_OPT_PP, CK_OPT_MICROBATCHES,
                          CK_OPT_VIRTUAL_STAGES, CK_OPT_PARTITION};
    size_t held = 0, n = 0;
    for (const struct option *o = model; o->name; o++, n++)
        held += ck_options_in_model_file(o->val);
    ck_assert_uint_eq(held, n - sizeof beside / sizeof beside[0]);
    for (size_t i = 0; i < sizeof beside / sizeof beside[0]; i++)
        ck_assert(!ck_options_in_model_file(beside[i]));
    ck_assert(!ck_options_in_model_file(CK_OPT_BUDGET)); /* not a model option at all */
}
END_TEST

static Suite *options_suite(void)
{
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, the_help_lists_every_model_option);
    tcase_add_test(tc, a_model_file_holds_all_but_the_layout_of_ranks);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(options_suite)
