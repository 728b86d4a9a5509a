/* PyTorch 2's gradient lifetimes (training.grads autograd, grad_accum, optimizer_step):
 * the replay against oracles computed here from the model and the schedule alone, and the
 * executor against the replay and against held gradients. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/lower.h"
#include "planner/planner.h"
#include "planner/workload.h"
#include "sim/exec.h"
#include "tests/unit/check_main.h"

/* Models of every kind the lifetimes differ on: tied embeddings (gpt2, gemma), a frozen
 * base with adapters (lora), biases, a float x_0 (mlp-deep). */
static const struct {
    const char *path;
    uint64_t lora;
} models[] = {{"models/mlp-deep.json", 0},     {"models/gpt2-tiny.json", 0},
              {"models/hf/llama-tiny.json", 0}, {"models/hf/gpt2-tiny.json", 0},
              {"models/hf/gemma-tiny.json", 0}, {"models/hf/llama-tiny.json", 8}};
#define N_MODELS (sizeof models / sizeof models[0])

static void load(ck_workload *w, size_t i, ck_granularity g, const char *grads, uint64_t accum,
                 const char *step)
{
    ck_err err = {{0}};
    ck_workload_opts wo;
    ck_workload_opts_default(&wo);
    wo.granularity = g;
    wo.model.grads = grads;
    wo.model.grad_accum = accum;
    wo.model.optimizer_step = step;
    wo.model.lora_rank = models[i].lora;
    if (strstr(models[i].path, "/hf/"))
        wo.model.recipe = "fp32";
    ck_assert_msg(ck_workload_load(models[i].path, &wo, w, &err) == CK_OK, "%s", err.msg);
}

/* Bytes of node n's own parameters' gradients. */
static uint64_t own_grad_bytes(const ck_model *m, size_t n)
{
    return m->nodes[n].trainable ? m->nodes[n].info.n_params * ck_dtype_bytes(m->training.grad_dtype) : 0;
}

/* The oracle of autograd's gradients after each action of s: a node's gradients exist once
 * a stage's B has run the backward of the node or of a node tied to it (the head whose
 * weight is the embedding's). made[k] receives their bytes after action k. */
static void gradients_made(const ck_workload *w, const ck_schedule *s, uint64_t *made)
{
    const ck_model *m = w->model;
    bool *has = calloc(m->n_nodes, sizeof *has);
    ck_assert_ptr_nonnull(has);
    uint64_t sum = 0;
    for (size_t k = 0; k < s->n; k++) {
        const ck_action *a = &s->actions[k];
        for (size_t n = a->kind == CK_B ? w->stage_first[a->stage] : 0;
             a->kind == CK_B && n < w->stage_first[a->stage + 1]; n++) {
            size_t owners[2] = {n, m->nodes[n].trainable ? m->nodes[n].tied_to : CK_NO_NODE};
            for (size_t j = 0; j < 2; j++)
                if (owners[j] != CK_NO_NODE && !has[owners[j]] && m->nodes[n].backward) {
                    has[owners[j]] = true;
                    sum += own_grad_bytes(m, owners[j]);
                }
        }
        made[k] = sum;
    }
    free(has);
}

typedef struct {
    uint64_t *live, *peak;
    ck_replay r;
} replayed;

static replayed replay_of(const ck_workload *w, const ck_schedule *s)
{
    replayed out = {calloc(s->n, sizeof(uint64_t)), calloc(s->n, sizeof(uint64_t)), {0}};
    ck_err err = {{0}};
    ck_assert(out.live && out.peak);
    ck_assert_msg(ck_workload_replay(w, s, &out.r, out.live, out.peak, &err) == CK_OK, "%s", err.msg);
    return out;
}

static void replayed_free(replayed *r)
{
    free(r->live);
    free(r->peak);
}

/* Schedules of every shape: the baseline, every layer, and dp and revolve at budgets from
 * their smallest to the baseline's. */
static size_t schedules(const ck_workload *w, ck_schedule *out, size_t cap)
{
    ck_err err = {{0}};
    size_t n = 0;
    out[n] = (ck_schedule){0};
    ck_assert_int_eq(ck_schedule_baseline(&w->chain, &out[n++], &err), CK_OK);
    ck_replay top;
    ck_assert_int_eq(ck_schedule_replay(&w->chain, &out[0], &top, NULL, NULL, &err), CK_OK);
    const ck_planner *planners[] = {&ck_planner_dp, &ck_planner_revolve, &ck_planner_chen};
    ck_planner_opts opts = {.slots = CK_DEFAULT_SLOTS};
    for (size_t p = 0; p < 3; p++) {
        ck_plan_result r;
        ck_replay replay;
        uint64_t min = 0;
        if (ck_planner_run(&w->chain, planners[p], 0, &opts, &r, &replay, &min, &err) != CK_ERR_INFEASIBLE)
            continue;
        for (uint64_t step = 0; step < 4 && n < cap; step++) {
            uint64_t least;
            if (ck_planner_run(&w->chain, planners[p], min + (top.peak_bytes - min) * step / 4, &opts, &r,
                               &replay, &least, &err) != CK_OK)
                continue;
            out[n++] = r.schedule;
        }
    }
    return n;
}

/* Under autograd every action holds what it holds with held gradients (which the static
 * memory counts instead) plus the gradients made by then; the static memory is less by
 * all of them; the optimizer step after the last action holds all of them. */
START_TEST(autograd_makes_each_gradient_at_its_first_backward)
{
    size_t checked = 0;
    for (size_t i = 0; i < N_MODELS; i++)
        for (int g = CK_GRAN_OP; g <= CK_GRAN_BLOCK; g++) {
            ck_workload held, made;
            load(&held, i, (ck_granularity)g, "held", 0, NULL);
            load(&made, i, (ck_granularity)g, "autograd", 0, NULL);
            ck_assert_uint_eq(made.statics.made_grads, held.statics.grads);
            ck_assert_uint_eq(made.statics.grads, 0);
            ck_assert_uint_eq(made.statics.total + held.statics.grads, held.statics.total);
            ck_assert_uint_gt(held.statics.grads, 0);
            ck_schedule s[16];
            size_t n = schedules(&held, s, 16);
            for (size_t j = 0; j < n; j++) {
                replayed h = replay_of(&held, &s[j]), a = replay_of(&made, &s[j]);
                uint64_t *want = calloc(s[j].n, sizeof *want);
                ck_assert_ptr_nonnull(want);
                gradients_made(&made, &s[j], want);
                for (size_t k = 0; k < s[j].n; k++)
                    ck_assert_msg(a.live[k] == h.live[k] + want[k], "%s schedule %zu action %zu: live %llu, "
                                  "held %llu + made %llu", models[i].path, j, k, (unsigned long long)a.live[k],
                                  (unsigned long long)h.live[k], (unsigned long long)want[k]);
                ck_assert_uint_eq(want[s[j].n - 1], held.statics.grads);
                ck_assert_uint_ge(a.peak[s[j].n - 1], held.statics.grads);
                ck_assert_uint_le(a.r.peak_bytes, h.r.peak_bytes + held.statics.grads + 2 * held.statics.params);
                free(want);
                replayed_free(&h);
                replayed_free(&a);
                ck_schedule_free(&s[j]);
                checked++;
            }
            ck_workload_free(&held);
            ck_workload_free(&made);
        }
    fprintf(stderr, "grads: %zu schedules hold autograd's gradients as made\n", checked);
    ck_assert_uint_gt(checked, 60);
}
END_TEST

/* A node's backward holds its parameters' gradients as temporaries beside the .grad
 * buffers only when those are held for the step: under autograd's lifetimes the first
 * gradient is the buffer itself (AccumulateGrad takes it without a copy), which the program
 * makes, so its workspace holds nothing more (counting both held it twice). */
START_TEST(autograd_counts_each_gradient_once)
{
    size_t trainable = 0;
    for (size_t i = 0; i < N_MODELS; i++) {
        ck_workload held, made;
        load(&held, i, CK_GRAN_OP, "held", 0, NULL);
        load(&made, i, CK_GRAN_OP, "autograd", 0, NULL);
        const ck_model *m = held.model;
        for (size_t k = 0; k < m->n_nodes; k++) {
            const ck_node *n = &m->nodes[k];
            uint64_t temps = 0; /* its own parameters' and a tied one's (the head's table) */
            for (size_t j = 0; n->trainable && j < n->info.n_param_tensors; j++) {
                const ck_param *p = &n->info.params[j];
                uint64_t numel = p->tied ? p->dim[0] * (p->rank > 1 ? p->dim[1] : 1) : p->numel;
                temps += numel * ck_dtype_bytes(m->training.grad_dtype);
            }
            ck_assert_msg(n->info.bwd_ws_bytes == made.model->nodes[k].info.bwd_ws_bytes + temps,
                          "%s node %s: held %llu, autograd %llu, gradients %llu", models[i].path,
                          n->name, (unsigned long long)n->info.bwd_ws_bytes,
                          (unsigned long long)made.model->nodes[k].info.bwd_ws_bytes,
                          (unsigned long long)temps);
            trainable += n->trainable;
        }
        ck_workload_free(&held);
        ck_workload_free(&made);
    }
    ck_assert_uint_gt(trainable, 20);
}
END_TEST

/* A later micro-step holds every gradient throughout, and each backward holds a new
 * gradient beside the one it adds into: at most its stage's nodes' gradients more. */
START_TEST(accumulation_holds_every_gradient)
{
    for (size_t i = 0; i < N_MODELS; i++) {
        ck_workload held, accum;
        load(&held, i, CK_GRAN_BLOCK, "held", 0, NULL);
        load(&accum, i, CK_GRAN_BLOCK, "autograd", 2, NULL);
        uint64_t all = held.statics.grads;
        ck_schedule s[16];
        size_t n = schedules(&held, s, 16);
        for (size_t j = 0; j < n; j++) {
            replayed h = replay_of(&held, &s[j]), a = replay_of(&accum, &s[j]);
            for (size_t k = 0; k < s[j].n; k++) {
                const ck_action *act = &s[j].actions[k];
                uint64_t beside = 0;
                for (size_t nd = act->kind == CK_B ? held.stage_first[act->stage] : 0;
                     act->kind == CK_B && nd < held.stage_first[act->stage + 1]; nd++) {
                    beside += own_grad_bytes(held.model, nd);
                    if (held.model->nodes[nd].tied_to != CK_NO_NODE && held.model->nodes[nd].trainable)
                        beside += own_grad_bytes(held.model, held.model->nodes[nd].tied_to);
                }
                ck_assert_uint_eq(a.live[k], h.live[k] + all);
                ck_assert_uint_ge(a.peak[k], h.peak[k] + all);
                ck_assert_uint_le(a.peak[k], h.peak[k] + all + beside);
            }
            replayed_free(&h);
            replayed_free(&a);
            ck_schedule_free(&s[j]);
        }
        ck_workload_free(&held);
        ck_workload_free(&accum);
    }
}
END_TEST

/* Adam's step temporaries, by torch.optim's implementations: none fused, the largest
 * trainable tensor twice for-loop, every trainable tensor once foreach, in the state's
 * dtype; they are held after the last action, beside the gradients under autograd. */
START_TEST(optimizer_step_temporaries)
{
    for (size_t i = 0; i < N_MODELS; i++) {
        ck_workload fused, loop, each;
        load(&fused, i, CK_GRAN_BLOCK, "autograd", 0, "fused");
        load(&loop, i, CK_GRAN_BLOCK, "autograd", 0, "for-loop");
        load(&each, i, CK_GRAN_BLOCK, "autograd", 0, "foreach");
        const ck_model *m = fused.model;
        if (m->training.optimizer != CK_OPT_ADAM && m->training.optimizer != CK_OPT_ADAMW)
            goto next;
        uint64_t largest = 0, all = 0, state = ck_dtype_bytes(m->training.state_dtype);
        for (size_t n = 0; n < m->n_nodes; n++)
            for (size_t p = 0; m->nodes[n].trainable && p < m->nodes[n].info.n_param_tensors; p++) {
                uint64_t numel = m->nodes[n].info.params[p].numel;
                largest = numel > largest ? numel : largest;
                all += numel;
            }
        ck_assert_uint_eq(all, fused.statics.n_trainable);
        ck_schedule base = {0};
        ck_err err = {{0}};
        ck_assert_int_eq(ck_schedule_baseline(&fused.chain, &base, &err), CK_OK);
        replayed f = replay_of(&fused, &base), l = replay_of(&loop, &base), e = replay_of(&each, &base);
        size_t last = base.n - 1;
        uint64_t grads = fused.statics.made_grads;
        ck_assert_uint_ge(f.peak[last], grads);
        uint64_t without = f.peak[last]; /* the action's own peak, or the gradients alone */
        uint64_t loop_step = grads + 2 * largest * state, each_step = grads + all * state;
        ck_assert_uint_eq(l.peak[last], without > loop_step ? without : loop_step);
        ck_assert_uint_eq(e.peak[last], without > each_step ? without : each_step);
        for (size_t k = 0; k < last; k++)
            ck_assert(l.peak[k] == f.peak[k] && e.peak[k] == f.peak[k]);
        replayed_free(&f);
        replayed_free(&l);
        replayed_free(&e);
        ck_schedule_free(&base);
    next:
        ck_workload_free(&fused);
        ck_workload_free(&loop);
        ck_workload_free(&each);
    }
}
END_TEST

typedef struct {
    float *grads, *params;
    size_t n_grads, n_params;
    ck_step_stats stats;
    uint64_t *peak;
} stepped;

static stepped step_of(const ck_workload *w, const ck_schedule *s, uint64_t step)
{
    ck_err err = {{0}};
    ck_exec_opts opts = {.seed = 3};
    ck_exec *e;
    ck_assert_msg(ck_exec_create(w->model, &w->chain, w->stage_first, &opts, &e, &err) == CK_OK, "%s", err.msg);
    stepped out = {0};
    out.peak = calloc(s->n, sizeof *out.peak);
    ck_assert_msg(ck_exec_step(e, s, step, &out.stats, &(ck_exec_trace){.peak = out.peak}, &err) == CK_OK,
                  "%s", err.msg);
    const float *g = ck_exec_gradients(e, &out.n_grads);
    out.grads = malloc(out.n_grads * sizeof *g + 1);
    out.n_params = ck_exec_n_parameters(e);
    out.params = malloc(out.n_params * sizeof *out.params + 1);
    ck_assert(out.grads && out.params);
    memcpy(out.grads, g, out.n_grads * sizeof *g);
    ck_exec_parameters(e, out.params);
    ck_exec_free(e);
    return out;
}

static void stepped_free(stepped *s)
{
    free(s->grads);
    free(s->params);
    free(s->peak);
}

/* The executor holds what the replay says, action by action, and computes the same step
 * whatever the gradients' lifetime; accumulating two micro-steps gives the sum of their
 * gradients, each as a step of its own computes it. */
START_TEST(executor_holds_the_replay_and_computes_the_same)
{
    for (size_t i = 0; i < N_MODELS; i++) {
        ck_workload held, made, accum, loop;
        load(&held, i, CK_GRAN_BLOCK, "held", 0, NULL);
        load(&made, i, CK_GRAN_BLOCK, "autograd", 0, NULL);
        load(&accum, i, CK_GRAN_BLOCK, "autograd", 2, NULL);
        load(&loop, i, CK_GRAN_BLOCK, "autograd", 2, "for-loop");
        ck_schedule s[16];
        size_t n = schedules(&held, s, 3);
        for (size_t j = 0; j < n; j++) {
            stepped h = step_of(&held, &s[j], 1), a = step_of(&made, &s[j], 1);
            ck_assert_uint_eq(h.n_grads, a.n_grads);
            ck_assert(memcmp(h.grads, a.grads, h.n_grads * sizeof *h.grads) == 0);
            ck_assert(memcmp(h.params, a.params, h.n_params * sizeof *h.params) == 0);
            const ck_workload *ws[] = {&made, &accum, &loop};
            for (size_t v = 0; v < 3; v++) {
                replayed r = replay_of(ws[v], &s[j]);
                stepped x = v ? step_of(ws[v], &s[j], 1) : a;
                ck_assert_uint_eq(x.stats.activation_peak_bytes, r.r.peak_bytes);
                ck_assert_uint_eq(x.stats.static_bytes, ws[v]->statics.total);
                for (size_t k = 0; k < s[j].n; k++)
                    ck_assert_uint_eq(x.peak[k], r.peak[k]);
                replayed_free(&r);
                if (v)
                    stepped_free(&x);
            }
            /* micro-steps 2 and 3 of a one-micro-step run are step 1's two of accumulation */
            stepped two = step_of(&accum, &s[j], 1), m0 = step_of(&made, &s[j], 2), m1 = step_of(&made, &s[j], 3);
            for (size_t k = 0; k < two.n_grads; k++) {
                float sum = m0.grads[k] + m1.grads[k];
                ck_assert_msg(fabsf(two.grads[k] - sum) <= 1e-5f * (1 + fabsf(sum)), "%s: gradient %zu: %g, "
                              "the micro-steps' sum %g", models[i].path, k, two.grads[k], sum);
            }
            stepped_free(&two);
            stepped_free(&m0);
            stepped_free(&m1);
            stepped_free(&h);
            stepped_free(&a);
            ck_schedule_free(&s[j]);
        }
        ck_workload_free(&held);
        ck_workload_free(&made);
        ck_workload_free(&accum);
        ck_workload_free(&loop);
    }
}
END_TEST

static Suite *grads_suite(void)
{
    Suite *s = suite_create("grads");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, autograd_makes_each_gradient_at_its_first_backward);
    tcase_add_test(tc, autograd_counts_each_gradient_once);
    tcase_add_test(tc, accumulation_holds_every_gradient);
    tcase_add_test(tc, optimizer_step_temporaries);
    tcase_add_test(tc, executor_holds_the_replay_and_computes_the_same);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(grads_suite)
