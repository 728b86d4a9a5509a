/* ckplan emit: a plan as the training stacks users run apply it (docs/emit.md), one target
 * a subcommand: Hugging Face, FSDP, Megatron-LM, DeepSpeed. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/emit.h"
#include "cli/emit_torch.h"
#include "cli/files.h"
#include "cli/human.h"
#include "cli/interrupt.h"
#include "cli/options.h"
#include "cli/runner.h"
#include "planner/plan_check.h"

static const struct emit_target {
    const char *name, *usage, *summary, *help;
    /* A target that reads its own arguments (argv[0] is its name), or NULL ... */
    int (*run)(int argc, char **argv);
    /* ... one that prints a plan: `ckplan emit NAME PLAN [-o FILE]`. */
    int (*write)(FILE *out, const ck_emit_input *in, ck_err *err);
    bool partitions; /* it can keep checkpoints partitioned (--partition-activations) */
} targets[] = {
    {"torch", "ckplan emit torch MODEL [options] [--plan PLAN] [-o FILE.py]",
     "Python: the model as a PyTorch module that runs the plan's schedule", "", ck_emit_torch,
     NULL, false},
    {"hf", "ckplan emit hf PLAN [-o FILE]",
     "Python: checkpoint the plan's decoder layers of a transformers model",
     "Prints Python to paste after loading a Hugging Face transformers model (`model`): it\n"
     "wraps the forward of exactly the decoder layers the plan checkpoints\n"
     "(model.model.layers[i]) in non-reentrant torch.utils.checkpoint (use_reentrant=False,\n"
     "preserve_rng_state=True) and sets model.config.use_cache = False.\n",
     NULL, ck_emit_hf, false},
    {"fsdp", "ckplan emit fsdp PLAN [-o FILE]",
     "Python: a check_fn for FSDP's apply_activation_checkpointing",
     "Prints Python that builds a check_fn selecting exactly the plan's checkpointed layers\n"
     "of model.model.layers for torch.distributed.algorithms._checkpoint.checkpoint_wrapper's\n"
     "apply_activation_checkpointing (PyTorch 1.13 and later), non-reentrant, and applies it.\n",
     NULL, ck_emit_fsdp, false},
    {"megatron", "ckplan emit megatron PLAN [-o FILE]",
     "Megatron-LM's --recompute-* flags for the plan, or the closest ones",
     "Prints --recompute-granularity, --recompute-method (uniform or block) and\n"
     "--recompute-num-layers when they express the plan's schedule exactly; otherwise what\n"
     "they cannot express, and the flags that come closest (the fastest that fit the plan's\n"
     "budget, else the smallest peak), each with its predicted cost.\n",
     NULL, ck_emit_megatron, true},
    {"deepspeed", "ckplan emit deepspeed PLAN [-o FILE]",
     "JSON: DeepSpeed's activation_checkpointing section and the layers to wrap",
     "Prints a JSON object: \"activation_checkpointing\", the section of a DeepSpeed config,\n"
     "and \"ckplan\": the layers to call through deepspeed.checkpointing.checkpoint, what\n"
     "per-layer checkpointing cannot express of the plan, and the predicted figures.\n",
     NULL, ck_emit_deepspeed, true},
};
#define N_TARGETS (sizeof targets / sizeof targets[0])

static void emit_usage(FILE *out)
{
    fprintf(out, "usage: ckplan emit TARGET ...\n"
                 "\n"
                 "Writes a model or a plan in the form a training stack runs it. Targets:\n");
    for (size_t i = 0; i < N_TARGETS; i++)
        fprintf(out, "  %-10s %s\n", targets[i].name, targets[i].summary);
    fprintf(out, "\n"
                 "Options, after TARGET:\n"
                 "  -o, --output FILE   write to FILE (atomically) instead of stdout\n"
                 "  -h, --help          show this help; after TARGET, the target's\n"
                 "\n"
                 "Run 'ckplan emit TARGET --help' for one target. docs/emit.md describes them.\n");
}

static void target_usage(FILE *out, const struct emit_target *t)
{
    fprintf(out, "usage: %s\n\n%s\n", t->usage, t->help);
    fprintf(out, "The decoder layers are the instances of the model's repeated block (h.3 is\n"
                 "model.model.layers[3]); a layer is checkpointed when the plan's forward pass\n"
                 "(before the loss) does not store all of it: some stage of it has no F_all.\n"
                 "What per-layer checkpointing cannot express of the plan is said, and the\n"
                 "activation peak and time of what the output expresses come from replaying its\n"
                 "schedule compiled to the model's program, as run would, next to the plan's own.\n"
                 "\n"
                 "  -o, --output FILE   write to FILE (atomically) instead of stdout\n"
                 "  -h, --help          show this help\n"
                 "\n"
                 "Exit codes: 0 written, 1 FILE cannot be written, 2 usage or input error (the\n"
                 "plan unreadable, its model changed since planning, no decoder layers), 130\n"
                 "interrupted.\n");
}

/* PLAN and -o FILE; CK_HELP_PRINTED when the help was printed. */
static int parse_args(const struct emit_target *t, int argc, char **argv, const char **plan,
                      const char **output, ck_err *err)
{
    static const struct option longs[] = {
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char cmd[32];
    snprintf(cmd, sizeof cmd, "emit %s", t->name);
    *plan = *output = NULL;
    opterr = 0;
    optind = 1;
    int code, rc = CK_OK;
    while (rc == CK_OK && (code = getopt_long(argc, argv, ":o:h", longs, NULL)) != -1) {
        if (code == 'h') {
            target_usage(stdout, t);
            return CK_HELP_PRINTED;
        } else if (code == 'o') {
            *output = optarg;
        } else {
            rc = ck_options_error(cmd, argv, longs, code, err);
        }
    }
    if (rc == CK_OK && optind >= argc)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: no PLAN given (usage: %s)", cmd, t->usage);
    else if (rc == CK_OK && argc - optind > 1)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: more than one PLAN given (%s)", cmd, argv[optind + 1]);
    if (rc == CK_OK)
        *plan = argv[optind];
    return rc;
}

/* "LABEL: the message already in err". */
static int name_plan(int rc, const char *label, ck_err *err)
{
    char cause[sizeof err->msg];
    memcpy(cause, err->msg, sizeof cause);
    return ck_err_fail(err, rc, "%s: %s", label, cause);
}

static void warn_differences(const char *label, const ck_plan_check *check)
{
    if (!check->n_differences)
        return;
    char what[256];
    ck_plan_check_describe(&check->differences[0], what, sizeof what);
    fputs("ckplan: warning: ", stderr);
    ck_human_put_terminal_text(stderr, label);
    fprintf(stderr, ": the plan file's figures differ from the replay of its schedule (%zu field%s; "
                    "%s); the replayed ones are printed\n",
            check->n_differences, check->n_differences == 1 ? "" : "s", what);
}

static void figures_of(const ck_plan_figures *f, uint64_t budget, ck_emit_figures *plan,
                       ck_emit_figures *base)
{
    *plan = (ck_emit_figures){f->activation_peak_bytes, f->peak_bytes, f->time, f->overhead,
                              f->peak_bytes <= budget};
    *base = (ck_emit_figures){f->baseline_activation_peak_bytes, f->baseline_peak_bytes,
                              f->baseline_time, 0, f->baseline_peak_bytes <= budget};
}

/* The plan's schedule per layer, and the figures of it and of what it expresses. */
static int prepare(ck_emit_input *in, ck_layers *layers, ck_layers_view *view, ck_err *err)
{
    const ck_workload *w = in->w;
    ck_plan_check check;
    int rc = ck_emit_check_no_variants(in->plan, in->label, err);
    if (rc != CK_OK)
        return rc;
    ck_schedule_replayer exact = ck_workload_replayer(w);
    rc = ck_plan_check_replay(in->plan, &w->chain, &exact, w->statics.total, &check, err);
    if (rc == CK_OK)
        rc = ck_layers_find(w->model, w->chain.n_stages, w->stage_first, layers, err);
    if (rc != CK_OK)
        return rc == CK_ERR_INPUT ? name_plan(rc, in->label, err) : rc;
    warn_differences(in->label, &check);
    figures_of(&check.replayed, in->plan->budget_bytes, &in->planned, &in->baseline);
    in->layers = layers;
    in->view = view;
    rc = ck_layers_view_of(layers, &w->chain, &in->plan->schedule, view, err);
    if (rc == CK_OK)
        rc = ck_emit_replay(in, &view->expressed, &in->expressed, err);
    return rc;
}

/* Writes the target's text for in to a buffer, then to output or stdout. */
static int write_target(const struct emit_target *t, ck_emit_input *in, const char *output, ck_err *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *buf = open_memstream(&text, &len);
    if (!buf)
        return ck_err_oom(err);
    int rc = t->write(buf, in, err);
    if (fclose(buf) != 0 && rc == CK_OK)
        rc = ck_err_oom(err);
    if (rc == CK_OK)
        rc = ck_interrupt_check(err); /* a signal while the model was read: write nothing */
    if (rc == CK_OK && output)
        rc = ck_files_write_atomic(output, text, len, err);
    else if (rc == CK_OK)
        fwrite(text, 1, len, stdout);
    free(text);
    return rc;
}

static int emit_plan(const struct emit_target *t, int argc, char **argv)
{
    const char *plan_path, *output;
    ck_err err = {{0}};
    int rc = parse_args(t, argc, argv, &plan_path, &output, &err);
    char cmd[32];
    snprintf(cmd, sizeof cmd, "emit %s", t->name);
    const ck_named_file in_files[] = {{plan_path, "PLAN"}};
    const ck_named_file out_files[] = {{output, "-o"}};
    if (rc == CK_OK)
        rc = CK_CHECK_OUTPUTS_APART(cmd, in_files, out_files, &err);
    ck_plan_file plan;
    if (rc == CK_OK)
        rc = ck_runner_read_plan(plan_path, &plan, NULL, &err);
    if (rc != CK_OK)
        return ck_main_report(rc, err.msg);
    ck_workload w;
    if (plan.model_opts.layout.partition && !t->partitions) {
        rc = ck_err_fail(&err, CK_ERR_INPUT, "%s: model.options.partition_activations: PyTorch's "
                         "checkpoint keeps a layer's input whole, and %s has no way to split it "
                         "over the tensor-parallel ranks: emit it for deepspeed or megatron, or "
                         "plan without --partition-activations", plan_path, t->name);
        ck_plan_file_free(&plan);
        return ck_main_report(rc, err.msg);
    }
    rc = ck_runner_load_plan_model(plan_path, plan_path, &plan, &w, &err);
    if (rc == CK_OK) {
        ck_layers layers = {0};
        ck_layers_view view = {0};
        ck_emit_input in = {.label = plan_path, .plan = &plan, .w = &w};
        rc = ck_runner_plan_files_apart(cmd, plan_path, &plan, &w, out_files, 1, &err);
        if (rc == CK_OK)
            rc = prepare(&in, &layers, &view, &err);
        if (rc == CK_OK)
            rc = write_target(t, &in, output, &err);
        ck_layers_view_free(&view);
        ck_layers_free(&layers);
        ck_workload_free(&w);
    }
    ck_plan_file_free(&plan);
    return ck_main_report(rc, err.msg);
}

/* Options before the target: --help, or mistakes named as every command names them. They
 * are read only when no target follows (a second getopt scan would keep this one's
 * ordering, which stops at the first operand), so -o must come after the target. */
static int leading_options(int argc, char **argv)
{
    static const struct option longs[] = {
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ck_err err;
    opterr = 0;
    optind = 1;
    int code = getopt_long(argc, argv, "+:o:h", longs, NULL);
    if (code == 'h') {
        emit_usage(stdout);
        return 0;
    }
    if (code == 'o')
        return ck_main_report(CK_ERR_INPUT, "emit: -o goes after the target and its operands "
                                            "(ckplan emit TARGET PLAN -o FILE)");
    return ck_main_report(ck_options_error("emit", argv, longs, code, &err), err.msg);
}

int ck_cmd_emit(int argc, char **argv)
{
    if (argc < 2) {
        emit_usage(stderr);
        return CK_ERR_INPUT;
    }
    if (argv[1][0] == '-' && argv[1][1] != '\0' && strcmp(argv[1], "--") != 0)
        return leading_options(argc, argv);
    for (size_t i = 0; i < N_TARGETS; i++)
        if (strcmp(argv[1], targets[i].name) == 0)
            return targets[i].run ? targets[i].run(argc - 1, argv + 1)
                                  : emit_plan(&targets[i], argc - 1, argv + 1);
    fputs("ckplan: emit: '", stderr);
    ck_human_put_terminal_text(stderr, argv[1]);
    fputs("' is not a target (", stderr);
    for (size_t i = 0; i < N_TARGETS; i++)
        fprintf(stderr, "%s%s", i ? ", " : "", targets[i].name);
    fputs("); see 'ckplan emit --help'\n", stderr);
    return CK_ERR_INPUT;
}
