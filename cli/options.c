#include "cli/options.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "planner/impl.h"
#include "planner/size.h"
#include "planner/training.h"

static int parse_rate(const char *text, const char *flag, double *out, ck_err *err)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno || !isfinite(v) || v <= 0 || isspace((unsigned char)*text))
        return ck_err_fail(err, CK_ERR_INPUT, "%s: expected a positive number such as 1e11, got '%s'",
                       flag, text);
    *out = v;
    return CK_OK;
}

/* The largest value a dim may be set to: sizes must stay exact in JSON numbers. */
#define MAX_SET_VALUE ((uint64_t)1 << 53)

/* Sets dim name[0, len) from the text value, for option `flag`. */
static int set_dim(ck_model_opts *o, const char *name, size_t len, const char *value,
                   const char *flag, ck_err *err)
{
    uint64_t v;
    int rc = ck_options_parse_count(value, flag, 1, MAX_SET_VALUE - 1, &v, err);
    if (rc == CK_OK && !ck_model_opts_set(o, name, len, v))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: more than %d dims set", flag, CK_MODEL_MAX_DIMS);
    return rc;
}

/* --set NAME=VALUE: NAME a dim name, VALUE a whole number. */
static int parse_set(const char *arg, ck_model_opts *o, ck_err *err)
{
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : 0;
    bool ok = len > 0 && !isdigit((unsigned char)arg[0]);
    for (size_t i = 0; ok && i < len; i++)
        ok = isalnum((unsigned char)arg[i]) || arg[i] == '_';
    if (!ok)
        return ck_err_fail(err, CK_ERR_INPUT, "--set: expected NAME=VALUE with NAME a dim of the "
                       "model (letters, digits, '_') and VALUE a whole number, got '%.200s'", arg);
    char flag[256];
    snprintf(flag, sizeof flag, "--set %.*s", len > 200 ? 200 : (int)len, arg);
    return set_dim(o, arg, len, eq + 1, flag, err);
}

/* --device NAME: its rates, except those given explicitly (whatever the order). */
static int set_device(const char *name, ck_workload_opts *o, ck_err *err)
{
    o->device = ck_device_find(name);
    if (!o->device)
        return ck_err_fail(err, CK_ERR_INPUT, "--device: no device '%.200s'; known devices: %s", name,
                       ck_device_names());
    if (!o->gemm_flops_given)
        o->cost.gemm_flops = o->device->dense16_flops;
    if (!o->mem_bandwidth_given)
        o->cost.mem_bandwidth = o->device->mem_bandwidth;
    return CK_OK;
}

/* --dp, --zero and --fsdp: a layout given names one rank (1) until --dp says more. */
static int set_layout(int code, const char *arg, ck_layout *l, ck_err *err)
{
    uint64_t v = 0;
    int rc = CK_OK;
    if (code == CK_OPT_DP)
        rc = ck_options_parse_count(arg, "--dp", 1, CK_LAYOUT_MAX_DP, &v, err);
    else if (code == CK_OPT_ZERO)
        rc = ck_options_parse_count(arg, "--zero", 0, CK_LAYOUT_MAX_ZERO, &v, err);
    else if (!ck_layout_parse_fsdp(arg, &l->zero))
        rc = ck_err_fail(err, CK_ERR_INPUT, "--fsdp: expected full-shard (ZeRO-3) or "
                         "shard-grad-op (ZeRO-2), got '%.200s'", arg);
    if (rc != CK_OK)
        return rc;
    if (code == CK_OPT_ZERO)
        l->zero = (unsigned)v;
    l->dp = code == CK_OPT_DP ? v : l->dp ? l->dp : 1;
    return CK_OK;
}

/* --pp, --microbatches and --virtual-stages: one given makes a pipeline layout, of one
 * stage until --pp says more. */
static int set_pipeline(int code, const char *arg, ck_layout *l, ck_err *err)
{
    uint64_t v = 0;
    int rc = code == CK_OPT_PP
                 ? ck_options_parse_count(arg, "--pp", 1, CK_LAYOUT_MAX_PP, &v, err)
             : code == CK_OPT_MICROBATCHES
                 ? ck_options_parse_count(arg, "--microbatches", 1, CK_LAYOUT_MAX_MICROBATCHES, &v, err)
                 : ck_options_parse_count(arg, "--virtual-stages", 1, CK_LAYOUT_MAX_VIRTUAL, &v, err);
    if (rc != CK_OK)
        return rc;
    if (code == CK_OPT_MICROBATCHES)
        l->microbatches = v;
    else if (code == CK_OPT_VIRTUAL_STAGES)
        l->virtual_stages = v;
    l->pp = code == CK_OPT_PP ? v : l->pp ? l->pp : 1;
    return CK_OK;
}

/* --tp N, --sp and --cp N: Megatron's model parallelism (checked together when the model
 * loads: --sp needs --tp above 1). */
static int set_model_parallel(int code, const char *arg, ck_layout *l, ck_err *err)
{
    if (code == CK_OPT_SP || code == CK_OPT_PARTITION) {
        *(code == CK_OPT_SP ? &l->sp : &l->partition) = true;
        return CK_OK;
    }
    bool tp = code == CK_OPT_TP;
    return ck_options_parse_count(arg, tp ? "--tp" : "--cp", 1,
                                  tp ? CK_LAYOUT_MAX_TP : CK_LAYOUT_MAX_CP, tp ? &l->tp : &l->cp, err);
}

static bool listed(const struct option *longs, int code)
{
    for (; longs->name; longs++)
        if (longs->val == code)
            return true;
    return false;
}

bool ck_options_is_workload(int code)
{
    static const struct option workload[] = {CK_WORKLOAD_LONG_OPTIONS, {NULL, 0, NULL, 0}};
    return listed(workload, code);
}

bool ck_options_is_model(int code)
{
    static const struct option model[] = {CK_MODEL_LONG_OPTIONS, {NULL, 0, NULL, 0}};
    return listed(model, code);
}

/* The model options whose effect no model file holds (ck_options_in_model_file). */
static const int planned_beside_the_graph[] = {CK_OPT_DP, CK_OPT_ZERO, CK_OPT_FSDP, CK_OPT_PP,
                                               CK_OPT_MICROBATCHES, CK_OPT_VIRTUAL_STAGES,
                                               CK_OPT_PARTITION};
#define N_PLANNED_BESIDE (sizeof planned_beside_the_graph / sizeof planned_beside_the_graph[0])

bool ck_options_in_model_file(int code)
{
    for (size_t i = 0; i < N_PLANNED_BESIDE; i++)
        if (planned_beside_the_graph[i] == code)
            return false;
    return ck_options_is_model(code);
}

static const char *long_name(const struct option *longs, int code)
{
    for (; longs->name; longs++)
        if (longs->val == code)
            return longs->name;
    return "?";
}

/* The refusal of a model option that spec's command would have to drop. */
static int not_in_model_file(const ck_options_spec *spec, int code, ck_err *err)
{
    char all[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < N_PLANNED_BESIDE && used < sizeof all; i++)
        used += (size_t)snprintf(all + used, sizeof all - used, "%s--%s", i ? ", " : "",
                                 long_name(spec->longs, planned_beside_the_graph[i]));
    return ck_err_fail(err, CK_ERR_INPUT, "%s: --%s cannot be written into a model file, which "
                       "holds the graph, its dims and its training, not how a step is spread over "
                       "ranks (%s): give --%s to plan or sweep with the model written",
                       spec->cmd, long_name(spec->longs, code), all, long_name(spec->longs, code));
}

int ck_options_workload(int code, const char *arg, ck_workload_opts *o, ck_err *err)
{
    uint64_t rank;
    switch (code) {
    case CK_OPT_GRANULARITY:
        if (!ck_workload_granularity_parse(arg, &o->granularity))
            return ck_err_fail(err, CK_ERR_INPUT, "--granularity: expected 'op', 'block' or 'node', got '%s'", arg);
        return CK_OK;
    case CK_OPT_GEMM_FLOPS:
        o->gemm_flops_given = true;
        return parse_rate(arg, "--gemm-flops", &o->cost.gemm_flops, err);
    case CK_OPT_MEM_BANDWIDTH:
        o->mem_bandwidth_given = true;
        return parse_rate(arg, "--mem-bandwidth", &o->cost.mem_bandwidth, err);
    case CK_OPT_DEVICE:
        return set_device(arg, o, err);
    case CK_OPT_COSTS:
        o->costs_path = arg;
        return CK_OK;
    case CK_OPT_SET:
        return parse_set(arg, &o->model, err);
    case CK_OPT_SEQ:
        return set_dim(&o->model, "T", 1, arg, "--seq", err);
    case CK_OPT_BATCH:
        return set_dim(&o->model, "B", 1, arg, "--batch", err);
    case CK_OPT_RECIPE:
        o->model.recipe = arg;
        return CK_OK;
    case CK_OPT_OPTIMIZER:
        o->model.optimizer = arg;
        return CK_OK;
    case CK_OPT_IMPL:
        if (!ck_impl_find(arg))
            return ck_err_fail(err, CK_ERR_INPUT, "--impl: expected one of %s, got '%.200s'",
                               ck_impl_names(), arg);
        o->model.impl = arg;
        return CK_OK;
    case CK_OPT_GRADS: {
        ck_grads g;
        if (!ck_training_grads_parse(arg, &g))
            return ck_err_fail(err, CK_ERR_INPUT, "--grads: expected one of %s, got '%.200s'",
                               ck_training_grads_names(), arg);
        o->model.grads = arg;
        return CK_OK;
    }
    case CK_OPT_OPTIMIZER_STEP: {
        ck_optstep how;
        if (!ck_training_optstep_parse(arg, &how))
            return ck_err_fail(err, CK_ERR_INPUT, "--optimizer-step: expected one of %s, got '%.200s'",
                               ck_training_optstep_names(), arg);
        o->model.optimizer_step = arg;
        return CK_OK;
    }
    case CK_OPT_GRAD_ACCUM:
        rank = 0;
        if (ck_options_parse_count(arg, "--grad-accum", 1, CK_TRAINING_MAX_GRAD_ACCUM, &rank, err) != CK_OK)
            return CK_ERR_INPUT;
        o->model.grad_accum = rank;
        return CK_OK;
    case CK_OPT_LORA:
        rank = 0;
        if (ck_options_parse_count(arg, "--lora", 1, 65536, &rank, err) != CK_OK)
            return CK_ERR_INPUT;
        o->model.lora_rank = rank;
        return CK_OK;
    case CK_OPT_ATTENTION:
        if (strcmp(arg, "eager") != 0 && strcmp(arg, "sdpa") != 0 && strcmp(arg, "flash") != 0)
            return ck_err_fail(err, CK_ERR_INPUT, "--attention: expected eager, sdpa or flash, got '%.200s'", arg);
        o->model.attention = arg;
        return CK_OK;
    case CK_OPT_DP:
    case CK_OPT_ZERO:
    case CK_OPT_FSDP:
        return set_layout(code, arg, &o->model.layout, err);
    case CK_OPT_PP:
    case CK_OPT_MICROBATCHES:
    case CK_OPT_VIRTUAL_STAGES:
        return set_pipeline(code, arg, &o->model.layout, err);
    case CK_OPT_TP:
    case CK_OPT_SP:
    case CK_OPT_CP:
    case CK_OPT_PARTITION:
        return set_model_parallel(code, arg, &o->model.layout, err);
    default:
        return ck_err_fail(err, CK_ERR_INPUT, "internal error: option code %d", code);
    }
}

void ck_options_workload_help(FILE *out)
{
    ck_cost_model cost;
    ck_derive_cost_model_default(&cost);
    char reserve[32];
    ck_size_format(CK_DEVICE_RESERVE_FIXED, reserve, sizeof reserve);
    fprintf(out,
            "  --granularity G       for model files: cut stages at every op where one tensor\n"
            "                        carries all state (op), or only between top-level blocks\n"
            "                        and ops (block, the default); plan and chain also\n"
            "                        take node: every node on its own, as a graph\n"
            "  --gemm-flops RATE     for model files: the cost model's matrix-product rate in\n"
            "                        FLOP/s (default %g)\n"
            "  --mem-bandwidth RATE  for model files: the cost model's memory bandwidth in\n"
            "                        bytes/s (default %g)\n"
            "  --costs FILE          for model files: stage times measured by 'ckplan profile'\n"
            "                        instead of the cost model\n"
            "  --device NAME         the accelerator: its dense 16-bit tensor FLOP/s and memory\n"
            "                        bandwidth become the rates (--gemm-flops, --mem-bandwidth\n"
            "                        win), and where a budget is taken, its memory less a reserve\n"
            "                        of %s + %d%% is the default one (--budget wins); one of\n"
            "                        (docs/devices.md):\n",
            cost.gemm_flops, cost.mem_bandwidth, reserve, CK_DEVICE_RESERVE_PERCENT);
    ck_device_print_table(out, "    ");
    ck_options_model_help(out);
}

static void pipeline_help(FILE *out)
{
    fprintf(out,
            "  --pp N                for model files: N pipeline stages (1 to %d), each a\n"
            "                        contiguous part of the layers (their count must divide by\n"
            "                        N x V), the embeddings on the first, the head on the last;\n"
            "                        planned for the worst rank (docs/parallel.md); 'plan' only\n"
            "  --microbatches M      microbatches per step under 1F1B, each of --batch (default:\n"
            "                        as many as --pp); rank i holds min(N - i, M) in flight\n"
            "  --virtual-stages V    Megatron's interleaved 1F1B: V model chunks per rank\n"
            "                        (default 1); M must divide by N when V > 1\n",
            CK_LAYOUT_MAX_PP);
}

void ck_options_model_help(FILE *out)
{
    fprintf(out,
            "  --set NAME=VALUE      for model files: give dim NAME this value instead of the\n"
            "                        file's (dims computed from it follow); repeatable\n"
            "  --seq N, --batch N    the same as --set T=N and --set B=N\n"
            "  --optimizer NAME      for model files: the optimizer whose state is counted,\n"
            "                        instead of the file's: none, sgd, momentum, adam, adamw,\n"
            "                        adafactor, adam8bit ('run' executes all but the last two)\n"
            "  --recipe NAME         for model files: the training recipe, instead of the\n"
            "                        file's recipe and dtypes: fp32, amp-bf16 (f32 weights,\n"
            "                        bf16 activations), bf16-master (bf16 weights, f32 master\n"
            "                        weights and optimizer state), bf16 (everything bf16)\n"
            "  --impl NAME           the implementation whose autograd memory is counted, instead\n"
            "                        of the file's training.impl (Hugging Face configs: hf);\n"
            "                        it sets what nodes leave unset (docs/profiles.md):\n");
    for (size_t i = 0; i < ck_impl_count(); i++)
        fprintf(out, "                          %-6s %s\n", ck_impl_at(i)->name, ck_impl_at(i)->summary);
    fprintf(out,
            "  --grads WHEN          when parameter gradients exist, instead of the file's\n"
            "                        training.grads (Hugging Face configs: autograd on one\n"
            "                        process, else held):\n"
            "                          held     the whole step (zero_grad(set_to_none=False),\n"
            "                                   Megatron's and DeepSpeed's buffers)\n"
            "                          autograd made by the backward, freed by PyTorch 2's\n"
            "                                   zero_grad()\n"
            "  --optimizer-step HOW  how Adam's step is computed, which decides its temporaries:\n"
            "                          fused    none (default: Hugging Face Trainer's\n"
            "                                   adamw_torch_fused, DeepSpeed, Megatron)\n"
            "                          foreach  torch.optim's default on CUDA: a copy of the\n"
            "                                   trainable parameters in the state's dtype\n"
            "                          for-loop torch.optim's default on the CPU: two copies\n"
            "                                   of the largest trainable tensor\n"
            "  --grad-accum N        micro-steps accumulated per optimizer step (default 1):\n"
            "                        with autograd, later ones hold every gradient\n"
            "  --lora R              for Hugging Face configs: rank-R adapters on q, k, v, o and\n"
            "                        the MLP's projections, every base parameter frozen\n"
            "  --attention KIND      for Hugging Face configs: eager (keeps the probabilities),\n"
            "                        sdpa (default, as transformers picks: PyTorch's fused\n"
            "                        kernels keep log-sum-exp rows) or flash (the same)\n"
            "  --dp N                for model files: N data-parallel ranks (1 to %d, default\n"
            "                        1), each with its own --batch; budgets are per GPU\n"
            "  --zero S              for model files: ZeRO stage 0 to 3 over the --dp ranks: 1\n"
            "                        shards optimizer state and master weights, 2 also\n"
            "                        gradients, 3 also parameters (docs/parallel.md)\n"
            "  --fsdp STRATEGY       the same as --zero 3 (full-shard) or 2 (shard-grad-op)\n",
            CK_LAYOUT_MAX_DP);
    pipeline_help(out);
    ck_options_model_parallel_help(out);
}

void ck_options_model_parallel_help(FILE *out)
{
    fprintf(out,
            "  --tp N                for Hugging Face configs: N tensor-parallel ranks (1 to\n"
            "                        %d, Megatron's): each runs 1/N of the heads, KV heads,\n"
            "                        MLP width and (padded) vocabulary; norms, residuals and\n"
            "                        the projections' inputs stay whole\n"
            "  --sp                  with --tp above 1: Megatron's sequence parallelism, which\n"
            "                        splits what --tp leaves whole along the sequence\n"
            "  --cp N                for Hugging Face configs: N context-parallel ranks (1 to\n"
            "                        %d): each holds 1/N of the sequence; attention reads\n"
            "                        the others' keys and values (docs/parallel.md); ZeRO\n"
            "                        shards over the --dp times --cp ranks\n"
            "  --partition-activations  with --tp above 1 and no --sp: DeepSpeed's\n"
            "                        partition_activations (Megatron's\n"
            "                        --distribute-saved-activations): a checkpointed layer's\n"
            "                        input is kept split over the --tp ranks, gathered again\n"
            "                        for its recompute (docs/parallel.md)\n",
            CK_LAYOUT_MAX_TP, CK_LAYOUT_MAX_CP);
}

int ck_options_parse_slots(const char *text, ck_planner_opts *opts, ck_err *err)
{
    uint64_t slots;
    if (strcmp(text, "exact") == 0) {
        opts->exact = true;
        return CK_OK;
    }
    int rc = ck_options_parse_count(text, "--slots", 1, 1000000, &slots, err);
    opts->slots = (uint32_t)slots;
    opts->exact = false;
    return rc;
}

int ck_options_parse_count(const char *text, const char *flag, uint64_t min, uint64_t max, uint64_t *out,
                   ck_err *err)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (!isdigit((unsigned char)*text) || *end || errno || v < min || v > max)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: expected a whole number from %llu to %llu, got '%s'",
                       flag, (unsigned long long)min, (unsigned long long)max, text);
    *out = v;
    return CK_OK;
}

/* How many long options `name` (its first len bytes) can stand for, as getopt_long reads
 * it: one spelled out in full, else every option it abbreviates; the first in *match. */
static size_t long_matches(const struct option *longs, const char *name, size_t len,
                           const struct option **match)
{
    size_t n = 0;
    *match = NULL;
    for (const struct option *o = longs; len > 0 && o->name; o++) {
        if (strncmp(o->name, name, len) != 0)
            continue;
        if (o->name[len] == '\0') {
            *match = o;
            return 1;
        }
        if (n++ == 0)
            *match = o;
    }
    return n;
}

/* Whether getopt_long's complaint is about the long option `arg`, the argument it just read:
 * it reads past a long option before complaining, and sets optopt to 0 for one it does not
 * know and to the option's code for one given a value it does not take. A short option's
 * complaint can leave argv[optind - 1] at an earlier, valid, long option. */
static bool long_option_failed(const char *arg, const struct option *longs, int code)
{
    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
        return false;
    if (code == ':' || optopt == 0)
        return true;
    const char *eq = strchr(arg + 2, '=');
    const struct option *o;
    return eq && long_matches(longs, arg + 2, (size_t)(eq - arg - 2), &o) == 1 &&
           o->has_arg == no_argument && o->val == optopt;
}

/* The message for the long option `arg`, named as the user wrote it, without its value. */
static int long_option_error(const char *cmd, const char *arg, const struct option *longs,
                             int code, ck_err *err)
{
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    int shown = len > 200 ? 200 : (int)len;
    const struct option *o;
    size_t n = long_matches(longs, name, len, &o);
    const char *what = code == ':'                                 ? "needs a value"
                       : n == 1 && eq && o->has_arg == no_argument ? "takes no value"
                       : n > 1                                     ? "is ambiguous"
                                                                   : NULL;
    if (!what)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: unknown option '--%.*s'; see 'ckplan %s --help'",
                       cmd, shown, name, cmd);
    char could_be[256] = "";
    size_t used = 0;
    for (const struct option *c = longs; n > 1 && c->name; c++)
        if (strncmp(c->name, name, len) == 0 && used < sizeof could_be)
            used += (size_t)snprintf(could_be + used, sizeof could_be - used, "%s--%s",
                                     used ? ", " : " (", c->name);
    return ck_err_fail(err, CK_ERR_INPUT, "%s: option '--%.*s' %s%s%s; see 'ckplan %s --help'", cmd,
                   shown, name, what, could_be, n > 1 ? ")" : "", cmd);
}

int ck_options_error(const char *cmd, char **argv, const struct option *longs, int code,
                    ck_err *err)
{
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    if (long_option_failed(arg, longs, code))
        return long_option_error(cmd, arg, longs, code, err);
    char shown[8];
    int c = optopt & 0xff; /* a char, possibly negative */
    if (isgraph(c) && c < 0x80)
        snprintf(shown, sizeof shown, "-%c", c);
    else
        snprintf(shown, sizeof shown, "-\\x%02x", (unsigned)c);
    if (code == ':')
        return ck_err_fail(err, CK_ERR_INPUT, "%s: option '%s' needs a value; see 'ckplan %s --help'",
                       cmd, shown, cmd);
    return ck_err_fail(err, CK_ERR_INPUT, "%s: unknown option '%s'; see 'ckplan %s --help'", cmd,
                   shown, cmd);
}

int ck_options_parse(const ck_options_spec *spec, int argc, char **argv, ck_workload_opts *wopts,
                     const char **output, ck_err *err)
{
    opterr = 0;
    optind = 1;
    int code, rc = CK_OK;
    while (rc == CK_OK && (code = getopt_long(argc, argv, ":o:h", spec->longs, NULL)) != -1) {
        if (code == 'h') {
            spec->usage(stdout);
            return CK_HELP_PRINTED;
        } else if (code == 'o') {
            *output = optarg;
        } else if (spec->model_only ? ck_options_is_model(code) : ck_options_is_workload(code)) {
            rc = spec->model_file && !ck_options_in_model_file(code)
                     ? not_in_model_file(spec, code, err)
                     : ck_options_workload(code, optarg, wopts, err);
        } else if (!spec->own || (rc = spec->own(spec->ctx, code, optarg, err)) == CK_ERR_UNKNOWN) {
            rc = ck_options_error(spec->cmd, argv, spec->longs, code, err);
        }
    }
    return rc;
}

int ck_options_model_operand(const char *cmd, int argc, char **argv, const ck_workload_opts *opts,
                     ck_workload *w, ck_err *err)
{
    if (optind != argc - 1)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: expected exactly one MODEL; usage: ckplan %s "
                                          "MODEL [-o FILE] (see --help)", cmd, cmd);
    return ck_workload_load(argv[optind], opts, w, err);
}
