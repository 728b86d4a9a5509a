/* ckplan import: write the ckplan-model/1 file that a Hugging Face config stands for, to
 * read and edit. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/files.h"
#include "cli/interrupt.h"
#include "cli/options.h"
#include "planner/hf.h"
#include "planner/json.h"

static void import_usage(FILE *out)
{
    fprintf(out, "usage: ckplan import CONFIG [options] -o MODEL\n"
                 "\n"
                 "Turns a Hugging Face config.json (CONFIG, or a directory holding one) into the\n"
                 "ckplan-model/1 file that ckplan plans for it, with the options below written in,\n"
                 "so that planning MODEL gives the figures of planning CONFIG with these options.\n"
                 "The layout options that spread a step over data-parallel or pipeline ranks, and\n"
                 "--partition-activations, are refused (exit 2): a model file cannot hold them;\n"
                 "give them to plan or sweep with MODEL.\n"
                 "Families (model_type):\n  %s.\n"
                 "\n",
            ck_hf_families());
    ck_options_model_help(out);
    fprintf(out, "  -o, --output FILE     write the model to FILE instead of stdout\n"
                 "  -h, --help            show this help\n");
}

static int import_write(const char *config, const ck_model_opts *opts, const char *output,
                        ck_err *err)
{
    char *file = ck_hf_config_path(config);
    cJSON *root = NULL, *doc = NULL;
    int rc = file ? ck_json_load_file(file, &root, NULL, NULL, err) : ck_err_oom(err);
    if (rc == CK_OK && !ck_hf_is_config(root))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: expected a Hugging Face config.json (an object "
                         "with \"model_type\" and no \"format\")", file);
    if (rc == CK_OK)
        rc = ck_hf_import(root, file, opts, &doc, err);
    char *text = rc == CK_OK ? ck_json_print(doc) : NULL;
    if (rc == CK_OK && !text)
        rc = ck_err_oom(err);
    if (rc == CK_OK)
        rc = ck_hf_check_text(text, output ? output : "(stdout)", err);
    if (rc == CK_OK)
        rc = ck_interrupt_check(err); /* a signal while the config was read: write nothing */
    if (rc == CK_OK && output)
        rc = ck_files_write_atomic(output, text, strlen(text), err);
    else if (rc == CK_OK)
        fputs(text, stdout);
    free(text);
    cJSON_Delete(doc);
    cJSON_Delete(root);
    free(file);
    return rc;
}

int ck_cmd_import(int argc, char **argv)
{
    static const struct option longs[] = {
        CK_MODEL_LONG_OPTIONS,
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ck_workload_opts opts;
    ck_workload_opts_default(&opts);
    const char *output = NULL;
    ck_err err;
    const ck_options_spec spec = {.cmd = "import", .longs = longs, .model_only = true,
                                  .model_file = true, .usage = import_usage};
    int rc = ck_options_parse(&spec, argc, argv, &opts, &output, &err);
    if (rc == CK_HELP_PRINTED)
        return 0;
    if (rc == CK_OK && optind != argc - 1)
        rc = ck_err_fail(&err, CK_ERR_INPUT, "import: expected exactly one CONFIG; usage: ckplan "
                         "import CONFIG [options] -o MODEL (see --help)");
    const ck_named_file in[] = {{rc == CK_OK ? argv[optind] : NULL, "CONFIG"}};
    const ck_named_file out[] = {{output, "-o"}};
    if (rc == CK_OK)
        rc = CK_CHECK_OUTPUTS_APART("import", in, out, &err);
    if (rc == CK_OK)
        rc = import_write(argv[optind], &opts.model, output, &err);
    return ck_main_report(rc, err.msg);
}
