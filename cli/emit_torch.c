/* ckplan emit torch: the model as a PyTorch module, its nodes as data that the runtime
 * (cli/torch_runtime.py) interprets, and the plan's schedule. */
#include "cli/emit_torch.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/commands.h"
#include "cli/emit.h"
#include "cli/files.h"
#include "cli/interrupt.h"
#include "cli/options.h"
#include "cli/pystr.h"
#include "cli/runner.h"
#include "planner/plan.h"
#include "planner/plan_check.h"
#include "planner/workload.h"
#include "sim/exec.h"

static void emit_torch_usage(FILE *out)
{
    fprintf(out, "usage: ckplan emit torch MODEL [options] [--plan PLAN] [-o FILE.py]\n"
                 "\n"
                 "Writes a standalone Python module that implements MODEL in PyTorch (f32, CPU):\n"
                 "build(seed=0) returns (model, inputs), model(*inputs) the step's scalar loss,\n"
                 "STAGES the stage names, make_optimizer(model) the model's optimizer. With a plan,\n"
                 "the forward runs the plan's schedule exactly (recomputation included, dropout\n"
                 "redrawn identically); without, plain autograd stores everything. PLAN must be a\n"
                 "plan of MODEL: its model options and granularity are used.\n"
                 "\n");
    ck_options_model_help(out);
    fprintf(out, "  --plan PLAN           run PLAN's schedule\n"
                 "  -o, --output FILE     write the module to FILE instead of stdout\n"
                 "  -h, --help            show this help\n");
}

/* ---- Python literals ---- */

static const char *py_bool(bool b)
{
    return b ? "True" : "False";
}

static void py_shape(FILE *f, size_t rank, const uint64_t *dim)
{
    fputc('(', f);
    for (size_t i = 0; i < rank; i++)
        fprintf(f, "%llu%s", (unsigned long long)dim[i], rank == 1 || i + 1 < rank ? ", " : "");
    fputc(')', f);
}

static const char *torch_dtype(ck_dtype d)
{
    return d == CK_BF16 ? "bfloat16" : d == CK_F16 ? "float16" : "float32";
}

/* ---- the model as data ---- */

static bool saves_slot(const ck_op_info *info, ck_slot slot)
{
    for (size_t i = 0; i < info->n_saved; i++)
        if (info->saved[i].kind == CK_SAVE_INTERNAL && info->saved[i].slot == slot)
            return true;
    return false;
}

static bool saves_output(const ck_op_info *info)
{
    for (size_t i = 0; i < info->n_saved; i++)
        if (info->saved[i].kind == CK_SAVE_OUTPUT)
            return true;
    return false;
}

/* The attributes every op may read (each reads its own), as a Python dict. */
static void emit_attrs(FILE *f, const ck_model *m, const ck_node *n)
{
    const ck_attrs *a = &n->attrs;
    fprintf(f, "{\"eps\": %.17g, \"p\": %.17g, \"heads\": %llu, \"kv_heads\": %llu, "
               "\"flash\": %s, \"cap\": %.17g, \"theta\": %llu, \"factor\": %.17g, \"to\": \"%s\", "
               "\"rank\": %llu, \"alpha\": %.17g, \"experts\": %llu, \"top_k\": %llu, \"fused\": %s, "
               "\"expand_kv\": %s, \"upcast\": %s, \"grouped\": %s",
            a->eps, a->p, (unsigned long long)a->heads, (unsigned long long)a->kv_heads,
            py_bool(a->flash), a->cap, (unsigned long long)a->theta, a->factor, torch_dtype(a->to),
            (unsigned long long)a->rank, a->alpha, (unsigned long long)a->experts,
            (unsigned long long)a->top_k, py_bool(a->fused), py_bool(a->expand_kv),
            py_bool(a->upcast), py_bool(a->grouped));
    if (n->op->kind == CK_OP_EMBEDDING)
        fprintf(f, ", \"leaf\": %s", py_bool(ck_model_input_leaf(n)));
    if (n->op->kind == CK_OP_ATTENTION) /* what the op table has it keep as sdpa does */
        fprintf(f, ", \"sdpa_mask\": %s, \"v_view\": %s, \"out_heads\": %s, \"keeps_out\": %s",
                py_bool(saves_slot(&n->info, CK_SLOT_SDPA_MASK)),
                py_bool(saves_slot(&n->info, CK_SLOT_QK_APART)),
                py_bool(saves_slot(&n->info, CK_SLOT_OUT_HEADS)), py_bool(saves_output(&n->info)));
    if (n->op->kind == CK_OP_LORA) { /* the widths of y's parts: q, k, v with heads, else one */
        const ck_ttype *y = &m->tensors[n->inputs[1]].type;
        uint64_t out = y->dim[y->rank - 1];
        if (a->heads) {
            uint64_t d = out / (a->heads + 2 * a->kv_heads);
            fprintf(f, ", \"widths\": [%llu, %llu, %llu]", (unsigned long long)(a->heads * d),
                    (unsigned long long)(a->kv_heads * d), (unsigned long long)(a->kv_heads * d));
        } else {
            fprintf(f, ", \"widths\": [%llu]", (unsigned long long)out);
        }
    }
    fputc('}', f);
}

/* One parameter as the module holds it: the node's own (not absent, not tied); the eager
 * loop's moe expert tensors [E, ...] as E parameters of their own ("w1.0" ...), as
 * transformers 4's experts are separate modules. Grouped, as transformers 5 has them: w1
 * and w3 as one "gate_up" [E, 2F, C] (its product is then one tensor, which silu and the
 * product with up keep through their views), w2 whole. */
typedef struct {
    char name[32]; /* the op table's name, an expert's index or "gate_up" */
    size_t rank;
    uint64_t dim[CK_PARAM_MAX_RANK];
    ck_init init;
} module_param;

/* Node n's parameters as the module holds them, into out (NULL: counted only); their count. */
static size_t module_params(const ck_node *n, module_param *out)
{
    bool moe = n->op->kind == CK_OP_MOE, grouped = moe && n->attrs.grouped;
    size_t count = 0;
    for (size_t i = 0; i < n->info.n_param_tensors; i++) {
        const ck_param *p = &n->info.params[i];
        if (p->numel == 0 || (grouped && strcmp(p->name, "w3") == 0))
            continue;
        bool split = moe && !grouped && p->rank == 3, gate_up = grouped && strcmp(p->name, "w1") == 0;
        for (uint64_t e = 0; e < (split ? p->dim[0] : 1); e++, count++) {
            if (!out)
                continue;
            module_param *mp = &out[count];
            uint64_t dim[CK_PARAM_MAX_RANK] = {p->dim[0], p->dim[1] * (gate_up ? 2 : 1), p->dim[2]};
            if (split)
                snprintf(mp->name, sizeof mp->name, "%s.%llu", p->name, (unsigned long long)e);
            else
                snprintf(mp->name, sizeof mp->name, "%s", gate_up ? "gate_up" : p->name);
            mp->rank = split ? p->rank - 1 : p->rank;
            memcpy(mp->dim, split ? dim + 1 : dim, mp->rank * sizeof *dim);
            mp->init = p->init;
        }
    }
    return count;
}

/* The key of node n's parameter `param` in the module's ParameterDict, which allows no '.':
 * "h.0.qkv" and "weight" give "h_0_qkv_weight". Allocated; NULL when out of memory. */
static char *param_key(const ck_node *n, const char *param)
{
    size_t len = strlen(n->name) + 1 + strlen(param);
    char *key = malloc(len + 1);
    if (!key)
        return NULL;
    snprintf(key, len + 1, "%s.%s", n->name, param);
    for (char *c = key; *c; c++)
        if (*c == '.')
            *c = '_';
    return key;
}

typedef struct {
    char *key;
    size_t node;
} keyed_param;

static int by_key(const void *a, const void *b)
{
    return strcmp(((const keyed_param *)a)->key, ((const keyed_param *)b)->key);
}

/* CK_ERR_INPUT naming both nodes when two parameters get one key ("h_0_fc.weight" and
 * "h.0.fc.weight"): the module would hold one tensor for both, silently. */
static int check_param_keys(const ck_workload *w, ck_err *err)
{
    const ck_model *m = w->model;
    size_t n = 0, most = 0;
    for (size_t k = 0; k < m->n_nodes; k++) {
        size_t c = module_params(&m->nodes[k], NULL);
        n += c;
        most = c > most ? c : most;
    }
    keyed_param *keys = calloc(n ? n : 1, sizeof *keys);
    module_param *mp = malloc((most ? most : 1) * sizeof *mp);
    int rc = keys && mp ? CK_OK : ck_err_oom(err);
    size_t made = 0;
    for (size_t k = 0; k < m->n_nodes && rc == CK_OK; k++)
        for (size_t i = 0, c = module_params(&m->nodes[k], mp); i < c && rc == CK_OK; i++) {
            keys[made] = (keyed_param){param_key(&m->nodes[k], mp[i].name), k};
            rc = keys[made++].key ? CK_OK : ck_err_oom(err);
        }
    if (rc == CK_OK)
        qsort(keys, made, sizeof *keys, by_key);
    for (size_t i = 1; i < made && rc == CK_OK; i++)
        if (strcmp(keys[i - 1].key, keys[i].key) == 0)
            rc = ck_err_fail(err, CK_ERR_INPUT, "%s: nodes %s and %s both give the PyTorch "
                             "parameter %s ('.' is '_' in a module's parameter names): rename one",
                             w->path, m->nodes[keys[i - 1].node].name, m->nodes[keys[i].node].name,
                             keys[i].key);
    for (size_t i = 0; i < made; i++)
        free(keys[i].key);
    free(keys);
    free(mp);
    return rc;
}

/* Node n's parameters: (name, key, shape, init) each. */
static int emit_params(FILE *f, const ck_node *n, ck_err *err)
{
    static const char *const inits[] = {[CK_INIT_NORMAL] = "normal", [CK_INIT_ONES] = "ones",
                                        [CK_INIT_ZEROS] = "zeros"};
    size_t count = module_params(n, NULL);
    module_param *mp = malloc((count ? count : 1) * sizeof *mp);
    if (!mp)
        return ck_err_oom(err);
    module_params(n, mp);
    int rc = CK_OK;
    fputc('[', f);
    for (size_t i = 0; i < count && rc == CK_OK; i++) {
        char *key = param_key(n, mp[i].name);
        if (!key) {
            rc = ck_err_oom(err);
            break;
        }
        fputc('(', f);
        ck_pystr_put(f, mp[i].name);
        fputs(", ", f);
        ck_pystr_put(f, key);
        fputs(", ", f);
        py_shape(f, mp[i].rank, mp[i].dim);
        fprintf(f, ", \"%s\"), ", inits[mp[i].init]);
        free(key);
    }
    fputc(']', f);
    free(mp);
    return rc;
}

/* Which stage each node is in (the loss's: L). */
static size_t stage_of(const ck_workload *w, size_t k)
{
    size_t s = 0;
    while (s < w->chain.n_stages && k >= w->stage_first[s + 1])
        s++;
    return s;
}

/* The names of the tensors whose last reader is node k, made in k's stage and not its
 * output: the runtime drops them after k, as Python would drop a local, so that they die
 * when ckplan has them die. */
static void emit_drops(FILE *f, const ck_workload *w, const size_t *last_use, size_t k)
{
    const ck_model *m = w->model;
    size_t s = stage_of(w, k);
    size_t end = s < w->chain.n_stages ? w->stage_first[s + 1] : m->n_nodes;
    fputc('[', f);
    for (size_t j = w->stage_first[s]; j + 1 < end; j++) {
        size_t t = m->nodes[j].output;
        if (last_use[t] == k) {
            ck_pystr_put(f, m->tensors[t].name);
            fputs(", ", f);
        }
    }
    fputc(']', f);
}

/* x_i: the tensor stage i (L: the loss) reads from the stage before. */
static size_t stage_input(const ck_workload *w, size_t i)
{
    return i == 0 ? 0 : w->model->nodes[w->stage_first[i] - 1].output;
}

/* A node reading a tensor from an earlier stage than its own other than that stage's
 * input (x_i) or a model input cannot run stage by stage. */
static int check_stage_reads(const ck_workload *w, ck_err *err)
{
    const ck_model *m = w->model;
    for (size_t k = 0; k < m->n_nodes; k++) {
        size_t s = stage_of(w, k);
        size_t x = stage_input(w, s);
        for (size_t i = 0; i < m->nodes[k].op->arity; i++) {
            size_t t = m->nodes[k].inputs[i], p = m->tensors[t].producer;
            if (t != x && p != CK_NO_NODE && p < w->stage_first[s])
                return ck_err_fail(err, CK_ERR_INPUT, "%s: node %s reads %s from an earlier "
                                   "stage: the stages cannot be emitted one by one",
                                   w->path, m->nodes[k].name, m->tensors[t].name);
        }
    }
    return CK_OK;
}

/* The key of the table node n's tied parameter is: its owner's parameter 0 (ck_param). */
static int emit_tied_key(FILE *f, const ck_model *m, const ck_node *n, ck_err *err)
{
    if (n->tied_to == CK_NO_NODE) {
        fputs("None", f);
        return CK_OK;
    }
    const ck_node *owner = &m->nodes[n->tied_to];
    char *key = param_key(owner, owner->info.params[0].name);
    if (!key)
        return ck_err_oom(err);
    ck_pystr_put(f, key);
    free(key);
    return CK_OK;
}

static int emit_nodes(FILE *f, const ck_workload *w, const size_t *last_use, ck_err *err)
{
    const ck_model *m = w->model;
    int rc = CK_OK;
    fputs("NODES = [\n", f);
    for (size_t k = 0; k < m->n_nodes && rc == CK_OK; k++) {
        const ck_node *n = &m->nodes[k];
        fputs("    {\"name\": ", f);
        ck_pystr_put(f, n->name);
        fprintf(f, ", \"op\": \"%s\", \"inputs\": [", n->op->name);
        for (size_t i = 0; i < n->op->arity; i++) {
            ck_pystr_put(f, m->tensors[n->inputs[i]].name);
            fputs(", ", f);
        }
        fputs("],\n     \"attrs\": ", f);
        emit_attrs(f, m, n);
        fputs(",\n     \"params\": ", f);
        rc = emit_params(f, n, err);
        fprintf(f, ", \"frozen\": %s, \"tied\": ", py_bool(n->frozen));
        rc = rc == CK_OK ? emit_tied_key(f, m, n, err) : rc;
        fputs(", \"drop\": ", f);
        emit_drops(f, w, last_use, k);
        fputs("},\n", f);
    }
    fputs("]\n", f);
    return rc;
}

/* The value limit of integer input t: what the first node reading it says (token ids below
 * the vocabulary, targets below the classes); 0 for float inputs. */
static uint64_t input_limit(const ck_model *m, size_t t)
{
    for (size_t k = 0; k < m->n_nodes; k++)
        for (size_t i = 0; i < m->nodes[k].op->arity; i++)
            if (m->nodes[k].inputs[i] == t && m->nodes[k].info.id_limit[i])
                return m->nodes[k].info.id_limit[i];
    return 0;
}

static void emit_inputs(FILE *f, const ck_model *m)
{
    fputs("INPUT_NAMES = [", f);
    for (size_t t = 0; t < m->n_inputs; t++) {
        ck_pystr_put(f, m->tensors[t].name);
        fputs(", ", f);
    }
    fputs("]\n# name, shape, values below this (integers; 0: floats, normal)\nINPUTS = [", f);
    for (size_t t = 0; t < m->n_inputs; t++) {
        fputc('(', f);
        ck_pystr_put(f, m->tensors[t].name);
        fputs(", ", f);
        py_shape(f, m->tensors[t].type.rank, m->tensors[t].type.dim);
        fprintf(f, ", %llu), ", (unsigned long long)input_limit(m, t));
    }
    fputs("]\n", f);
}

static void emit_stages(FILE *f, const ck_workload *w)
{
    const ck_model *m = w->model;
    size_t L = w->chain.n_stages;
    fputs("STAGES = [", f);
    for (size_t i = 0; i < L; i++) {
        ck_pystr_put(f, w->chain.stages[i].name);
        fputs(", ", f);
    }
    fputs("]\n# nodes of stage i; the last entry is the loss's\nSTAGE_NODES = [", f);
    for (size_t i = 0; i <= L; i++) {
        size_t end = i < L ? w->stage_first[i + 1] : m->n_nodes;
        fprintf(f, "list(range(%zu, %zu)), ", w->stage_first[i], end);
    }
    fputs("]\n# x_i: the tensor stage i reads from the one before\nSTAGE_INPUTS = [", f);
    for (size_t i = 0; i <= L; i++) {
        ck_pystr_put(f, m->tensors[stage_input(w, i)].name);
        fputs(", ", f);
    }
    fputs("]\n# whether x_i requires a gradient (y_i exists)\nSTAGE_INPUT_GRAD = [", f);
    for (size_t i = 0; i <= L; i++)
        fprintf(f, "%s, ", py_bool(m->tensors[stage_input(w, i)].requires_grad));
    fputs("]\n# stages with dropout, which recomputation must redraw identically\n"
          "STAGES_DRAWING = {", f);
    for (size_t i = 0; i < L; i++)
        for (size_t k = w->stage_first[i]; k < w->stage_first[i + 1]; k++)
            if (m->nodes[k].op->draws && m->nodes[k].attrs.p > 0) {
                fprintf(f, "%zu, ", i);
                break;
            }
    fprintf(f, "}\n# the loss frees x_L between its passes: nothing reads it after (planner/lower)\n"
               "LOSS_FREES_INPUT = %s\n", py_bool(ck_lower_loss_frees_input(w->lower)));
}

static void emit_schedule(FILE *f, const ck_plan_file *plan)
{
    if (!plan) {
        fputs("SCHEDULE = None  # no plan: plain autograd, everything stored\n", f);
        return;
    }
    fprintf(f, "# the schedule of PLANNER's plan at a budget of %llu bytes\nSCHEDULE = [\n",
            (unsigned long long)plan->budget_bytes);
    for (size_t i = 0; i < plan->schedule.n; i++) {
        const ck_action *op = &plan->schedule.actions[i];
        if (op->kind == CK_LOSS)
            fputs("    (\"loss\", None),\n", f);
        else
            fprintf(f, "    (\"%s\", %zu),\n", ck_action_name(op->kind), op->stage);
    }
    fputs("]\n", f);
}

/* One action's entries of HELD_BEFORE (keys and bytes, as the program allocates them) or
 * HELD_AFTER (keys): the step tensors of `steps` (bits) the model has, and the checkpoint
 * state of node `ck` (SIZE_MAX: none); nothing when there are none. */
static void emit_held(FILE *f, const ck_model *m, size_t k, unsigned steps, size_t ck, bool bytes)
{
    ck_buf held[CK_N_STEPS + 1];
    size_t n = 0;
    for (unsigned s = 0; s < CK_N_STEPS; s++)
        if (steps >> s & 1 && m->step_bytes[s])
            held[n++] = ck_program_step((ck_step)s);
    if (ck != SIZE_MAX)
        held[n++] = ck_program_checkpoint(ck);
    if (!n)
        return;
    fprintf(f, "    %zu: [", k);
    for (size_t j = 0; j < n; j++) {
        const char *key = held[j].kind == CK_BUF_STEP ? "step" : "ck";
        if (bytes)
            fprintf(f, "%s(\"%s%zu\", %llu)", j ? ", " : "", key, held[j].id,
                    (unsigned long long)ck_program_buf_bytes(m, held[j]));
        else
            fprintf(f, "%s\"%s%zu\"", j ? ", " : "", key, held[j].id);
    }
    fputs("],\n", f);
}

/* What transformers' model forward holds beside the tensors of its layers' ops, which this
 * module's ops do not make, held for their bytes as the executor holds them (planner/lower:
 * ck_lower_contexts). */
static int emit_held_tensors(FILE *f, const ck_workload *w, const ck_plan_file *plan, ck_err *err)
{
    fputs("# Per action of SCHEDULE: the bytes transformers' forward holds beside its layers'\n"
          "# tensors (the masks, position ids and rotary tables it makes once; a checkpointed\n"
          "# layer's RNG state), made before it and freed after it, for their bytes alone\n", f);
    size_t n = plan ? plan->schedule.n : 0;
    ck_lower_context *ctx = n ? malloc(n * sizeof *ctx) : NULL;
    int rc = !n ? CK_OK : ctx ? ck_lower_contexts(w->lower, &plan->schedule, ctx, err) : ck_err_oom(err);
    for (int after = 0; after < 2; after++) {
        fputs(after ? "HELD_AFTER = {\n" : "HELD_BEFORE = {\n", f);
        for (size_t k = 0; k < n && rc == CK_OK; k++) {
            const ck_action *a = &plan->schedule.actions[k];
            size_t ck = a->kind == CK_LOSS ? SIZE_MAX : ck_lower_stage_checkpointer(w->lower, a->stage);
            bool state = after ? ctx[k].frees_checkpoint : ctx[k].checkpoints;
            /* the module's embedding makes the leaf itself (torch_runtime's _embedding) */
            unsigned steps = (after ? ctx[k].frees_steps : ctx[k].makes_steps) & ~(1u << CK_STEP_LEAF);
            emit_held(f, w->model, k, steps, state ? ck : SIZE_MAX, !after);
        }
        fputs("}\n", f);
    }
    free(ctx);
    return rc;
}

static void emit_optimizer(FILE *f, const ck_model *m)
{
    ck_optimizer o = m->training.optimizer;
    fprintf(f, "OPTIMIZER = {\"name\": \"%s\", \"lr\": %.9g, \"weight_decay\": %.9g, "
               "\"momentum\": %.9g}\n",
            ck_training_optimizer_name(o),
            (double)(o == CK_OPT_SGD || o == CK_OPT_MOMENTUM ? CK_EXEC_SGD_LR : CK_EXEC_ADAM_LR),
            (double)CK_EXEC_ADAMW_WEIGHT_DECAY, (double)CK_EXEC_MOMENTUM);
}

/* Where the module comes from, as literals: names and paths from the input are data here. */
static void emit_origin(FILE *f, const ck_workload *w, const ck_plan_file *plan)
{
    fputs("MODEL_NAME = ", f);
    ck_pystr_put(f, w->model->name);
    fputs("\nMODEL_PATH = ", f);
    ck_pystr_put(f, w->path);
    fprintf(f, "\nMODEL_SHA256 = \"%s\"\nPLANNER = ", w->sha256);
    if (plan)
        ck_pystr_put(f, plan->planner);
    else
        fputs("None", f);
    fputs("\n\n", f);
}

static int emit_module(FILE *f, const ck_workload *w, const ck_plan_file *plan, ck_err *err)
{
    const ck_model *m = w->model;
    size_t *last_use = calloc(m->n_tensors, sizeof *last_use);
    if (!last_use)
        return ck_err_oom(err);
    ck_model_last_uses(m, last_use);
    fputs("\"\"\"A model in PyTorch, written by `ckplan emit torch`: MODEL_NAME from MODEL_PATH,\n"
          "running the schedule of the plan of PLANNER (None: no plan).\n\n"
          "build(seed=0) -> (model, inputs); model(*inputs) -> the step's scalar loss;\n"
          "STAGES: the stage names; make_optimizer(model): the model's optimizer.\n\"\"\"\n\n", f);
    emit_origin(f, w, plan);
    emit_inputs(f, m);
    int rc = check_param_keys(w, err);
    rc = rc == CK_OK ? emit_nodes(f, w, last_use, err) : rc;
    emit_stages(f, w);
    emit_schedule(f, plan);
    rc = rc == CK_OK ? emit_held_tensors(f, w, plan, err) : rc;
    emit_optimizer(f, m);
    fputs(ck_emit_torch_runtime, f);
    free(last_use);
    return rc;
}

/* ---- loading ---- */

typedef struct {
    const char *model_path, *plan_path, *output;
    ck_workload_opts opts;
} emit_args;

/* The options and granularity the plan was made with, into a->opts. */
static int plan_options(emit_args *a, const ck_plan_file *plan, ck_err *err)
{
    if (ck_model_opts_any(&a->opts.model))
        return ck_err_fail(err, CK_ERR_INPUT, "emit torch: model options and --plan: the plan's "
                           "model.options are used; give one or the other");
    if (!plan->granularity)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: a plan of a chain file: emit torch needs a "
                           "plan of a model file", a->plan_path);
    if (!ck_workload_granularity_parse(plan->granularity, &a->opts.granularity))
        return ck_err_fail(err, CK_ERR_INPUT, "%s: details.granularity: expected 'op' or "
                           "'block', got '%s'", a->plan_path, plan->granularity);
    a->opts.model = plan->model_opts;
    return CK_OK;
}

static int check_plan_of(const ck_workload *w, const emit_args *a, const ck_plan_file *plan,
                         ck_err *err)
{
    if (strcasecmp(w->sha256, plan->model_sha256) != 0)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: model.sha256: the plan is not of %s (sha256 "
                           "%.12s..., plan says %.12s...)", a->plan_path, w->path, w->sha256,
                           plan->model_sha256);
    if (w->chain.n_stages != plan->stages)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: stages: the plan has %zu stages, %s derives %zu",
                           a->plan_path, plan->stages, w->path, w->chain.n_stages);
    int rc = ck_emit_check_no_variants(plan, a->plan_path, err);
    if (rc != CK_OK)
        return rc;
    return ck_plan_check_stages(plan, &(ck_plan_stage_map){&w->chain, w->model, w->stage_first},
                                err);
}

static int write_module(const ck_workload *w, const ck_plan_file *plan, const char *output,
                        ck_err *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return ck_err_oom(err);
    int rc = emit_module(f, w, plan, err);
    bool failed = ferror(f) != 0;
    if (fclose(f) != 0 || failed)
        rc = rc == CK_OK ? ck_err_oom(err) : rc;
    if (rc == CK_OK)
        rc = ck_interrupt_check(err);
    if (rc == CK_OK && output)
        rc = ck_files_write_atomic(output, text, len, err);
    else if (rc == CK_OK && fwrite(text, 1, len, stdout) != len)
        rc = ck_err_fail(err, CK_ERR_RUNTIME, "emit torch: cannot write to stdout");
    free(text);
    return rc;
}

static int emit_torch_run(emit_args *a, ck_err *err)
{
    ck_plan_file plan = {0};
    ck_workload w = {0};
    bool loaded = false, planned = false;
    int rc = CK_OK;
    if (a->plan_path) {
        planned = (rc = ck_runner_read_plan(a->plan_path, &plan, NULL, err)) == CK_OK;
        if (rc == CK_OK)
            rc = plan_options(a, &plan, err);
    }
    if (rc == CK_OK)
        loaded = (rc = ck_workload_load(a->model_path, &a->opts, &w, err)) == CK_OK;
    if (rc == CK_OK && !w.model)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: a chain file has no model to emit: give a model "
                         "file or a Hugging Face config", a->model_path);
    if (rc == CK_OK && a->plan_path)
        rc = check_plan_of(&w, a, &plan, err);
    if (rc == CK_OK && ck_model_rank_exchange(w.model))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: node %s exchanges activations with other ranks "
                         "(--sp, --cp): the emitted module runs one process; emit with --tp "
                         "alone for one tensor-parallel rank's layers", a->model_path,
                         ck_model_rank_exchange(w.model)->name);
    if (rc == CK_OK && ck_chain_partitioned(&w.chain))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: --partition-activations splits checkpoints over "
                         "the tensor-parallel ranks, which the emitted module (one process) does "
                         "not have: emit a model or plan of --tp alone", a->model_path);
    if (rc == CK_OK)
        rc = check_stage_reads(&w, err);
    if (rc == CK_OK)
        rc = write_module(&w, a->plan_path ? &plan : NULL, a->output, err);
    if (loaded)
        ck_workload_free(&w);
    if (planned)
        ck_plan_file_free(&plan);
    return rc;
}

enum { OPT_PLAN = 2000 }; /* beyond cli/options' codes */

static int plan_option(void *ctx, int code, const char *arg, ck_err *err)
{
    (void)err;
    if (code != OPT_PLAN)
        return CK_ERR_UNKNOWN;
    ((emit_args *)ctx)->plan_path = arg;
    return CK_OK;
}

int ck_emit_torch(int argc, char **argv)
{
    static const struct option longs[] = {
        CK_MODEL_LONG_OPTIONS,
        {"plan", required_argument, NULL, OPT_PLAN},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    emit_args a = {0};
    ck_workload_opts_default(&a.opts);
    ck_err err;
    const ck_options_spec spec = {.cmd = "emit torch", .longs = longs, .model_only = true,
                                  .usage = emit_torch_usage, .own = plan_option, .ctx = &a};
    int rc = ck_options_parse(&spec, argc, argv, &a.opts, &a.output, &err);
    if (rc == CK_HELP_PRINTED)
        return 0;
    if (rc == CK_OK && optind != argc - 1)
        rc = ck_err_fail(&err, CK_ERR_INPUT, "emit torch: expected exactly one MODEL; usage: "
                         "ckplan emit torch MODEL [options] [--plan PLAN] [-o FILE.py] (see --help)");
    a.model_path = rc == CK_OK ? argv[optind] : NULL;
    const ck_named_file in[] = {{a.model_path, "MODEL"}, {a.plan_path, "--plan"}};
    const ck_named_file out[] = {{a.output, "-o"}};
    if (rc == CK_OK)
        rc = CK_CHECK_OUTPUTS_APART("emit torch", in, out, &err);
    if (rc == CK_OK)
        rc = emit_torch_run(&a, &err);
    return ck_main_report(rc, err.msg);
}
