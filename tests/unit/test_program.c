/* The program that chain schedules compile to (planner/program, planner/lower): action by
 * action it has the net effect the chain gives, and it refuses what a wrong compiler or
 * planner would emit. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/lower.h"
#include "planner/planner.h"
#include "planner/workload.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

/* A model as a test loads it: recipe, attention and impl NULL for the file's; lora the
 * rank of --lora (0: none). */
typedef struct {
    const char *path, *recipe, *attention, *impl;
    unsigned lora;
} model_case;

static void load_case(ck_workload *w, model_case mc, ck_granularity g)
{
    ck_err err = {{0}};
    ck_workload_opts wo;
    ck_workload_opts_default(&wo);
    wo.granularity = g;
    wo.model.attention = mc.attention;
    wo.model.impl = mc.impl;
    wo.model.lora_rank = mc.lora;
    const char *path = mc.path, *recipe = mc.recipe;
    wo.model.recipe = recipe;
    wo.model.grads = recipe ? "held" : NULL; /* the chain has no parameter gradients to hold */
    ck_assert_msg(ck_workload_load(path, &wo, w, &err) == CK_OK, "%s", err.msg);
}

static void load_with(ck_workload *w, const char *path, ck_granularity g, const char *recipe)
{
    load_case(w, (model_case){path, recipe, NULL, NULL, 0}, g);
}

static void load(ck_workload *w, const char *path, ck_granularity g)
{
    load_with(w, path, g, NULL);
}

/* Whether no node of m saves tensor t for its backward. */
static bool saved_by_none(const ck_model *m, size_t t)
{
    for (size_t k = 0; k < m->n_nodes; k++)
        for (size_t j = 0; j < m->nodes[k].info.n_saved; j++) {
            const ck_saved *sv = &m->nodes[k].info.saved[j];
            if ((sv->kind == CK_SAVE_INPUT && m->nodes[k].inputs[sv->input] == t) ||
                (sv->kind == CK_SAVE_OUTPUT && m->nodes[k].output == t))
                return false;
        }
    return true;
}

/* dropped[k]: the bytes the program may hold less than the chain after action k because
 * an F_all freed the kept copy of its input, x_i in x̄_i, until B i-1 frees x̄_i: an F_all of
 * stage i (variant "all") that is the stage's only forward in s, reading x̄_i (x_i not live
 * plain), x_i a tensor no node saves; and because B i makes no y_i where x_i requires no
 * gradient (a frozen embedding's output), which the chain holds until B i-1. Worked out
 * here from the schedule by brute force. */
static void find_dropped(const ck_workload *w, const ck_schedule *s, uint64_t *dropped)
{
    const ck_chain *c = &w->chain;
    bool *plain = calloc(c->n_stages + 1, sizeof *plain), *gone = calloc(c->n_stages + 1, sizeof *gone);
    bool *ungrad = calloc(c->n_stages + 1, sizeof *ungrad);
    ck_assert(plain && gone && ungrad);
    plain[0] = true;
    uint64_t held = 0;
    for (size_t k = 0; k < s->n; k++) {
        const ck_action *a = &s->actions[k];
        size_t i = a->stage, forwards = 0;
        for (size_t j = 0; j < s->n; j++)
            forwards += s->actions[j].kind != CK_B && s->actions[j].kind != CK_LOSS && s->actions[j].stage == i;
        size_t in = i > 0 ? w->model->nodes[w->stage_first[i] - 1].output : 0;
        if (a->kind == CK_F_ALL && a->variant == 0 && forwards == 1 && i > 0 && !plain[i] &&
            saved_by_none(w->model, in)) {
            gone[i] = true;
            held += c->stages[i - 1].out_bytes;
        }
        if (a->kind == CK_B && gone[i + 1] && i + 1 < c->n_stages) {
            gone[i + 1] = false;
            held -= c->stages[i].out_bytes;
        }
        if (a->kind == CK_B && ungrad[i + 1]) {
            ungrad[i + 1] = false;
            held -= c->stages[i].out_bytes;
        }
        if (a->kind == CK_B && i > 0 && !w->model->tensors[in].requires_grad) {
            ungrad[i] = true;
            held += c->stages[i - 1].out_bytes;
        }
        if (a->kind == CK_F_CK || a->kind == CK_F_NONE)
            plain[i + 1] = true;
        if (a->kind == CK_F_NONE || a->kind == CK_B)
            plain[i] = false;
        dropped[k] = held;
    }
    free(plain);
    free(gone);
    free(ungrad);
}

/* The step tensors' and checkpoint states' bytes (planner/lower) the program holds while
 * each action of s runs (during) and after it (after), worked out again by another route:
 * a buffer is live over a range of actions. The step tensors from the first forward of a
 * stage that reads one (a layer); the masks and position ids to the last B of a
 * checkpointed layer (first forward not F_all, a B after it), else to the last layer's
 * first forward; the tables to the last B of a layer that reads them or is checkpointed;
 * a checkpointed layer's state from its first forward to its B; the leaf from the first
 * F_all or B of the stage that makes it to the schedule's end. */
static size_t with_states; /* schedules find_steps found a checkpoint state live in */
static size_t with_leaf;   /* and the leaf */

static void find_steps(const ck_workload *w, const ck_schedule *s, uint64_t *during, uint64_t *after)
{
    bool states = false;
    const ck_model *m = w->model;
    size_t n = s->n, made = SIZE_MAX, args_end = 0, tables_end = 0, forward_end = 0;
    size_t leaf_made = SIZE_MAX;
    for (size_t k = 0; k < n; k++)
        during[k] = after[k] = 0;
    for (size_t i = 0; i < w->chain.n_stages; i++) {
        uint64_t state = 0;
        bool tables = false, layer = false, leaf = false;
        for (size_t j = w->stage_first[i]; j < w->stage_first[i + 1]; j++) {
            const ck_op_info *info = &m->nodes[j].info;
            for (int t = 0; t < CK_N_STEPS; t++)
                layer = layer || (t != CK_STEP_LEAF && info->step_bytes[t]);
            leaf = leaf || info->step_bytes[CK_STEP_LEAF];
            tables = tables || info->step_bytes[CK_STEP_TABLES];
            state = state ? state : info->checkpoint_bytes;
        }
        size_t first = SIZE_MAX, b = SIZE_MAX, saving = SIZE_MAX;
        for (size_t k = n; k-- > 0;) {
            if (s->actions[k].stage != i || s->actions[k].kind == CK_LOSS)
                continue;
            if (s->actions[k].kind == CK_B)
                b = k;
            else
                first = k;
            if (s->actions[k].kind == CK_B || s->actions[k].kind == CK_F_ALL)
                saving = k;
        }
        if (leaf && leaf_made == SIZE_MAX)
            leaf_made = saving;
        if (!layer || first == SIZE_MAX)
            continue;
        made = made < first ? made : first;
        forward_end = forward_end > first ? forward_end : first;
        bool checkpointed = s->actions[first].kind != CK_F_ALL && b != SIZE_MAX;
        if (checkpointed)
            args_end = args_end > b ? args_end : b;
        if ((checkpointed || tables) && b != SIZE_MAX)
            tables_end = tables_end > b ? tables_end : b;
        for (size_t k = first; checkpointed && k <= b; k++) {
            during[k] += state;
            after[k] += k < b ? state : 0;
        }
        states = states || (checkpointed && state);
    }
    with_states += states;
    if (made == SIZE_MAX)
        return;
    bool leaf = leaf_made != SIZE_MAX && m->step_bytes[CK_STEP_LEAF];
    with_leaf += leaf;
    for (size_t k = leaf ? leaf_made : n; k < n; k++) {
        during[k] += m->step_bytes[CK_STEP_LEAF];
        after[k] += k + 1 < n ? m->step_bytes[CK_STEP_LEAF] : 0;
    }
    args_end = args_end ? args_end : forward_end;
    tables_end = tables_end ? tables_end : forward_end;
    for (size_t k = made; k < n; k++)
        for (int t = 0; t < CK_N_STEPS; t++) {
            if (t == CK_STEP_LEAF)
                continue;
            size_t end = t == CK_STEP_TABLES ? tables_end : args_end;
            during[k] += k <= end ? m->step_bytes[t] : 0;
            after[k] += k < end ? m->step_bytes[t] : 0;
        }
}

/* Schedule s replayed both ways: what stays live agrees after every action, less what an
 * F_all dropped early (find_dropped) and but for the step tensors and checkpoint states,
 * which the chain does not have (find_steps); each peak of the program is the chain's, or below it
 * for F_all and B only (a saving forward's two transients share one fwd_tmp; y_i is made
 * by the first backward writing it, the chain counts it from the start) or where inputs
 * were dropped, and for the loss, which frees x_L between its passes when nothing reads it
 * after (planner/lower): from then on the program may hold x_L less. */
static bool agrees_with_chain(const ck_workload *w, const ck_schedule *s, const char *what)
{
    ck_err err = {{0}};
    size_t n = s->n;
    uint64_t *live = calloc(n, sizeof *live), *peak = calloc(n, sizeof *peak);
    uint64_t *chain_live = calloc(n, sizeof *chain_live), *chain_peak = calloc(n, sizeof *chain_peak);
    ck_assert(live && peak && chain_live && chain_peak);
    ck_replay exact, chain;
    ck_assert_msg(ck_lower_replay(w->lower, &w->chain, s, &exact, live, peak, &err) == CK_OK, "%s: %s",
                  what, err.msg);
    ck_assert_int_eq(ck_schedule_replay(&w->chain, s, &chain, chain_live, chain_peak, &err), CK_OK);
    uint64_t *dropped = calloc(n, sizeof *dropped);
    uint64_t *steps = calloc(n, sizeof *steps), *steps_after = calloc(n, sizeof *steps_after);
    ck_assert(dropped && steps && steps_after);
    find_dropped(w, s, dropped);
    find_steps(w, s, steps, steps_after);
    for (size_t k = 0; k < n; k++) {
        ck_assert_uint_ge(live[k], steps_after[k]);
        ck_assert_uint_ge(peak[k], steps[k]);
        live[k] -= steps_after[k];
        peak[k] -= steps[k];
    }
    uint64_t most_steps = 0;
    for (size_t k = 0; k < n; k++)
        most_steps = steps[k] > most_steps ? steps[k] : most_steps;
    uint64_t x_L = ck_chain_x_bytes(&w->chain, w->chain.n_stages), freed = 0;
    for (size_t k = 0; k < n; k++) {
        const ck_action *a = &s->actions[k];
        if (a->kind == CK_LOSS && chain_live[k] == live[k] + dropped[k] + x_L)
            freed = x_L;
        ck_assert_msg(live[k] + dropped[k] == chain_live[k] || live[k] + dropped[k] + freed == chain_live[k],
                      "%s: %zu (%s %zu): live %llu, the chain's %llu, dropped %llu", what, k,
                      ck_action_name(a->kind), a->stage, (unsigned long long)live[k],
                      (unsigned long long)chain_live[k], (unsigned long long)dropped[k]);
        ck_assert_msg(peak[k] == chain_peak[k] ||
                          ((a->kind == CK_F_ALL || a->kind == CK_B || a->kind == CK_LOSS ||
                            dropped[k] || (k && dropped[k - 1])) && peak[k] < chain_peak[k]),
                      "%s: %zu (%s %zu): peak %llu, the chain's %llu", what, k, ck_action_name(a->kind),
                      a->stage, (unsigned long long)peak[k], (unsigned long long)chain_peak[k]);
    }
    ck_assert_uint_le(exact.peak_bytes, chain.peak_bytes + most_steps);
    bool any = false;
    for (size_t k = 0; k < n; k++)
        any = any || dropped[k];
    free(dropped);
    free(steps);
    free(steps_after);
    free(live);
    free(peak);
    free(chain_live);
    free(chain_peak);
    return any;
}

/* Every planner's schedules at ten budgets from dp's smallest to the baseline's peak, on
 * every shipped model at both granularities: recomputation of every shape, with x_i held
 * plain or in x̄_i, reaches every rule of the compiler. The Hugging Face Llama in bf16,
 * whose layer inputs hf's RMSNorm does not keep (its f32 copy it does), has F_all drop
 * them (its gradients held, as the chain counts them). */
START_TEST(lowered_schedules_agree_with_the_chain)
{
    const model_case models[] = {{"models/gpt2-tiny.json", NULL, NULL, NULL, 0},
                                 {"models/llama-tiny.json", NULL, NULL, NULL, 0},
                                 {"models/mlp-deep.json", NULL, NULL, NULL, 0},
                                 {"models/hf/llama-tiny.json", "bf16", NULL, NULL, 0},
                                 {"models/hf/gemma2-tiny.json", "bf16", "eager", "hf-cpu", 0},
                                 {"models/hf/gpt2-tiny.json", "bf16", "eager", NULL, 0},
                                 {"models/hf/opt-tiny.json", "bf16", "eager", "hf-cpu", 8},
                                 {"models/hf/gpt2-tiny.json", "fp32", "sdpa", "hf-cpu", 8},
                                 {"models/hf/llama-tiny.json", "bf16", NULL, "fused", 8}};
    ck_planner_opts opts = {.slots = CK_DEFAULT_SLOTS};
    size_t checked = 0, dropping = 0;
    for (size_t f = 0; f < sizeof models / sizeof models[0]; f++)
        for (int g = CK_GRAN_OP; g <= CK_GRAN_BLOCK; g++) {
            ck_workload w;
            ck_err err = {{0}};
            load_case(&w, models[f], (ck_granularity)g);
            ck_schedule base = {0};
            ck_replay top;
            ck_assert_int_eq(ck_schedule_baseline(&w.chain, &base, &err), CK_OK);
            dropping += agrees_with_chain(&w, &base, "baseline");
            ck_assert_int_eq(ck_schedule_replay(&w.chain, &base, &top, NULL, NULL, &err), CK_OK);
            ck_plan_result r;
            ck_replay replay;
            uint64_t min = 0;
            ck_assert_int_eq(ck_planner_run(&w.chain, &ck_planner_dp, 0, &opts, &r, &replay, &min, &err),
                             CK_ERR_INFEASIBLE);
            for (uint64_t step = 0; step < 10; step++)
                for (const ck_planner *const *p = ck_planners; *p; p++) {
                    uint64_t budget = min + (top.peak_bytes - min) * step / 9, least;
                    if (ck_planner_run(&w.chain, *p, budget, &opts, &r, &replay, &least, &err) != CK_OK)
                        continue;
                    dropping += agrees_with_chain(&w, &r.schedule, (*p)->name);
                    ck_planner_result_free(&r);
                    checked++;
                }
            ck_schedule_free(&base);
            ck_workload_free(&w);
        }
    fprintf(stderr, "program: %zu schedules agree with their chains, %zu dropping inputs\n", checked,
            dropping);
    ck_assert_uint_gt(checked, 100);
    ck_assert_uint_gt(dropping, 10);
    ck_assert_uint_gt(with_states, 10);
    ck_assert_uint_gt(with_leaf, 10);
}
END_TEST

static int run_one(ck_program_state *st, ck_instr in, ck_err *err)
{
    return ck_program_run(st, 0, &in, NULL, NULL, NULL, err);
}

/* What the executor relies on: an instruction that reads what is not live, or allocates
 * what is, is refused with its name, and the state is left as it was. */
START_TEST(invalid_instructions_are_refused)
{
    ck_workload w;
    ck_err err = {{0}};
    load(&w, "models/mlp-deep.json", CK_GRAN_OP);
    const ck_model *m = w.model;
    ck_program_state st;
    ck_assert_int_eq(ck_program_state_init(&st, m, &err), CK_OK);
    uint64_t held = st.held;
    ck_assert_uint_eq(held, m->tensors[0].bytes); /* a float x_0 is an activation */
    size_t out0 = m->nodes[0].output, out1 = m->nodes[1].output;
    ck_buf plain0 = {CK_BUF_VALUE, out0, CK_COPY_PLAIN};
    ck_assert_int_eq(run_one(&st, (ck_instr){.kind = CK_INSTR_FREE, .node = 0, .buf = plain0}, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "program[0] (free): frees tensor"), "%s", err.msg);
    ck_buf plain1 = {CK_BUF_VALUE, out1, CK_COPY_PLAIN};
    ck_assert_int_eq(run_one(&st, (ck_instr){.kind = CK_INSTR_FORWARD, .node = 1, .buf = plain1}, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "reads tensor"), "%s", err.msg);
    ck_assert_int_eq(run_one(&st, (ck_instr){.kind = CK_INSTR_FORWARD, .node = 1, .buf = plain0}, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "malformed forward"), "%s", err.msg);
    ck_assert_int_eq(run_one(&st, (ck_instr){.kind = CK_INSTR_BACKWARD, .node = 0, .buf = plain0}, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "reads gradient of"), "%s", err.msg);
    ck_assert_uint_eq(st.held, held);
    ck_assert_int_eq(run_one(&st, (ck_instr){.kind = CK_INSTR_FORWARD, .node = 0, .buf = plain0}, &err), CK_OK);
    ck_assert_uint_eq(st.held, held + m->tensors[out0].bytes);
    ck_assert_int_eq(run_one(&st, (ck_instr){.kind = CK_INSTR_FORWARD, .node = 0, .buf = plain0}, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "computes tensor"), "%s", err.msg);
    ck_buf grad0 = {CK_BUF_GRAD, out0, CK_COPY_PLAIN};
    ck_assert_int_eq(run_one(&st, (ck_instr){.kind = CK_INSTR_GRAD, .node = 0, .buf = grad0}, &err), CK_OK);
    ck_assert_int_eq(run_one(&st, (ck_instr){.kind = CK_INSTR_GRAD, .node = 0, .buf = grad0}, &err), CK_ERR_INPUT);
    ck_assert_msg(strstr(err.msg, "allocates gradient of"), "%s", err.msg);
    ck_program_state_free(&st);
    ck_workload_free(&w);
}
END_TEST

/* A state reset is the start of a step again, whatever ran before, also when its stamps
 * wrap around (ck_program_state_reset). */
START_TEST(reset_returns_to_the_start_of_a_step)
{
    ck_workload w;
    ck_err err = {{0}};
    ck_workload_opts wo;
    ck_workload_opts_default(&wo);
    wo.granularity = CK_GRAN_OP;
    wo.model.grads = "autograd"; /* the program makes parameter gradients */
    ck_assert_msg(ck_workload_load("models/mlp-deep.json", &wo, &w, &err) == CK_OK, "%s", err.msg);
    const ck_model *m = w.model;
    size_t out0 = m->nodes[0].output;
    ck_buf x0 = {CK_BUF_VALUE, 0, CK_COPY_PLAIN}, plain0 = {CK_BUF_VALUE, out0, CK_COPY_PLAIN};
    ck_buf grad0 = {CK_BUF_GRAD, out0, CK_COPY_PLAIN};
    ck_buf unused = {CK_BUF_VALUE, m->nodes[1].output, CK_COPY_KEPT};
    ck_program_state st;
    ck_assert_int_eq(ck_program_state_init(&st, m, &err), CK_OK);
    for (int round = 0; round < 2; round++) {
        if (round == 1) { /* the loop's first reset takes the last stamp, its second wraps */
            st.gen = UINT32_MAX - 2;
            ck_program_state_reset(&st);
        }
        for (int again = 0; again < 2; again++) {
            ck_program_state_hold_params(&st);
            ck_assert_msg(run_one(&st, (ck_instr){.kind = CK_INSTR_FORWARD, .node = 0, .buf = plain0}, &err) == CK_OK &&
                              run_one(&st, (ck_instr){.kind = CK_INSTR_GRAD, .node = 0, .buf = grad0}, &err) == CK_OK,
                          "round %d, step %d: %s", round, again, err.msg);
            ck_assert(ck_program_state_has(&st, plain0) && ck_program_state_has(&st, grad0));
            ck_assert_uint_gt(ck_program_state_params_bytes(&st), 0);
            ck_program_state_reset(&st);
            ck_assert_msg(!ck_program_state_has(&st, plain0) && !ck_program_state_has(&st, grad0),
                          "round %d, reset %d: a buffer of the last step is still live", round, again);
            ck_assert_msg(!ck_program_state_has(&st, unused),
                          "round %d, reset %d: a buffer no step made is live", round, again);
            ck_assert(ck_program_state_has(&st, x0));
            ck_assert_uint_eq(st.held, m->tensors[0].bytes);
            ck_assert_uint_eq(ck_program_state_params_bytes(&st), 0);
        }
    }
    ck_program_state_free(&st);
    ck_workload_free(&w);
}
END_TEST

static int last_workspace(void *ctx, const ck_instr *in, const ck_event *ev, ck_err *err)
{
    (void)in, (void)err;
    if (ev->kind == CK_EVENT_WORKSPACE)
        *(uint64_t *)ctx = ev->bytes;
    return CK_OK;
}

/* The workspace of each reader's backward of a tensor p read by the ops of `readers`
 * (linear or scale, in forward order), run last reader first, as autograd does: as
 * PyTorch 2.13 holds it, measured with the allocation tracker (x [2, 64, 256] read by
 * frozen nn.Linears and by x * 2, peak until x's gradient is whole, in x-sizes): the first
 * gradient is the buffer; a later one is made beside it (1); added out of place beside both
 * (2) when the buffer holds a linear's, which is a view; a sum is a tensor of its own. */
static void check_reader_sums(const char *readers[], size_t n, const uint64_t want[])
{
    char nodes[1024] = "";
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(nodes);
        bool linear = strcmp(readers[i], "linear") == 0;
        snprintf(nodes + used, sizeof nodes - used, "{'name': 'r%zu', 'op': '%s', %s 'inputs': ['p']}, ",
                 i, readers[i], linear ? "'out': 'C', 'frozen': true," : "'factor': 2,");
    }
    for (size_t i = 1; i < n; i++) { /* s_i = s_{i-1} + r_i, s_0 = r_0 */
        size_t used = strlen(nodes);
        snprintf(nodes + used, sizeof nodes - used, "{'name': 's%zu', 'op': 'add', 'inputs': ['%c%zu', 'r%zu']}, ",
                 i, i == 1 ? 'r' : 's', i - 1, i);
    }
    ck_model *m = fx_load(FX_BASE "'nodes': [{'name': 'p', 'op': 'linear', 'out': 'C', 'inputs': ['x']}, "
                          "%s{'name': 'loss', 'op': 'mse', 'inputs': ['s%zu', 'y']}]}", nodes, n - 1);
    ck_err err = {{0}};
    ck_program_state st;
    ck_assert_int_eq(ck_program_state_init(&st, m, &err), CK_OK);
    for (size_t k = 0; k <= n; k++) /* p, then the readers */
        ck_assert_msg(run_one(&st, (ck_instr){.kind = CK_INSTR_FORWARD, .node = k,
                                              .buf = ck_program_value(m->nodes[k].output, CK_COPY_PLAIN)}, &err) == CK_OK,
                      "%s", err.msg);
    uint64_t g = m->tensors[m->nodes[0].output].bytes;
    for (size_t i = n; i >= 1; i--) {
        ck_instr grad = {.kind = CK_INSTR_GRAD, .buf = ck_program_grad(m->nodes[i].output)};
        ck_instr back = {.kind = CK_INSTR_BACKWARD, .node = i};
        uint64_t ws = UINT64_MAX;
        ck_assert_int_eq(run_one(&st, grad, &err), CK_OK);
        ck_assert_msg(ck_program_run(&st, 0, &back, last_workspace, &ws, NULL, &err) == CK_OK, "%s", err.msg);
        ck_assert_msg(ws == want[i - 1] * g, "%s reader %zu of %zu: workspace %llu, want %llu x %llu",
                      readers[i - 1], i, n, (unsigned long long)ws, (unsigned long long)want[i - 1],
                      (unsigned long long)g);
    }
    ck_program_state_free(&st);
    ck_model_free(m);
}

START_TEST(later_gradients_are_added_as_autograd_adds_them)
{
    check_reader_sums((const char *[]){"linear", "linear"}, 2, (const uint64_t[]){2, 0});
    check_reader_sums((const char *[]){"linear", "linear", "linear"}, 3, (const uint64_t[]){1, 2, 0});
    check_reader_sums((const char *[]){"linear", "scale"}, 2, (const uint64_t[]){1, 0});
    check_reader_sums((const char *[]){"scale", "linear"}, 2, (const uint64_t[]){2, 0});
    check_reader_sums((const char *[]){"scale", "scale", "linear"}, 3, (const uint64_t[]){1, 2, 0});
}
END_TEST

/* Bytes of the gradient allocations an instruction makes (ALLOC events of gradients). */
static int gradient_allocs(void *ctx, const ck_instr *in, const ck_event *ev, ck_err *err)
{
    (void)in, (void)err;
    if (ev->kind == CK_EVENT_ALLOC && ev->hold == CK_HOLD_GRADIENT)
        *(uint64_t *)ctx += ev->bytes;
    return CK_OK;
}

/* PEFT's lora.Linear returns `result + lora_B(lora_A(x)) * scaling`: autograd hands the
 * output's gradient to the base layer's output as it is, one tensor, so a lora's backward
 * makes no gradient for its base output (y), only for x; the compiler passes it wherever y
 * requires a gradient that only the lora reads, and the program refuses a pass otherwise. */
START_TEST(a_lora_hands_its_gradient_to_its_base_output)
{
    ck_model *m = fx_load(FX_BASE "'nodes': [{'name': 'p', 'op': 'linear', 'out': 'C', 'inputs': ['x']}, "
                          "{'name': 'b', 'op': 'linear', 'out': 'C', 'frozen': true, 'inputs': ['p']}, "
                          "{'name': 'a', 'op': 'lora', 'rank': 2, 'inputs': ['p', 'b']}, "
                          "{'name': 'loss', 'op': 'mse', 'inputs': ['a', 'y']}]}");
    ck_err err = {{0}};
    ck_program_state st;
    ck_assert_int_eq(ck_program_state_init(&st, m, &err), CK_OK);
    for (size_t k = 0; k < 3; k++)
        ck_assert_msg(run_one(&st, (ck_instr){.kind = CK_INSTR_FORWARD, .node = k, .keep = true,
                                              .buf = ck_program_value(m->nodes[k].output, CK_COPY_PLAIN)}, &err) == CK_OK,
                      "%s", err.msg);
    size_t p = m->nodes[0].output, b = m->nodes[1].output, a = m->nodes[2].output;
    ck_assert_int_eq(run_one(&st, (ck_instr){.kind = CK_INSTR_GRAD, .buf = ck_program_grad(a)}, &err), CK_OK);
    uint64_t made = 0, held = st.held;
    ck_instr back = {.kind = CK_INSTR_BACKWARD, .node = 2, .pass = true};
    ck_assert_msg(ck_program_run(&st, 0, &back, gradient_allocs, &made, NULL, &err) == CK_OK, "%s", err.msg);
    ck_assert(ck_program_state_has(&st, ck_program_grad(b)));
    ck_assert(!ck_program_state_has(&st, ck_program_grad(a)));
    ck_assert(ck_program_state_has(&st, ck_program_grad(p)));
    ck_assert_uint_eq(made, m->tensors[p].bytes + ck_program_buf_bytes(m, ck_program_params(2)));
    ck_assert_uint_eq(st.held, held + made);
    /* without the pass, b's gradient is made beside a's */
    ck_program_state_reset(&st);
    for (size_t k = 0; k < 3; k++)
        ck_assert_int_eq(run_one(&st, (ck_instr){.kind = CK_INSTR_FORWARD, .node = k, .keep = true,
                                                 .buf = ck_program_value(m->nodes[k].output, CK_COPY_PLAIN)}, &err), CK_OK);
    ck_assert_int_eq(run_one(&st, (ck_instr){.kind = CK_INSTR_GRAD, .buf = ck_program_grad(a)}, &err), CK_OK);
    made = 0;
    back.pass = false;
    ck_assert_int_eq(ck_program_run(&st, 0, &back, gradient_allocs, &made, NULL, &err), CK_OK);
    ck_assert_uint_eq(made, m->tensors[p].bytes + m->tensors[b].bytes + ck_program_buf_bytes(m, ck_program_params(2)));
    ck_program_state_free(&st);
    ck_model_free(m);

    /* The compiler passes it; with the embedding frozen as well, b needs no gradient and
     * nothing passes, and a pass asked for anyway is refused. */
    for (int frozen_input = 0; frozen_input < 2; frozen_input++) {
        m = fx_load("{'format': 'ckplan-model/1', 'name': 't', 'dims': {'B': 2, 'T': 4, 'C': 8, 'V': 16},"
                    " 'inputs': [{'name': 'ids', 'shape': ['B', 'T'], 'dtype': 'int32'},"
                    " {'name': 'y', 'shape': ['B', 'T'], 'dtype': 'int32'}],"
                    " 'nodes': [{'name': 'p', 'op': 'embedding', 'vocab': 'V', 'dim': 'C', %s 'inputs': ['ids']}, "
                    "{'name': 'b', 'op': 'linear', 'out': 'C', 'frozen': true, 'inputs': ['p']}, "
                    "{'name': 'a', 'op': 'lora', 'rank': 2, 'inputs': ['p', 'b']}, "
                    "{'name': 'h', 'op': 'linear', 'out': 'V', 'frozen': true, 'inputs': ['a']}, "
                    "{'name': 'loss', 'op': 'cross_entropy', 'inputs': ['h', 'y']}]}",
                    frozen_input ? "'frozen': true," : "");
        size_t first[] = {0, 4};
        ck_lower *l;
        ck_assert_int_eq(ck_lower_create(m, first, 1, &l, &err), CK_OK);
        ck_program prog = {0};
        ck_action_effect e = {0};
        ck_assert_int_eq(ck_lower_action(l, &(ck_action){CK_B, 0, 0}, &e, NULL, &prog, &err), CK_OK);
        bool passed = false;
        for (size_t j = 0; j < prog.n; j++)
            passed = passed || (prog.instrs[j].kind == CK_INSTR_BACKWARD && prog.instrs[j].node == 2 &&
                                prog.instrs[j].pass);
        ck_assert_int_eq(passed, !frozen_input);
        ck_program_free(&prog);
        ck_lower_free(l);
        if (frozen_input) {
            ck_assert_int_eq(ck_program_state_init(&st, m, &err), CK_OK);
            for (size_t k = 0; k < 3; k++)
                ck_assert_int_eq(run_one(&st, (ck_instr){.kind = CK_INSTR_FORWARD, .node = k, .keep = true,
                                                         .buf = ck_program_value(m->nodes[k].output, CK_COPY_PLAIN)}, &err), CK_OK);
            ck_assert_int_eq(run_one(&st, (ck_instr){.kind = CK_INSTR_GRAD, .buf = ck_program_grad(m->nodes[2].output)}, &err), CK_OK);
            back.pass = true;
            ck_assert_int_eq(ck_program_run(&st, 0, &back, NULL, NULL, NULL, &err), CK_ERR_INPUT);
            ck_assert_ptr_nonnull(strstr(err.msg, "a lora whose base output requires one"));
            ck_program_state_free(&st);
        }
        ck_model_free(m);
    }
}
END_TEST

static Suite *program_suite(void)
{
    Suite *s = suite_create("program");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, lowered_schedules_agree_with_the_chain);
    tcase_add_test(tc, invalid_instructions_are_refused);
    tcase_add_test(tc, reset_returns_to_the_start_of_a_step);
    tcase_add_test(tc, later_gradients_are_added_as_autograd_adds_them);
    tcase_add_test(tc, a_lora_hands_its_gradient_to_its_base_output);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(program_suite)
