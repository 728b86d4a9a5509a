/* options: command-line option handling shared by the subcommands: the options that say
 * how a model becomes a chain, number parsing, getopt error messages, and the MODEL
 * operand. */
#ifndef CK_OPTIONS_H
#define CK_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "planner/err.h"
#include "planner/planner.h"
#include "planner/workload.h"

/* getopt_long codes of long-only options; the workload ones first. */
enum {
    CK_OPT_GRANULARITY = 1000,
    CK_OPT_GEMM_FLOPS,
    CK_OPT_MEM_BANDWIDTH,
    CK_OPT_COSTS,
    CK_OPT_DEVICE,
    CK_OPT_SET,
    CK_OPT_SEQ,
    CK_OPT_BATCH,
    CK_OPT_RECIPE,
    CK_OPT_OPTIMIZER,
    CK_OPT_IMPL,
    CK_OPT_GRADS,
    CK_OPT_OPTIMIZER_STEP,
    CK_OPT_GRAD_ACCUM,
    CK_OPT_LORA,
    CK_OPT_ATTENTION,
    CK_OPT_DP,
    CK_OPT_ZERO,
    CK_OPT_FSDP,
    CK_OPT_PP,
    CK_OPT_MICROBATCHES,
    CK_OPT_VIRTUAL_STAGES,
    CK_OPT_TP,
    CK_OPT_SP,
    CK_OPT_CP,
    CK_OPT_PARTITION,
    CK_OPT_BUDGET,
    CK_OPT_PLANNER,
    CK_OPT_SLOTS,
    CK_OPT_JSON,
    CK_OPT_SVG,
};

#define CK_WORKLOAD_LONG_OPTIONS                                                                   \
    {"granularity", required_argument, NULL, CK_OPT_GRANULARITY},                                  \
        {"gemm-flops", required_argument, NULL, CK_OPT_GEMM_FLOPS},                                \
        {"mem-bandwidth", required_argument, NULL, CK_OPT_MEM_BANDWIDTH},                          \
        {"costs", required_argument, NULL, CK_OPT_COSTS},                                          \
        {"device", required_argument, NULL, CK_OPT_DEVICE}, CK_MODEL_LONG_OPTIONS

/* The workload options that change the model itself. */
#define CK_MODEL_LONG_OPTIONS                                                                      \
    {"set", required_argument, NULL, CK_OPT_SET},                                              \
        {"seq", required_argument, NULL, CK_OPT_SEQ},                                          \
        {"batch", required_argument, NULL, CK_OPT_BATCH},                                      \
        {"recipe", required_argument, NULL, CK_OPT_RECIPE},                                    \
        {"optimizer", required_argument, NULL, CK_OPT_OPTIMIZER},                              \
        {"impl", required_argument, NULL, CK_OPT_IMPL},                                        \
        {"grads", required_argument, NULL, CK_OPT_GRADS},                                      \
        {"optimizer-step", required_argument, NULL, CK_OPT_OPTIMIZER_STEP},                    \
        {"grad-accum", required_argument, NULL, CK_OPT_GRAD_ACCUM},                            \
        {"lora", required_argument, NULL, CK_OPT_LORA},                                        \
        {"attention", required_argument, NULL, CK_OPT_ATTENTION},                              \
        {"dp", required_argument, NULL, CK_OPT_DP},                                            \
        {"zero", required_argument, NULL, CK_OPT_ZERO},                                        \
        {"fsdp", required_argument, NULL, CK_OPT_FSDP}, CK_PIPELINE_LONG_OPTIONS, \
        CK_MODEL_PARALLEL_LONG_OPTIONS

/* The pipeline layout's options. */
#define CK_PIPELINE_LONG_OPTIONS                                                                   \
    {"pp", required_argument, NULL, CK_OPT_PP},                                                    \
        {"microbatches", required_argument, NULL, CK_OPT_MICROBATCHES},                            \
        {"virtual-stages", required_argument, NULL, CK_OPT_VIRTUAL_STAGES}

/* Megatron's model parallelism: tensor, sequence and context. */
#define CK_MODEL_PARALLEL_LONG_OPTIONS                                                             \
    {"tp", required_argument, NULL, CK_OPT_TP}, {"sp", no_argument, NULL, CK_OPT_SP},          \
        {"cp", required_argument, NULL, CK_OPT_CP},                                            \
        {"partition-activations", no_argument, NULL, CK_OPT_PARTITION}

/* Whether getopt code is one of CK_WORKLOAD_LONG_OPTIONS, or of CK_MODEL_LONG_OPTIONS: read
 * from the lists themselves, so that an option added to one is taken wherever it is. */
bool ck_options_is_workload(int code);
bool ck_options_is_model(int code);

/* Whether a model file can hold what model option `code` changes: its graph, dims or
 * training section (docs/model-format.md). The layout options that spread a step over
 * data-parallel or pipeline ranks, and partitioned checkpoints, are applied beside the
 * graph when it is planned, and a model file has no place for them. */
bool ck_options_in_model_file(int code);

/* Applies a workload option; CK_OK, or CK_ERR_INPUT naming the option and what it takes.
 * String values are kept as pointers into arg: pass argv's strings. */
int ck_options_workload(int code, const char *arg, ck_workload_opts *o, ck_err *err);
/* The help lines of the workload options, with their defaults. */
void ck_options_workload_help(FILE *out);
/* The help lines of CK_MODEL_LONG_OPTIONS alone. */
void ck_options_model_help(FILE *out);
/* Those of CK_MODEL_PARALLEL_LONG_OPTIONS, which ck_options_model_help ends with. */
void ck_options_model_parallel_help(FILE *out);

/* Parses --slots: a whole number of memory units for dp, or "exact" (1-byte units). */
int ck_options_parse_slots(const char *text, ck_planner_opts *opts, ck_err *err);

/* Parses a whole number in [min, max] given to option `flag`. */
int ck_options_parse_count(const char *text, const char *flag, uint64_t min, uint64_t max, uint64_t *out,
                   ck_err *err);

/* The message for what getopt_long returned as '?' or ':' (argv and longs as given to it):
 * names the option as the user wrote it ("--budget", "-o"), and says whether it needs a
 * value, takes none, is ambiguous or unknown. */
int ck_options_error(const char *cmd, char **argv, const struct option *longs, int code,
                    ck_err *err);

/* The options of a command that reads workload options, -o FILE and -h: */
typedef struct {
    const char *cmd;            /* its name in messages: "chain", "emit torch" */
    const struct option *longs; /* with {"output", ..., 'o'} and {"help", ..., 'h'} */
    bool model_only;            /* CK_MODEL_LONG_OPTIONS only, not --granularity and the rest */
    bool model_file;            /* it writes a model file: model options that one cannot hold
                                   (ck_options_in_model_file) are refused, naming them */
    void (*usage)(FILE *out);   /* its --help */
    /* Its own options, or NULL: CK_OK having taken code (and arg), CK_ERR_INPUT refusing
     * arg, or CK_ERR_UNKNOWN when code is not one of them. */
    int (*own)(void *ctx, int code, const char *arg, ck_err *err);
    void *ctx;
} ck_options_spec;
#define CK_ERR_UNKNOWN (-2)
/* getopt_long over argv by spec: -o sets *output, workload options go into *wopts, the
 * rest to spec->own; an option it does not take is refused (ck_options_error). Returns
 * CK_HELP_PRINTED after printing -h's help; optind is left at the first operand. */
int ck_options_parse(const ck_options_spec *spec, int argc, char **argv, ck_workload_opts *wopts,
                     const char **output, ck_err *err);

/* For `ckplan cmd MODEL [-o FILE]`, after getopt_long: checks that argv[optind] is the one
 * operand and loads it into *w (free it with ck_workload_free on CK_OK). */
int ck_options_model_operand(const char *cmd, int argc, char **argv, const ck_workload_opts *opts,
                     ck_workload *w, ck_err *err);

#endif
