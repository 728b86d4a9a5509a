/* ckplan chain: write the chain derived from a model, for inspection, editing, or other tools. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/files.h"
#include "cli/interrupt.h"
#include "cli/options.h"
#include "planner/json.h"
#include "planner/workload.h"

static void chain_usage(FILE *out)
{
    fprintf(out, "usage: ckplan chain MODEL [options]\n"
                 "\n"
                 "Derives the chain of stages that the planners see from MODEL (the sizes, transient\n"
                 "memory and times of each stage) and writes it as a ckplan-chain/1 file, which can\n"
                 "be inspected, edited, and planned with 'ckplan plan'. A chain file is passed\n"
                 "through unchanged in meaning. With --granularity node it writes the model's\n"
                 "training step as a graph of its nodes instead (a Checkmate node-link document,\n"
                 "docs/plan-format.md, \"Graphs of models\"), which 'ckplan plan' plans as a graph.\n"
                 "\n");
    ck_options_workload_help(out);
    fprintf(out, "  -o, --output FILE     write the chain to FILE instead of stdout\n"
                 "  -h, --help            show this help\n");
}

int ck_cmd_chain(int argc, char **argv)
{
    static const struct option longs[] = {
        CK_WORKLOAD_LONG_OPTIONS,
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ck_workload_opts opts;
    ck_workload_opts_default(&opts);
    opts.graphs = true;
    const char *output = NULL;
    ck_err err;
    const ck_options_spec spec = {.cmd = "chain", .longs = longs, .usage = chain_usage};
    int rc = ck_options_parse(&spec, argc, argv, &opts, &output, &err);
    if (rc == CK_HELP_PRINTED)
        return 0;
    const ck_named_file in[] = {{optind < argc ? argv[optind] : NULL, "MODEL"},
                                {opts.costs_path, "--costs"}};
    const ck_named_file out[] = {{output, "-o"}};
    if (rc == CK_OK)
        rc = CK_CHECK_OUTPUTS_APART("chain", in, out, &err);
    if (rc == CK_OK && opts.model.layout.partition)
        rc = ck_err_fail(&err, CK_ERR_INPUT, "chain: --partition-activations keeps checkpoints "
                         "split, which a ckplan-chain/1 file has no field for: plan the model "
                         "itself with it");
    ck_workload w;
    if (rc == CK_OK)
        rc = ck_options_model_operand("chain", argc, argv, &opts, &w, &err);
    if (rc != CK_OK)
        return ck_main_report(rc, err.msg);
    cJSON *json = w.graph ? ck_graph_to_checkmate(w.graph) : ck_chain_to_json(&w.chain);
    char *text = json ? ck_json_print(json) : NULL;
    cJSON_Delete(json);
    if (!text)
        rc = ck_err_oom(&err);
    if (rc == CK_OK)
        rc = ck_interrupt_check(&err); /* a signal while the model was read: write nothing */
    if (rc == CK_OK && output)
        rc = ck_files_write_atomic(output, text, strlen(text), &err);
    else if (rc == CK_OK)
        fputs(text, stdout);
    free(text);
    ck_workload_free(&w);
    return ck_main_report(rc, err.msg);
}
