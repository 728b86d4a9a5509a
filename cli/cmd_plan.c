/* ckplan plan: plan a model under a budget, write the plan file, print a summary. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/chart.h"
#include "cli/files.h"
#include "cli/forward.h"
#include "cli/graphplan.h"
#include "cli/interrupt.h"
#include "cli/human.h"
#include "cli/options.h"
#include "cli/runner.h"
#include "planner/device.h"
#include "planner/dp_rows.h"
#include "planner/graph_planners.h"
#include "planner/json.h"
#include "planner/plan.h"
#include "planner/planner.h"
#include "planner/size.h"
#include "planner/workload.h"

#define DEFAULT_PLAN_FILE "ckplan.plan.json"

static void plan_usage(FILE *out)
{
    fprintf(out,
            "usage: ckplan plan MODEL --budget SIZE | --device NAME [options]\n"
            "\n"
            "Chooses which activations of a training step to keep and which to recompute so\n"
            "that the step fits in SIZE bytes, writes the plan and prints a summary. MODEL is\n"
            "an op-graph model (ckplan-model/1), a chain file (ckplan-chain/1), or a Hugging\n"
            "Face config.json or the directory holding one (see 'ckplan import --help'), or\n"
            "a Checkmate training graph (networkx node-link JSON: nodes and links), which is\n"
            "planned node by node into a graph plan (docs/plan-format.md, \"Graph plans\").\n"
            "\n"
            "  --budget SIZE         memory for the whole step: bytes, or a number with a unit:\n"
            "                        K M G T or KiB MiB GiB TiB (powers of 1024), KB MB GB TB\n"
            "                        (powers of 1000); e.g. 8G, 1.5GiB, 500MB. A whole number\n"
            "                        of bytes below 2^53 (8 PiB). Without it, --device's memory\n"
            "                        less its reserve\n"
            "  --inference           a forward pass only: no plan (checkpointing saves nothing\n"
            "                        without a backward); prints the weights, the KV cache and\n"
            "                        the forward's largest transient, and whether they fit (exit\n"
            "                        0) or not (exit 3); with --json as a ckplan-inference/1\n"
            "                        object on stdout; no file is written\n"
            "  --planner P           which planner (default dp, for graphs fast; see below)\n"
            "  --min-budget          graphs: print the planner's smallest feasible budget, in\n"
            "                        bytes, alone on a line; no plan is written (a planner\n"
            "                        that cannot tell it is refused, exit 2)\n"
            "  --time-limit SECONDS  graphs: the most a planner that searches long (milp) may\n"
            "                        take\n"
            "  --slots N|exact       dp: memory resolution, the budget in N units (default %d);\n"
            "                        exact: in bytes, refused (exit 2) where its table is too big\n"
            "  --variants            dp: also choose, per stage, what its saving forward keeps\n"
            "                        and its backward recomputes (a model's variants matmul,\n"
            "                        attn, none; a chain file's own): selective recompute\n"
            "  --threads N           dp: threads that fill its tables (default: one per\n"
            "                        processor); the plan is the same for every N\n",
            CK_DEFAULT_SLOTS);
    ck_options_workload_help(out);
    fprintf(out,
            "  -o, --output FILE     where to write the plan (default %s)\n"
            "  --json                print the plan object on stdout instead of the summary\n"
            "  --svg FILE            also draw the plan's memory timeline next to the\n"
            "                        baseline's, as a standalone SVG chart\n"
            "  -h, --help            show this help\n"
            "\nplanners:\n",
            DEFAULT_PLAN_FILE);
    for (const ck_planner *const *p = ck_planners; *p; p++)
        fprintf(out, "  %-8s %s\n", (*p)->name, (*p)->summary);
    fprintf(out, "\ngraph planners (the model options, --slots, --variants, --svg and --inference do not\n"
                 "apply):\n");
    for (const ck_graph_planner *const *p = ck_graph_planners; *p; p++)
        fprintf(out, "  %-8s %s\n", (*p)->name, (*p)->summary);
    fprintf(out, "\n"
                 "Static memory (parameters, gradients, optimizer state) is not activations:\n"
                 "checkpointing cannot reduce it, and the planners get what the budget leaves.\n"
                 "Exit codes: 0 planned, 1 runtime failure, 2 usage or input error, 3 the budget\n"
                 "cannot be met (the smallest budget that can is printed).\n");
}

enum { OPT_INFERENCE = CK_OPT_SVG + 1, OPT_MIN_BUDGET, OPT_TIME_LIMIT, OPT_VARIANTS, OPT_THREADS };

typedef struct {
    const char *model_path;
    const char *output, *svg;
    const char *planner_name; /* NULL: the default for the kind of MODEL */
    const ck_planner *planner;
    uint64_t budget;
    bool have_budget, json, inference, min_budget, have_slots;
    double time_limit_s;
    ck_planner_opts planner_opts;
    ck_workload_opts workload_opts;
} plan_args;

/* Returns CK_HELP_PRINTED when help was printed, else a status. */
static int parse_args(int argc, char **argv, plan_args *a, ck_err *err)
{
    static const struct option longs[] = {
        CK_WORKLOAD_LONG_OPTIONS,
        {"budget", required_argument, NULL, CK_OPT_BUDGET},
        {"planner", required_argument, NULL, CK_OPT_PLANNER},
        {"slots", required_argument, NULL, CK_OPT_SLOTS},
        {"json", no_argument, NULL, CK_OPT_JSON},
        {"inference", no_argument, NULL, OPT_INFERENCE},
        {"min-budget", no_argument, NULL, OPT_MIN_BUDGET},
        {"time-limit", required_argument, NULL, OPT_TIME_LIMIT},
        {"variants", no_argument, NULL, OPT_VARIANTS},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"svg", required_argument, NULL, CK_OPT_SVG},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(a, 0, sizeof *a);
    a->output = DEFAULT_PLAN_FILE;
    a->planner_opts.slots = CK_DEFAULT_SLOTS;
    a->planner_opts.stop = ck_interrupt_flag();
    ck_workload_opts_default(&a->workload_opts);
    a->workload_opts.graphs = true;
    a->workload_opts.pipelines = true;
    opterr = 0;
    optind = 1;
    int code, rc = CK_OK;
    uint64_t limit;
    while (rc == CK_OK && (code = getopt_long(argc, argv, ":o:h", longs, NULL)) != -1) {
        switch (code) {
        case 'h':
            plan_usage(stdout);
            return CK_HELP_PRINTED;
        case 'o':
            a->output = optarg;
            break;
        case CK_OPT_BUDGET:
            rc = ck_size_parse(optarg, &a->budget, err);
            a->have_budget = true;
            break;
        case CK_OPT_PLANNER:
            a->planner_name = optarg;
            break;
        case CK_OPT_SLOTS:
            rc = ck_options_parse_slots(optarg, &a->planner_opts, err);
            a->have_slots = true;
            break;
        case OPT_MIN_BUDGET:
            a->min_budget = true;
            break;
        case OPT_TIME_LIMIT:
            rc = ck_options_parse_count(optarg, "--time-limit", 1, 1000000, &limit, err);
            a->time_limit_s = (double)limit;
            break;
        case CK_OPT_JSON:
            a->json = true;
            break;
        case OPT_INFERENCE:
            a->inference = true;
            break;
        case OPT_VARIANTS:
            a->planner_opts.variants = true;
            break;
        case OPT_THREADS:
            rc = ck_options_parse_count(optarg, "--threads", 1, CK_DP_ROWS_MAX_WORKERS, &limit, err);
            a->planner_opts.threads = (uint32_t)limit;
            break;
        case CK_OPT_SVG:
            a->svg = optarg;
            break;
        default:
            rc = ck_options_is_workload(code) ? ck_options_workload(code, optarg, &a->workload_opts, err)
                                             : ck_options_error("plan", argv, longs, code, err);
        }
    }
    if (rc != CK_OK)
        return rc;
    if (optind != argc - 1)
        return ck_err_fail(err, CK_ERR_INPUT, optind >= argc ? "plan: no MODEL given; usage: ckplan plan "
                                                           "MODEL --budget SIZE (see --help)"
                                                         : "plan: more than one MODEL given (%s)",
                       optind < argc ? argv[optind + 1] : "");
    if (!a->have_budget && !a->workload_opts.device && !a->min_budget)
        return ck_err_fail(err, CK_ERR_INPUT, "plan: --budget SIZE is required, or --device NAME "
                                          "(e.g. --budget 8G, --device h100-80gb)");
    if (!a->have_budget && a->workload_opts.device)
        a->budget = ck_device_budget(a->workload_opts.device);
    a->model_path = argv[optind];
    return CK_OK;
}

/* A chain or model: the chain planner, and no graph-only option. */
static int check_chain_args(plan_args *a, ck_err *err)
{
    a->planner = ck_planner_find(a->planner_name ? a->planner_name : "dp");
    char names[128];
    ck_planner_names(names, sizeof names);
    if (!a->planner)
        return ck_err_fail(err, CK_ERR_INPUT, "--planner: no planner '%s' (%s; graph planners are "
                           "for Checkmate graphs and --granularity node)", a->planner_name, names);
    if (a->min_budget || a->time_limit_s > 0)
        return ck_err_fail(err, CK_ERR_INPUT, "plan: %s is for graphs (Checkmate's, or a model with "
                           "--granularity node); %s is not one",
                           a->min_budget ? "--min-budget" : "--time-limit", a->model_path);
    return CK_OK;
}

/* MODEL is a Checkmate graph, or a model planned node by node (model): planned by
 * cli/graphplan. */
static int plan_graph(const plan_args *a, bool model)
{
    ck_err err;
    bool variants = a->planner_opts.variants;
    bool threads = a->planner_opts.threads != 0;
    if (a->svg || a->inference || a->have_slots || variants || threads ||
        (a->workload_opts.device && !model))
        return ck_main_report(ck_err_fail(&err, CK_ERR_INPUT, "plan: %s does not apply to %s (%s)",
                                          a->svg ? "--svg" : a->inference ? "--inference" :
                                          a->have_slots ? "--slots" : variants ? "--variants" :
                                          threads ? "--threads" : "--device",
                                          model ? "--granularity node" : "a Checkmate graph",
                                          a->model_path), err.msg);
    ck_graphplan_args ga = {
        .graph_path = a->model_path, .output = a->output, .planner = a->planner_name,
        .budget = a->budget, .json = a->json, .min_budget = a->min_budget,
        .time_limit_s = a->time_limit_s, .workload = model ? &a->workload_opts : NULL,
    };
    return ck_graphplan_plan(&ga);
}

static void format_time(double t, bool seconds, char *buf, size_t len)
{
    if (seconds)
        ck_human_seconds(t, buf, len);
    else
        snprintf(buf, len, "%.6g", t);
}

/* Prints the stages whose flag is set, consecutive runs shortened to "first..last". */
static void print_stage_runs(FILE *out, const ck_chain *c, const bool *set)
{
    bool first = true;
    for (size_t i = 0; i < c->n_stages; i++) {
        if (!set[i])
            continue;
        size_t j = i;
        while (j + 1 < c->n_stages && set[j + 1])
            j++;
        fputs(first ? "" : ", ", out);
        ck_human_put_terminal_text(out, c->stages[i].name);
        if (j > i) {
            fputs(j == i + 1 ? ", " : "..", out);
            ck_human_put_terminal_text(out, c->stages[j].name);
        }
        first = false;
        i = j;
    }
    if (first)
        fprintf(out, "none");
}

/* Stage i's F_all at schedule index k runs the variant named like the one at index j. */
static bool same_variant(const ck_chain *c, const ck_schedule *s, size_t k, size_t j)
{
    const ck_action *a = &s->actions[k], *b = &s->actions[j];
    return a->kind == CK_F_ALL && a->variant > 0 &&
           strcmp(ck_chain_variant(c, a->stage, a->variant).name,
                  ck_chain_variant(c, b->stage, b->variant).name) == 0;
}

/* The stages whose F_all runs a variant (keeps less, its B recomputes the rest), by
 * variant name, in order of first use; nothing when there are none. set and done
 * (n_stages each) are scratch: done marks the stages whose variant is printed, so that the
 * schedule is walked once per name, not once per operation (a revolve schedule has a
 * million). */
static void print_variants(FILE *out, const ck_chain *c, const ck_schedule *s, bool *set, bool *done)
{
    memset(done, 0, c->n_stages * sizeof *done);
    for (size_t k = 0; k < s->n; k++) {
        if (!same_variant(c, s, k, k) || done[s->actions[k].stage])
            continue;
        memset(set, 0, c->n_stages * sizeof *set);
        for (size_t j = k; j < s->n; j++)
            if (same_variant(c, s, j, k))
                set[s->actions[j].stage] = done[s->actions[j].stage] = true;
        fprintf(out, "variant ");
        ck_human_put_terminal_text(out, ck_chain_variant(c, s->actions[k].stage, s->actions[k].variant).name);
        fprintf(out, " (F_all keeps less, B recomputes the rest):\n  ");
        print_stage_runs(out, c, set);
        fprintf(out, "\n");
    }
}

/* Which stages the first forward does not keep (they are recomputed), and which inputs it
 * keeps as checkpoints: read off the operations before the loss. flags (2 * n_stages,
 * zeroed) is allocated by the caller before the plan is written, so that nothing can fail
 * once it is. */
static void print_checkpoints(FILE *out, const ck_chain *c, const ck_schedule *s, bool *flags)
{
    size_t L = c->n_stages;
    bool *recomputed = flags;
    bool *kept_input = recomputed + L;
    size_t n_recomputed = 0;
    for (size_t k = 0; k < s->n && s->actions[k].kind != CK_LOSS; k++) {
        size_t i = s->actions[k].stage;
        if (s->actions[k].kind != CK_F_ALL && !recomputed[i]) {
            recomputed[i] = true;
            n_recomputed++;
        }
        if (s->actions[k].kind == CK_F_CK)
            kept_input[i] = true;
    }
    fprintf(out, "checkpointed stages (activations dropped, recomputed in backward): %zu of %zu\n  ",
            n_recomputed, L);
    print_stage_runs(out, c, recomputed);
    fprintf(out, "\ncheckpoints: the inputs of these stages are kept during the forward pass:\n  ");
    print_stage_runs(out, c, kept_input);
    fprintf(out, "\n");
    print_variants(out, c, s, recomputed, kept_input);
}

static void print_size_row(FILE *out, const char *label, uint64_t plan, uint64_t base, const char *note)
{
    char a[32], b[32];
    ck_size_format(plan, a, sizeof a);
    ck_size_format(base, b, sizeof b);
    fprintf(out, "  %-13s %12s %12s   %s\n", label, a, b, note);
}

/* The data-parallel layout, when one is given: what its ZeRO stage shards. */
static void print_layout(FILE *out, const ck_layout *l)
{
    static const char *const sharded[] = {
        "nothing sharded", "optimizer state and master weights sharded",
        "optimizer state, master weights and gradients sharded",
        "optimizer state, master weights, gradients and parameters sharded"};
    if (!l->dp)
        return;
    fprintf(out, "layout: %llu data-parallel rank%s, ZeRO-%u: %s; static memory and budget per "
                 "rank, --batch per rank\n", (unsigned long long)l->dp, l->dp == 1 ? "" : "s",
            l->zero, sharded[ck_layout_shards(l) ? l->zero : 0]);
}

/* The pipeline layout, when one is given: stages, microbatches, virtual stages. */
static void print_pipeline_layout(FILE *out, const ck_layout *l)
{
    if (!ck_layout_pipelined(l))
        return;
    uint64_t n = ck_layout_pp(l), m = ck_layout_microbatches(l), v = ck_layout_virtual(l);
    fprintf(out, "pipeline: %llu stage%s, %llu microbatch%s a step (each of --batch), %s; "
                 "bubble (N - 1)/(M V) = %.1f%% of the step (not in the step time); budget per "
                 "GPU, planned for the worst rank\n", (unsigned long long)n, n == 1 ? "" : "s",
            (unsigned long long)m, m == 1 ? "" : "es",
            v > 1 ? "interleaved 1F1B" : "1F1B (PipeDream-Flush)",
            100 * ck_plan_pipeline_bubble(n, m, v));
    if (v > 1)
        fprintf(out, "  %llu virtual stages: chunk c of %llu on rank c mod %llu\n",
                (unsigned long long)v, (unsigned long long)(n * v), (unsigned long long)n);
}

/* Every rank of a pipeline: its chunks' stages, in-flight microbatches, and bytes. */
static void print_pipeline_ranks(FILE *out, const ck_workload *w, const ck_pipeline *p)
{
    char st[32], act[32], tot[32], b[32];
    fprintf(out, "pipeline ranks (each planned at the chain budget B' whose replayed total fits, "
                 "by bisection; activations = (in flight - 1) x C + P per chunk):\n");
    fprintf(out, "  %-5s %-28s %9s %12s %12s %12s %12s\n", "rank", "stages", "in flight", "static",
            "activations", "total", "B'");
    for (uint64_t i = 0; i < p->n_ranks; i++) {
        const ck_pipeline_rank *r = &p->ranks[i];
        ck_size_format(r->statics.total, st, sizeof st);
        ck_size_format(r->activation, act, sizeof act);
        ck_size_format(r->statics.total + r->activation, tot, sizeof tot);
        ck_size_format(r->chain_budget, b, sizeof b);
        fprintf(out, "  %-5llu ", (unsigned long long)i);
        size_t used = 0;
        for (size_t j = 0; j < r->n_chunks; j++) {
            const char *a = w->chain.stages[r->chunks[j].first].name;
            const char *z = w->chain.stages[r->chunks[j].end - 1].name;
            fputs(j ? "," : "", out);
            ck_human_put_terminal_text(out, a); /* names from the input: shown, never obeyed */
            fputs("..", out);
            ck_human_put_terminal_text(out, z);
            used += (j ? 1 : 0) + strlen(a) + 2 + strlen(z);
        }
        fprintf(out, "%*s %9llu %12s %12s %12s %12s%s\n", used < 28 ? (int)(28 - used) : 0, "",
                (unsigned long long)r->in_flight, st, act, tot, b,
                i == p->worst ? "   worst: the plan's" : "");
    }
    fprintf(out, "  every rank runs its own schedule of its chunks at its B'; the plan file's "
                 "schedule is the worst rank's first chunk's\n\n");
}

/* Megatron's model parallelism, when given: what each rank's model holds of the whole. */
static void print_model_parallel(FILE *out, const ck_layout *l)
{
    if (!ck_layout_model_parallel_given(l))
        return;
    unsigned long long tp = ck_layout_tp(l), cp = ck_layout_cp(l);
    fprintf(out, "layout: %llu tensor-parallel rank%s%s, %llu context-parallel rank%s: a rank runs "
                 "1/%llu of the heads, MLP width and vocabulary", tp, tp == 1 ? "" : "s",
            l->sp ? " with sequence parallelism" : "", cp, cp == 1 ? "" : "s", tp);
    if (l->sp)
        fprintf(out, ", 1/%llu of the sequence outside attention and the MLP", tp * cp);
    if (cp > 1)
        fprintf(out, ", 1/%llu of the sequence%s", cp, l->sp ? " inside them" : "");
    if (cp > 1 && ck_layout_shards(l))
        fprintf(out, "; ZeRO shards over the %llu data- and context-parallel ranks",
                (unsigned long long)ck_layout_ranks(l));
    fprintf(out, "; parameters, activations and plan are one rank's\n");
    if (l->partition)
        fprintf(out, "partitioned checkpoints (DeepSpeed's partition_activations): a checkpointed "
                     "layer's input is kept as 1/%llu of it, gathered whole again to recompute; "
                     "planned at the whole-checkpoint budget B' whose replay fits\n", tp);
}

/* What PEFT's LoRA adapters keep of their inputs under the profile (ck_model_adapters). */
static void print_adapters(FILE *out, const ck_model *m)
{
    ck_dtype copy = CK_F32;
    ck_adapters how = ck_model_adapters(m, &copy);
    if (how == CK_ADAPTERS_COPY)
        fprintf(out, ";\n  PEFT's LoRA adapters in f32 (autocast_adapter_dtype): each adapted projection "
                "keeps its own %s copy of its input%s", ck_dtype_name(copy),
                copy == CK_F32 ? "" : " (autocast's, for lora_A)");
    else if (how == CK_ADAPTERS_CAST)
        fprintf(out, ";\n  LoRA adapters cast to %s with the rest (DeepSpeed's and FSDP's mixed precision), "
                "keeping no copies of their inputs (PEFT alone keeps them in f32: --recipe bf16)",
                ck_dtype_name(m->training.param_dtype));
}

/* What ckplan assumes of the training loop, said where the user reads the figures. */
static void print_assumed(FILE *out, const ck_model *m)
{
    const ck_training *t = &m->training;
    static const char *const steps[] = {
        [CK_OPTSTEP_FUSED] = "a fused optimizer step, no temporaries (Trainer's adamw_torch_fused)",
        [CK_OPTSTEP_FOREACH] = "torch.optim's foreach step (CUDA's default): a copy of the trainable parameters",
        [CK_OPTSTEP_FOR_LOOP] = "torch.optim's for-loop step (the CPU's default): two of the largest tensor"};
    fprintf(out, "assumed: %s;\n  %s",
            t->grads == CK_GRADS_AUTOGRAD
                ? "gradients made by the backward, freed by zero_grad() (PyTorch 2's default)"
                : "gradients held for the whole step (zero_grad(set_to_none=False), Megatron, DeepSpeed)",
            steps[t->optimizer_step]);
    if (t->grad_accum > 1)
        fprintf(out, ";\n  %llu micro-steps accumulated per optimizer step: figures of the last, times per "
                "micro-step", (unsigned long long)t->grad_accum);
    print_adapters(out, m);
    bool leaf = false;
    if (ck_model_frozen_embedding(m, &leaf) && leaf)
        fputs(";\n  the frozen embedding's output requires grad, as enable_input_require_grads() makes it "
              "(gradient_checkpointing_enable() installs it, get_peft_model on such a model too, and "
              "emit hf's and fsdp's snippets); plain PEFT without it holds a little less", out);
    fputs("\n  (--grads, --optimizer-step and --grad-accum change these)\n", out);
}

/* The parameter count by part, and how they are trained. */
static void print_model_training(FILE *out, const ck_workload *w)
{
    const ck_static_mem *st = &w->statics;
    const ck_param_parts *p = &st->parts;
    char total[32], emb[32], layers[32], head[32];
    ck_human_count(st->n_params, total, sizeof total);
    ck_human_count(p->embeddings, emb, sizeof emb);
    ck_human_count(p->per_layer ? p->per_layer : p->layers, layers, sizeof layers);
    ck_human_count(p->head, head, sizeof head);
    fprintf(out, "parameters: %s", total);
    if (p->n_layers)
        fprintf(out, " = embeddings %s + %zu layer%s %s %s + head %s", emb, p->n_layers,
                p->n_layers == 1 ? "" : "s", p->per_layer ? "x" : "in all", layers, head);
    if (st->n_trainable != st->n_params) {
        char trained[32];
        ck_human_count(st->n_trainable, trained, sizeof trained);
        fprintf(out, "; %s trainable, the rest frozen", trained);
    }
    const ck_training *t = &w->model->training;
    fprintf(out, "\ntraining: %s%s%soptimizer %s, parameters %s, gradients %s, activations %s%s\n",
            t->recipe ? "recipe " : "", t->recipe ? ck_training_recipe(t->recipe)->name : "",
            t->recipe ? ", " : "", ck_training_optimizer_name(t->optimizer),
            ck_dtype_name(t->param_dtype), ck_dtype_name(t->grad_dtype), ck_dtype_name(w->model->dtype),
            t->master_weights ? ", f32 master weights" : "");
    if (w->model->impl) /* a model file without one runs its nodes' attributes as written */
        fprintf(out, "implementation: %s (%s)\n", w->model->impl->name, w->model->impl->summary);
    print_assumed(out, w->model);
    print_layout(out, &st->layout);
    print_model_parallel(out, &st->layout);
    print_pipeline_layout(out, &st->layout);
    fputc('\n', out);
}

/* The static memory by part, under its total. */
static void print_static_parts(FILE *out, const ck_workload *w, const ck_static_mem *st)
{
    const ck_training *t = &w->model->training;
    char note[128];
    snprintf(note, sizeof note, "%s", ck_dtype_name(t->param_dtype));
    print_size_row(out, "  parameters", st->params, st->params, note);
    snprintf(note, sizeof note, "%s", ck_dtype_name(t->grad_dtype));
    char made[32];
    ck_size_format(st->made_grads, made, sizeof made);
    if (t->grads == CK_GRADS_AUTOGRAD)
        snprintf(note, sizeof note, "%s, made by the backward (in activations): %s",
                 ck_dtype_name(t->grad_dtype), made);
    print_size_row(out, "  gradients", st->grads, st->grads, note);
    snprintf(note, sizeof note, "%s%s",
             t->optimizer ? ck_training_optimizer_name(t->optimizer) : "no optimizer",
             t->optimizer ? " state" : "");
    print_size_row(out, "  optimizer", st->optimizer, st->optimizer, note);
    print_size_row(out, "  master", st->master, st->master, "f32 master weights");
    print_size_row(out, "  inputs", st->held_inputs, st->held_inputs,
                   "held for the whole step (token ids, targets)");
    if (st->layout.zero >= 3 && ck_layout_shards(&st->layout))
        print_size_row(out, "  gather", st->gather, st->gather,
                       "all-gather buffers: whole parameters of a unit and the next one");
    if (st->layout.zero >= 2 && ck_layout_shards(&st->layout))
        print_size_row(out, "  scatter", st->reduce_scatter, st->reduce_scatter,
                       "reduce-scatter buffer: whole gradients of the largest unit");
}

/* Checkpointing every layer, what users compare a plan with (HF's
 * gradient_checkpointing_enable()): its figures, replayed as the plan's are. Nothing with a
 * pipeline layout; a line saying why for a model whose layers are unknown. */
static void print_every_layer(FILE *out, const ck_plan_doc *d)
{
    const ck_plan_every *e = d->every_layer;
    if (!e) {
        if (!d->pipeline)
            fprintf(out, "every layer: no figures, the model's layers are not known (see "
                         "--planner every)\n\n");
        return;
    }
    bool stages = d->stage_map.chain->layers == CK_CHAIN_NO_LAYERS;
    char total[32], act[32], time[32];
    ck_size_format(d->static_bytes + e->replay.peak_bytes, total, sizeof total);
    ck_size_format(e->replay.peak_bytes, act, sizeof act);
    format_time(e->replay.time, d->time_unit != NULL, time, sizeof time);
    fprintf(out, "every %s checkpointed (%zu %s%s; %s; --planner every):\n",
            stages ? "stage" : "layer", e->layers, stages ? "stage" : "layer",
            e->layers == 1 ? "" : "s",
            stages ? "a chain file names no layers" : "as gradient_checkpointing_enable() does");
    fprintf(out, "  total %s, activations %s, step time %s, %+.1f%% overhead\n\n", total, act, time,
            100 * ck_plan_overhead(e->replay.time, d->baseline.time));
}

static void print_summary(FILE *out, const ck_workload *w, const ck_plan_doc *d, const char *output,
                          bool *flags)
{
    char budget[32], note[256], s1[32], s2[32];
    ck_size_format(d->budget_bytes, budget, sizeof budget);
    const ck_chain *c = d->stage_map.chain; /* a pipeline's: its worst rank's first chunk */
    ck_human_put_terminal_text(out, c->name); /* names from the input: shown, never obeyed */
    fputs(" (", out);
    ck_human_put_terminal_text(out, w->path);
    fprintf(out, "): %zu stages%s%s\n", w->chain.n_stages, d->granularity ? ", granularity " : "",
            d->granularity ? d->granularity : "");
    fprintf(out, "planner %s, budget %s (%llu bytes)%s\n\n", d->planner, budget,
            (unsigned long long)d->budget_bytes,
            d->baseline_fits ? ": the baseline fits, nothing to recompute" : "");
    if (w->model)
        print_model_training(out, w);
    if (d->pipeline)
        fprintf(out, "pipeline rank %zu, the worst (its microbatches in flight counted):\n",
                d->pipeline->worst);
    fprintf(out, "  %-13s %12s %12s\n", "memory", "plan", "baseline");
    print_size_row(out, "static", d->static_bytes, d->static_bytes,
                   w->model ? "what checkpointing cannot reduce:" : "a chain file has none");
    if (w->model)
        print_static_parts(out, w, d->statics);
    print_size_row(out, "activations", d->predicted.peak_bytes, d->baseline.peak_bytes,
                   d->pipeline ? "(in flight - 1) x C + P, C and P by replay"
                   : w->model && w->model->training.grads == CK_GRADS_AUTOGRAD
                       ? "peak of the replayed step, the gradients made by then included"
                       : "peak of the replayed schedule");
    uint64_t total = d->static_bytes + d->predicted.peak_bytes;
    ck_size_format(d->budget_bytes - total, s1, sizeof s1);
    snprintf(note, sizeof note, "of %s budget, %s to spare", budget, s1);
    print_size_row(out, "total", total, d->static_bytes + d->baseline.peak_bytes, note);
    bool seconds = d->time_unit != NULL;
    format_time(d->predicted.time, seconds, s1, sizeof s1);
    format_time(d->baseline.time, seconds, s2, sizeof s2);
    fprintf(out, "  %-13s %12s %12s   %+.1f%% overhead%s\n\n", "step time", s1, s2,
            100 * ck_plan_overhead(d->predicted.time, d->baseline.time),
            !seconds                   ? " (in the chain's time unit)"
            : d->costs_path            ? " (measured stage times)"
                                       : " (roofline cost model)");
    print_every_layer(out, d);
    if (d->pipeline)
        print_pipeline_ranks(out, w, d->pipeline);
    if (d->pipeline)
        fprintf(out, "rank %zu's first chunk (%zu stages):\n", d->pipeline->worst, c->n_stages);
    print_checkpoints(out, c, &d->result->schedule, flags);
    const ck_plan_result *r = d->result;
    fprintf(out, "extra forward operations: %zu (F_ck %zu, F_none %zu)",
            d->predicted.count[CK_F_CK] + d->predicted.count[CK_F_NONE] + d->predicted.count[CK_F_ALL] - c->n_stages,
            d->predicted.count[CK_F_CK], d->predicted.count[CK_F_NONE]);
    if (r->snapshots >= 0)
        fprintf(out, ", %ld snapshots", r->snapshots);
    if (r->segments >= 0)
        fprintf(out, ", %ld segments", r->segments);
    fprintf(out, "\nplan written to %s\n", output);
}

static int report_infeasible(const plan_args *a, const ck_workload *w, uint64_t activation_min)
{
    char have[32], need[32], stat[32], act[32], dp_need[32];
    ck_size_format(a->budget, have, sizeof have);
    uint64_t total_min = ck_planner_step_budget(w->statics.total, activation_min);
    ck_size_format(total_min, need, sizeof need);
    ck_size_format(w->statics.total, stat, sizeof stat);
    ck_size_format(activation_min, act, sizeof act);
    fprintf(stderr, "ckplan: budget %s (%llu bytes) is too small for planner %s: its smallest plan "
                    "needs %s (%llu bytes) = static %s + activations %s\n",
            have, (unsigned long long)a->budget, a->planner->name, need,
            (unsigned long long)total_min, stat, act);
    if (a->planner != &ck_planner_dp) {
        ck_plan_result res;
        ck_replay r;
        uint64_t dp_min = 0;
        ck_err ignored;
        ck_schedule_replayer exact = ck_workload_replayer(w);
        int rc = ck_planner_run_by(&w->chain, &exact, &ck_planner_dp, 0, &a->planner_opts, &res, &r,
                                   &dp_min, &ignored);
        ck_planner_result_free(&res);
        if (rc == CK_ERR_INFEASIBLE && dp_min < activation_min) {
            uint64_t dp_total = ck_planner_step_budget(w->statics.total, dp_min);
            ck_size_format(dp_total, dp_need, sizeof dp_need);
            fprintf(stderr, "ckplan: planner dp fits in %s (%llu bytes)\n", dp_need,
                    (unsigned long long)dp_total);
        }
    }
    return CK_ERR_INFEASIBLE;
}

/* A pipeline rank that does not fit: its smallest total, found with the planner's smallest
 * chain budget. */
static int report_pipeline_infeasible(const plan_args *a, const ck_pipeline *p)
{
    char have[32], need[32], stat[32], act[32];
    ck_size_format(a->budget, have, sizeof have);
    for (uint64_t i = 0; i < p->n_ranks; i++) {
        const ck_pipeline_rank *r = &p->ranks[i];
        if (r->fits)
            continue;
        uint64_t total = ck_planner_step_budget(r->statics.total, r->min_activation);
        ck_size_format(total, need, sizeof need);
        ck_size_format(r->statics.total, stat, sizeof stat);
        ck_size_format(r->min_activation, act, sizeof act);
        fprintf(stderr, "ckplan: budget %s (%llu bytes) is too small for pipeline rank %llu with "
                        "planner %s: its smallest plan needs %s (%llu bytes) = static %s + "
                        "activations %s of %llu microbatch chunks in flight\n",
                have, (unsigned long long)a->budget, (unsigned long long)i, a->planner->name,
                need, (unsigned long long)total, stat, act, (unsigned long long)r->in_flight);
    }
    return CK_ERR_INFEASIBLE;
}

/* static_over_budget: the budget does not hold the static memory; what sharding or offload
 * would leave. */
static int report_static_too_large(const plan_args *a, const ck_workload *w, uint64_t min_activation)
{
    ck_warnings ws = {.n = 1};
    ck_err err;
    int rc = ck_warning_static_over_budget(w->model, &w->statics, a->budget, min_activation,
                                           &ws.items[0], &err);
    if (rc != CK_OK)
        return ck_main_report(rc, err.msg);
    ck_warning_print(stderr, &ws);
    return CK_ERR_INFEASIBLE;
}

/* Where the budget came from when a device is named: --budget's, or the device's memory
 * less its reserve (without a device it can only be --budget's). */
static void print_budget_source(FILE *out, const plan_args *a)
{
    const ck_device *d = a->workload_opts.device;
    if (!d)
        return;
    char mem[32], reserve[32];
    ck_size_format(d->memory_bytes, mem, sizeof mem);
    ck_size_format(ck_device_reserve(d), reserve, sizeof reserve);
    if (a->have_budget)
        fprintf(out, "budget from --budget; device %s (%s) for the rates\n", d->name, d->label);
    else
        fprintf(out, "budget from --device %s (%s): %s less a reserve of %s (docs/devices.md)\n",
                d->name, d->label, mem, reserve);
}

/* --inference: the forward pass's figures instead of a plan. */
static int plan_inference(const plan_args *a, const ck_workload *w, ck_err *err)
{
    const ck_device *d = a->workload_opts.device;
    if (ck_layout_pipelined(&a->workload_opts.model.layout))
        return ck_err_fail(err, CK_ERR_INPUT, "plan: --inference takes no pipeline layout (--pp, "
                           "--microbatches, --virtual-stages): it is planned for training only");
    char source[128];
    snprintf(source, sizeof source, "%s%s", a->have_budget || !d ? "--budget" : "--device ",
             a->have_budget || !d ? "" : d->name);
    return ck_forward_report(w, a->budget, source, d ? d->name : NULL, a->json, err);
}

int ck_cmd_plan(int argc, char **argv)
{
    plan_args a;
    ck_err err = {{0}};
    int rc = parse_args(argc, argv, &a, &err);
    const ck_named_file in[] = {{a.model_path, "MODEL"}, {a.workload_opts.costs_path, "--costs"}};
    const ck_named_file out[] = {{a.output, "-o"}, {a.svg, "--svg"}};
    if (rc == CK_OK)
        rc = CK_CHECK_OUTPUTS_APART("plan", in, out, &err);
    if (rc != CK_OK)
        return ck_main_report(rc, err.msg);
    bool graph = false;
    rc = ck_graphplan_is_graph_file(a.model_path, &graph, &err);
    if (rc == CK_OK && (graph || a.workload_opts.granularity == CK_GRAN_NODE))
        return plan_graph(&a, !graph);
    if (rc == CK_OK)
        rc = check_chain_args(&a, &err);
    if (rc != CK_OK)
        return ck_main_report(rc, err.msg);
    ck_workload w;
    rc = ck_workload_load(a.model_path, &a.workload_opts, &w, &err);
    if (rc != CK_OK)
        return ck_main_report(rc, err.msg);
    if (a.inference) {
        rc = plan_inference(&a, &w, &err);
        ck_workload_free(&w);
        return rc == CK_ERR_INFEASIBLE ? rc : ck_main_report(rc, err.msg);
    }
    ck_planned planned;
    rc = ck_runner_plan(&w, a.planner, a.budget, &a.planner_opts, &a.workload_opts, &planned, &err);
    if (rc == CK_ERR_INFEASIBLE) {
        /* its own messages, already printed: nothing for ck_main_report to add */
        if (w.model && !a.json)
            print_model_training(stderr, &w);
        ck_warning_print(stderr, &planned.warnings);
        rc = planned.pipelined        ? report_pipeline_infeasible(&a, &planned.pipeline)
             : planned.static_too_large ? report_static_too_large(&a, &w, planned.min_activation_bytes)
                                        : report_infeasible(&a, &w, planned.min_activation_bytes);
        ck_runner_planned_free(&planned);
        ck_workload_free(&w);
        return rc;
    }
    /* Everything that can fail comes before the plan is written, the chart included: a
     * failure then leaves the old plan file as it was. */
    bool *flags = NULL;
    if (rc == CK_OK)
        rc = ck_interrupt_check(&err); /* a signal during planning: leave the files as they are */
    if (rc == CK_OK) /* run reads plans under the input limit */
        rc = ck_json_check_output_size(a.output, strlen(planned.text), &err);
    if (rc == CK_OK && !a.json && !(flags = calloc(2 * w.chain.n_stages, sizeof *flags)))
        rc = ck_err_oom(&err);
    if (rc == CK_OK && a.svg) {
        char title[256];
        snprintf(title, sizeof title, "%s: %s plan, activation memory per operation", w.chain.name,
                 a.planner->name);
        rc = ck_chart_schedules_write(a.svg, title, planned.doc.stage_map.chain, a.planner->name,
                                      &planned.result.schedule, NULL, NULL,
                                      planned.activation_budget, &err);
    }
    if (rc == CK_OK)
        rc = ck_files_write_atomic(a.output, planned.text, strlen(planned.text), &err);
    if (rc == CK_OK && a.json)
        fputs(planned.text, stdout);
    else if (rc == CK_OK)
        print_summary(stdout, &w, &planned.doc, a.output, flags);
    if (rc == CK_OK && !a.json)
        print_budget_source(stdout, &a);
    if (rc == CK_OK)
        ck_warning_print(stderr, &planned.warnings);
    free(flags);
    ck_runner_planned_free(&planned);
    ck_workload_free(&w);
    if (rc == CK_ERR_RUNTIME && !err.msg[0])
        snprintf(err.msg, sizeof err.msg, "out of memory");
    return ck_main_report(rc, err.msg);
}
