#include "sim/exec.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planner/derive.h"
#include "planner/lower.h"
#include "planner/program.h"
#include "planner/size.h"
#include "sim/kernel.h"
#include "sim/clock.h"
#include "sim/widen.h"

/* Streams of the counter-based generator that are not dropout (node) streams: parameters
 * use step INIT_STEP, inputs node INPUT_NODE - tensor, stateful draws node STATEFUL + n. */
#define INIT_STEP UINT64_MAX
#define INPUT_NODE (UINT64_MAX - 1)
#define STATEFUL_NODE (UINT64_C(1) << 62)

/* Chain files: a store-everything step is made to take about this long. */
#define CHAIN_STEP_SECONDS 0.2
#define GEMM_DIM 64


typedef struct backend backend;

struct ck_exec {
    const ck_model *m; /* NULL for a chain file */
    const ck_chain *c;
    const backend *be;
    size_t L;
    ck_exec_opts opts;
    ck_mem mem;
    uint64_t step, draws, adam_t;
    double loss;
    ck_action_state actions; /* what is live, in the chain's terms, during a step */
    ck_lower_context *contexts; /* per action of the step's schedule (models) */
    void *ws;
    uint64_t ws_bytes;

    /* Chain files: x_i, x̄_i and y_i; y_0 as floats, then the loss. */
    void **x, **y, **xbar;
    float *chain_grads;
    size_t n_chain_grads;
    float *gemm; /* three GEMM_DIM^2 operands */
    double gemm_seconds_per_unit;

    /* Models: their actions compiled to the program (planner/program), run on its buffers. */
    ck_lower *lower;
    ck_program program;      /* the instructions of the action being run */
    ck_program_state pstate; /* what is live, in the program's terms */
    void **values;           /* per tensor, two copies (plain, kept) */
    void **saved;            /* per node, two copies, CK_OP_MAX_SAVED slots each */
    void **grad;             /* per tensor */
    void **held;             /* per input: the static ones (token ids, targets) */
    size_t n_params, n_trainable; /* trainable parameters come first in params */
    void *params, *grads; /* in training.param_dtype; grads (n_trainable) in grad_dtype:
                             static, or under autograd the last step's gradients, copied
                             out of param_grads for ck_exec_gradients (a report's, not
                             tracked) */
    bool autograd;        /* training.grads autograd: the program makes each node's
                             parameter gradients, in param_grads, freed after the optimizer */
    void **param_grads;   /* per node, CK_OP_MAX_PARAMS each: its own parameters' gradients
                             (CK_BUF_PARAMS), one buffer a parameter */
    void *temps[CK_OP_MAX_TEMPS]; /* the running phased backward's (CK_BUF_TEMP) */
    uint64_t temp_bytes[CK_OP_MAX_TEMPS];
    void **checkpoints;   /* per node: the checkpoint state it stands for (CK_BUF_CHECKPOINT) */
    void *steps[CK_N_STEPS]; /* the model's step tensors (CK_BUF_STEP) */
    size_t grad_cursor;   /* the node whose block the optimizer read last */
    uint64_t micro;       /* the micro-step being run, of training.grad_accum */
    float *master;        /* with training.master_weights: the f32 copy of the trainable
                             parameters, which the optimizer updates */
    float *opt_m, *opt_v; /* the optimizer's moments, f32, n_trainable */
    float *grads_f32;     /* 16-bit gradients: the last step's, widened for ck_exec_gradients */
    uint64_t (*kernel_ws)[2]; /* per node: the workspace its f32 kernels take (sim/widen) */
    ck_widen widen;       /* the f32 views of the pass being run */
    size_t *param_off;  /* per node, into params: where its own parameters begin */
    int32_t *id_limit;  /* per input: token ids and targets lie in [0, limit) */
    ck_rng_key *keys;   /* per node: the dropout stream its saving forward used */

    /* Data parallelism (opts.dp): the stage this rank shards by (0 when the layout shards
     * nothing), its shard, the lengths of params, grads and the optimizer's arrays (the
     * whole model's or the shard's), and the ZeRO-3 gather buffer (a unit of even number at
     * its start, of odd number at its end: neighbours never overlap in the largest pair's
     * size) and the ZeRO-2/3 reduce-scatter buffer, with the units they hold. */
    unsigned zero;
    ck_shard shard;
    size_t n_param_slots, n_grad_slots, n_state_slots;
    void *gather, *scatter;
    uint64_t gather_bytes, scatter_bytes;
    size_t gathered[2], scattering, scatter_below;
};

#define NO_UNIT SIZE_MAX

/* What differs between running a model and a chain file's synthetic stages. */
struct backend {
    int (*start_step)(ck_exec *e, ck_err *err);
    int (*run)(ck_exec *e, size_t k, const ck_action *a, const ck_action_effect *eff, ck_err *err);
    void (*release_step)(ck_exec *e);
};

static float uniform(ck_rng_key key, uint64_t element)
{
    return (float)(ck_rng_u32(key, element) >> 8) * (1.0f / 16777216.0f);
}

/* Sum of four uniforms, centred and scaled to unit variance: normal enough for weights. */
static float normalish(ck_rng_key key, uint64_t element)
{
    float s = 0.0f;
    for (uint64_t d = 0; d < 4; d++)
        s += uniform(key, 4 * element + d);
    return (s - 2.0f) * 1.7320508f;
}

static uint64_t numel(const ck_model *m, size_t t)
{
    uint64_t n = 0;
    ck_ttype_numel(&m->tensors[t].type, &n); /* checked when the model was loaded */
    return n;
}

/* ---- releasing ---- */

static void release(ck_exec *e, ck_mem_kind kind, void **p, uint64_t bytes)
{
    ck_mem_free(&e->mem, kind, *p, bytes);
    *p = NULL;
}

static uint64_t x_bytes(const ck_exec *e, size_t i)
{
    return ck_chain_x_bytes(e->c, i);
}

/* What node k makes is activation, except the loss's output and internal tensors, which
 * live only during the loss instruction: workspace, as the chain counts them. */
static ck_mem_kind made_kind(const ck_model *m, size_t k)
{
    return m->nodes[k].op->is_loss ? CK_MEM_WORKSPACE : CK_MEM_ACTIVATION;
}

/* Everything a model's step allocated, whether it finished or failed half-way. */
static void model_release_step(ck_exec *e)
{
    const ck_model *m = e->m;
    for (size_t t = 0; e->pstate.shared && t < m->n_tensors; t++)
        if (ck_program_state_shares(&e->pstate, t)) /* another gradient's memory: released as that one */
            e->grad[t] = NULL;
    for (size_t t = 0; t < m->n_tensors; t++) {
        const ck_tensor *ten = &m->tensors[t];
        ck_mem_kind kind = ten->producer == CK_NO_NODE ? CK_MEM_ACTIVATION : made_kind(m, ten->producer);
        for (int copy = 0; copy < 2; copy++)
            release(e, kind, &e->values[2 * t + copy], ten->bytes);
        release(e, CK_MEM_GRADIENT, &e->grad[t], ten->bytes);
    }
    for (size_t k = 0; k < m->n_nodes; k++)
        for (size_t s = 0; s < 2 * CK_OP_MAX_SAVED; s++)
            release(e, made_kind(m, k), &e->saved[2 * k * CK_OP_MAX_SAVED + s],
                    m->nodes[k].info.saved[s % CK_OP_MAX_SAVED].bytes);
    for (size_t k = 0; k < m->n_nodes; k++)
        release(e, CK_MEM_ACTIVATION, &e->checkpoints[k], m->nodes[k].info.checkpoint_bytes);
    for (int s = 0; s < CK_N_STEPS; s++)
        release(e, CK_MEM_ACTIVATION, &e->steps[s], m->step_bytes[s]);
    /* the parameter gradients outlive the step's program: release_param_grads */
    for (size_t t = 0; t < CK_OP_MAX_TEMPS; t++)
        release(e, CK_MEM_GRADIENT, &e->temps[t], e->temp_bytes[t]);
    release(e, CK_MEM_WORKSPACE, &e->ws, e->ws_bytes);
    ck_program_state_free(&e->pstate);
}

/* Node k's parameter i's gradient buffer (under autograd). */
static void **param_grad(const ck_exec *e, size_t k, size_t i)
{
    return &e->param_grads[k * CK_OP_MAX_PARAMS + i];
}

/* The parameter gradients the program made, once the optimizer has applied them (as
 * zero_grad() frees them), or when a step fails. */
static void release_param_grads(ck_exec *e)
{
    for (size_t k = 0; e->param_grads && k < e->m->n_nodes; k++)
        for (size_t i = 0; i < e->m->nodes[k].info.n_param_tensors; i++)
            release(e, CK_MEM_GRADIENT, param_grad(e, k, i), ck_program_param_grad_bytes(e->m, k, i));
}

/* ---- allocating ---- */

static int alloc(ck_exec *e, ck_mem_kind kind, void **p, uint64_t bytes, ck_err *err)
{
    *p = ck_mem_alloc(&e->mem, kind, bytes);
    return *p ? CK_OK : ck_err_oom(err);
}

/* ---- parameters, inputs, optimizer ---- */

/* Where the optimizer's update k (of n_state_slots) reads and writes: the parameter, the
 * gradient and the optimizer state (master weights, moments). Unsharded all are k; a shard's
 * state is its own, its parameters and gradients too where the stage shards them, else the
 * whole arrays' element. False for a shard's padding. */
typedef struct {
    size_t param, grad, state;
} slot;

static bool update_slot(const ck_exec *e, size_t k, slot *out)
{
    uint64_t flat = k;
    if (e->zero >= 1 && !ck_shard_flat(&e->shard, k, &flat))
        return false;
    *out = (slot){e->zero >= 3 ? k : (size_t)flat, e->zero >= 2 ? k : (size_t)flat, k};
    return true;
}

/* A trainable parameter as the optimizer sees it: the f32 master copy where there is one. */
static float param_value(const ck_exec *e, slot s)
{
    return e->master ? e->master[s.state] : ck_kernel_load(e->m->training.param_dtype, e->params, s.param);
}

/* Sets a trainable parameter (and its master copy), rounded to the parameters' dtype. */
static void set_param(ck_exec *e, slot s, float x)
{
    if (e->master)
        e->master[s.state] = x;
    ck_kernel_store(e->m->training.param_dtype, e->params, s.param, x);
}

/* Under autograd, trainable element j's gradient lies in its node's block: found from the
 * node read last, as the optimizer visits elements in increasing order. */
static float grad_value(ck_exec *e, slot s)
{
    if (!e->autograd)
        return ck_kernel_load(e->m->training.grad_dtype, e->grads, s.grad);
    const ck_model *m = e->m;
    size_t k = s.grad < e->param_off[e->grad_cursor] ? 0 : e->grad_cursor;
    while (!m->nodes[k].trainable || s.grad >= e->param_off[k] + m->nodes[k].info.n_params)
        k++;
    e->grad_cursor = k;
    uint64_t j = s.grad - e->param_off[k];
    size_t i = 0;
    while (j >= m->nodes[k].info.params[i].offset + m->nodes[k].info.params[i].numel)
        i++;
    return ck_kernel_load(m->training.grad_dtype, *param_grad(e, k, i), j - m->nodes[k].info.params[i].offset);
}

/* Element j of node k's parameter i, at flat index `flat`, set to x where this rank keeps
 * it: the parameter in the whole array or its shard, and a trainable one's master copy. */
static void init_element(ck_exec *e, size_t k, size_t i, uint64_t j, size_t flat, float x)
{
    uint64_t at = flat;
    bool own = e->zero == 0 || ck_shard_owns(&e->shard, ck_shard_param(&e->shard, e->m, k, i), j, &at);
    if (e->zero < 3 || own)
        ck_kernel_store(e->m->training.param_dtype, e->params, e->zero >= 3 ? (size_t)at : flat, x);
    if (e->master && e->m->nodes[k].trainable && own)
        e->master[e->zero >= 1 ? (size_t)at : flat] = x;
}

static void init_params(ck_exec *e)
{
    const ck_model *m = e->m;
    for (size_t k = 0; k < m->n_nodes; k++) {
        const ck_op_info *info = &m->nodes[k].info;
        ck_rng_key key = {e->opts.seed, INIT_STEP, k};
        for (size_t i = 0; i < info->n_param_tensors; i++) {
            const ck_param *pa = &info->params[i];
            size_t at = e->param_off[k] + (size_t)pa->offset;
            for (size_t j = 0; j < (size_t)pa->numel; j++)
                init_element(e, k, i, j, at + j,
                             pa->init == CK_INIT_NORMAL ? 0.02f * normalish(key, pa->offset + j)
                             : pa->init == CK_INIT_ONES ? 1.0f
                                                        : 0.0f);
        }
    }
}

/* x_0 (into buf) or a held input, from (seed, step). */
static void fill_input(const ck_exec *e, size_t t, void *buf)
{
    ck_rng_key key = {e->opts.seed, e->step, INPUT_NODE - t};
    uint64_t n = numel(e->m, t);
    if (e->m->tensors[t].type.dtype == CK_I32) {
        int32_t *ids = buf;
        for (uint64_t j = 0; j < n; j++)
            ids[j] = (int32_t)(ck_rng_u32(key, j) % (uint32_t)e->id_limit[t]);
    } else {
        for (uint64_t j = 0; j < n; j++)
            ck_kernel_store(e->m->tensors[t].type.dtype, buf, j, normalish(key, j));
    }
}

/* torch.optim.Adam, and AdamW with its decoupled weight decay (decay = lr * weight_decay;
 * 0 for Adam), by ck_kernel_adam's rule. In f32, from the gradient in its dtype; the result
 * goes to the master copy, where there is one, and rounded into the parameters. f32
 * parameters and gradients without master weights are updated on the arrays themselves:
 * element by element through the dtypes (a switch each) the update was a tenth of a
 * gpt2-tiny step. */
static void adam_step(ck_exec *e, float decay)
{
    const ck_training *tr = &e->m->training;
    e->adam_t++;
    ck_kernel_adam_step st = ck_kernel_adam_at(e->adam_t, CK_EXEC_ADAM_LR, decay);
    if (tr->param_dtype == CK_F32 && tr->grad_dtype == CK_F32 && !e->master && e->zero == 0) {
        if (!e->autograd) /* one array of gradients */
            ck_kernel_adam(e->params, e->grads, e->opt_m, e->opt_v, e->n_trainable, &st);
        for (size_t k = 0; e->autograd && k < e->m->n_nodes; k++) /* a block a parameter */
            for (size_t i = 0; i < e->m->nodes[k].info.n_param_tensors; i++) {
                const ck_param *pa = &e->m->nodes[k].info.params[i];
                size_t at = e->param_off[k] + pa->offset;
                if (*param_grad(e, k, i))
                    ck_kernel_adam((float *)e->params + at, *param_grad(e, k, i), e->opt_m + at,
                                   e->opt_v + at, (size_t)pa->numel, &st);
            }
        return;
    }
    slot s;
    for (size_t k = 0; k < e->n_state_slots; k++) {
        if (!update_slot(e, k, &s))
            continue;
        float p = param_value(e, s), g = grad_value(e, s);
        ck_kernel_adam(&p, &g, &e->opt_m[s.state], &e->opt_v[s.state], 1, &st);
        set_param(e, s, p);
    }
}

/* Updates each trainable parameter as adam_step does, by its optimizer's rule. */
static void optimizer_step(ck_exec *e)
{
    float *mo = e->opt_m;
    slot s;
    switch (e->m->training.optimizer) {
    case CK_OPT_NONE:
    case CK_OPT_ADAFACTOR: /* refused by check_model */
    case CK_OPT_ADAM8BIT:
        break;
    case CK_OPT_SGD:
        for (size_t k = 0; k < e->n_state_slots; k++)
            if (update_slot(e, k, &s))
                set_param(e, s, param_value(e, s) - CK_EXEC_SGD_LR * grad_value(e, s));
        break;
    case CK_OPT_MOMENTUM:
        for (size_t k = 0; k < e->n_state_slots; k++) {
            if (!update_slot(e, k, &s))
                continue;
            mo[s.state] = CK_EXEC_MOMENTUM * mo[s.state] + grad_value(e, s);
            set_param(e, s, param_value(e, s) - CK_EXEC_SGD_LR * mo[s.state]);
        }
        break;
    case CK_OPT_ADAM:
        adam_step(e, 0.0f);
        break;
    case CK_OPT_ADAMW:
        adam_step(e, CK_EXEC_ADAM_LR * CK_EXEC_ADAMW_WEIGHT_DECAY);
        break;
    }
}

void ck_exec_reset(ck_exec *e)
{
    e->draws = 0;
    e->adam_t = 0;
    if (!e->m)
        return;
    init_params(e);
    size_t bytes = e->n_state_slots * sizeof(float);
    if (e->opt_m)
        memset(e->opt_m, 0, bytes);
    if (e->opt_v)
        memset(e->opt_v, 0, bytes);
}

/* ---- running a model's nodes ---- */

/* The next dropout stream for node k: a pure function of (seed, step, node), or with
 * stateful_rng the next stream of one sequential generator that nothing rewinds. */
static ck_rng_key next_key(ck_exec *e, size_t k)
{
    if (e->opts.stateful_rng)
        return (ck_rng_key){e->opts.seed, e->step, STATEFUL_NODE + e->draws++};
    return (ck_rng_key){e->opts.seed, e->step, k};
}

typedef enum { WALK_SAVING, WALK_PLAIN, WALK_BACKWARD, WALK_LOSS_FORWARD, WALK_LOSS_BACKWARD } walk_mode;

static bool is_loss(walk_mode mode)
{
    return mode == WALK_LOSS_FORWARD || mode == WALK_LOSS_BACKWARD;
}

/* A backward pass, a node's or the loss's: it reads what the forward saved. */
static bool is_backward(walk_mode mode)
{
    return mode == WALK_BACKWARD || mode == WALK_LOSS_BACKWARD;
}

/* The instruction being run and how it reads the program's buffers. */
typedef struct {
    ck_exec *e;
    const ck_instr *in;
    walk_mode mode;
    size_t phase; /* of a phased backward */
} walk;

/* Where tensor t is for the running node: the forward's output is the instruction's buffer;
 * a forward reads the plain copy of its inputs when live (the checkpoint x_i, or what this
 * forward just made), a backward the kept one (what the saving forward kept). */
static void *value(const walk *w, size_t t)
{
    ck_exec *e = w->e;
    if (ck_model_is_static(e->m, t))
        return e->held[t];
    if (w->mode != WALK_BACKWARD && !is_loss(w->mode) && t == w->in->buf.id)
        return e->values[2 * t + w->in->buf.copy];
    void *plain = e->values[2 * t + CK_COPY_PLAIN], *kept = e->values[2 * t + CK_COPY_KEPT];
    if (w->mode == WALK_BACKWARD)
        return kept ? kept : plain;
    return plain ? plain : kept;
}

/* The f32 view (sim/widen) of buffer buf of tensor t: its value or its gradient. */
static void *tensor_view(const walk *w, size_t t, void *buf, bool writes)
{
    const ck_model *m = w->e->m;
    return ck_widen_view(&w->e->widen, buf, m->tensors[t].type.dtype, numel(m, t), writes);
}

/* Node k's internal saved tensors, by slot, in the copy the running instruction uses: a
 * saving forward's and a backward's are the kept ones; forwards write them. A forward's
 * scratch ones (kept by nobody) lie in its workspace. */
static void saved_slots(const walk *w, size_t k, void **saved)
{
    const ck_op_info *info = &w->e->m->nodes[k].info;
    ck_copy copy = w->mode == WALK_BACKWARD || w->mode == WALK_SAVING ? CK_COPY_KEPT : CK_COPY_PLAIN;
    void **slots = &w->e->saved[(2 * k + copy) * CK_OP_MAX_SAVED];
    for (size_t s = 0; s < info->n_saved; s++) {
        const ck_saved *sv = &info->saved[s];
        uint64_t n = 0;
        ck_ttype_numel(&sv->type, &n); /* checked when the model was loaded */
        if (sv->kind == CK_SAVE_INTERNAL)
            saved[sv->slot] = ck_widen_view(&w->e->widen, slots[s], sv->type.dtype, n,
                                            !is_backward(w->mode));
    }
    const ck_node *node = &w->e->m->nodes[k];
    for (size_t j = 0; !is_backward(w->mode) && j < node->n_scratch; j++) {
        const ck_saved *sv = &node->scratch[j];
        uint64_t n = 0;
        ck_ttype_numel(&sv->type, &n);
        saved[sv->slot] = ck_widen_view(&w->e->widen, (char *)w->e->ws + node->scratch_at[j],
                                        sv->type.dtype, n, true);
    }
}

/* The dropout stream of node k's forward, kept with x̄ by a saving forward for the
 * backward (flash attention redraws its mask). */
static ck_rng_key dropout_key(const walk *w, size_t k)
{
    ck_rng_key key = next_key(w->e, k);
    if (w->mode == WALK_SAVING)
        w->e->keys[k] = key;
    return key;
}

/* Where parameter i of node k begins in params (and its gradient in grads); a tied one is
 * parameter 0 of the node it is tied to. False where it is absent. */
static bool param_at(const ck_exec *e, size_t k, size_t i, size_t *at)
{
    const ck_node *n = &e->m->nodes[k];
    const ck_param *pa = &n->info.params[i];
    if (pa->tied)
        *at = e->param_off[n->tied_to] + (size_t)e->m->nodes[n->tied_to].info.params[0].offset;
    else
        *at = e->param_off[k] + (size_t)pa->offset;
    return pa->tied || pa->numel > 0;
}

/* Where unit u lies in the gather buffer: at its start for an even u, at its end for an
 * odd one. */
static unsigned char *gathered_unit(const ck_exec *e, size_t u)
{
    uint64_t bytes = e->shard.units[u].params * ck_dtype_bytes(e->m->training.param_dtype);
    return (unsigned char *)e->gather + (u % 2 ? e->gather_bytes - bytes : 0);
}

/* Where node k's parameter i (flat index at) and its gradient are read and accumulated:
 * the whole arrays, or under ZeRO-3 the gathered unit and under ZeRO-2 and 3 the unit's
 * whole gradients in the reduce-scatter buffer. */
static void param_places(const ck_exec *e, size_t k, size_t i, size_t at, void **param, void **grad)
{
    const ck_training *tr = &e->m->training;
    uint64_t pbytes = ck_dtype_bytes(tr->param_dtype), gbytes = ck_dtype_bytes(tr->grad_dtype);
    const ck_shard_tensor *t = e->zero >= 2 ? ck_shard_param(&e->shard, e->m, k, i) : NULL;
    *param = t && e->zero >= 3 ? (void *)(gathered_unit(e, t->unit) + t->in_unit * pbytes)
                               : (void *)((char *)e->params + at * pbytes);
    bool tied = e->m->nodes[k].info.params[i].tied; /* to its owner's parameter 0 */
    *grad = !e->m->nodes[k].trainable ? NULL
            : t                       ? (char *)e->scatter + t->in_unit * gbytes
            : !e->autograd            ? (char *)e->grads + at * gbytes
            : tied                    ? *param_grad(e, e->m->nodes[k].tied_to, 0)
                                      : *param_grad(e, k, i);
}

/* The f32 views of node k's parameters and, in a backward, of their gradients, which it
 * accumulates into. */
static void param_views(const walk *w, size_t k, ck_kernel_io *io)
{
    ck_exec *e = w->e;
    const ck_training *tr = &e->m->training;
    const ck_op_info *info = &e->m->nodes[k].info;
    for (size_t i = 0; i < info->n_param_tensors; i++) {
        size_t at;
        void *param, *grad;
        if (!param_at(e, k, i, &at))
            continue;
        param_places(e, k, i, at, &param, &grad);
        const ck_param *pa = &info->params[i];
        uint64_t n = 1; /* from the shape, which a tied one has too (its numel is 0) */
        for (size_t r = 0; r < pa->rank; r++)
            n *= pa->dim[r];
        io->param[i] = ck_widen_view(&e->widen, param, tr->param_dtype, n, false);
        if (w->mode == WALK_BACKWARD && e->m->nodes[k].trainable) /* then at < n_trainable */
            io->dparam[i] = ck_widen_view(&e->widen, grad, tr->grad_dtype, n, true);
    }
}

/* The workspace node k's kernel gets for this pass. */
static void *kernel_workspace(const walk *w, size_t k)
{
    const uint64_t *ws = w->e->kernel_ws[k];
    uint64_t need = !is_backward(w->mode)              ? ws[0]
                    : w->e->m->nodes[k].info.n_phases ? 0 /* its phases work in its temps */
                                                      : ws[1];
    return ck_widen_workspace(&w->e->widen, w->e->ws, w->e->ws_bytes, need);
}

/* What node k's pass reads and writes, as f32 views. The loss's forward reads x_L and held
 * inputs and writes the loss; its backward writes the gradient of x_L, y_L, reading x_L
 * only where it is still live (the loss frees it first when nothing reads it, planner/
 * program). Gradients are NULL where a tensor has none. */
static ck_kernel_io node_io(const walk *w, size_t k)
{
    ck_exec *e = w->e;
    const ck_node *n = &e->m->nodes[k];
    ck_kernel_io io = {.m = e->m, .node = n, .ws = kernel_workspace(w, k)};
    bool backward = w->mode == WALK_BACKWARD;
    for (size_t i = 0; i < n->op->arity; i++) {
        size_t t = n->inputs[i];
        void *v = value(w, t);
        io.in[i] = v ? tensor_view(w, t, v, false) : NULL;
        if (backward || (w->mode == WALK_LOSS_BACKWARD && i == 0))
            io.din[i] = tensor_view(w, t, e->grad[t], true);
    }
    if (w->mode != WALK_LOSS_BACKWARD)
        io.out = tensor_view(w, n->output, value(w, n->output), !backward);
    io.dout = backward ? tensor_view(w, n->output, e->grad[n->output], false) : NULL;
    param_views(w, k, &io);
    saved_slots(w, k, io.saved);
    for (size_t t = 0; backward && t < n->info.n_temps; t++) {
        uint64_t numel_t = 0;
        ck_ttype_numel(&n->info.temps[t].type, &numel_t); /* checked when the model was loaded */
        io.temp[t] = ck_widen_view(&e->widen, e->temps[t], n->info.temps[t].type.dtype, numel_t, true);
    }
    io.phase = w->phase;
    if (backward)
        io.key = e->keys[k];
    else if (n->op->draws)
        io.key = dropout_key(w, k);
    return io;
}

/* Node k's pass on f32 views, what it wrote rounded back into the stored tensors. */
static int run_node(const walk *w, size_t k, ck_err *err)
{
    ck_kernel_io io = node_io(w, k);
    int rc = ck_widen_check(&w->e->widen, err);
    if (rc != CK_OK)
        return rc;
    if (w->mode == WALK_BACKWARD) {
        ck_kernel_backward(&io);
    } else if (w->mode == WALK_LOSS_FORWARD) {
        float loss = ck_kernel_loss_forward(&io);
        *(float *)io.out = loss;
        w->e->loss = loss;
    } else if (w->mode == WALK_LOSS_BACKWARD) {
        ck_kernel_loss_backward(&io);
    } else {
        ck_kernel_forward(&io);
    }
    ck_widen_finish(&w->e->widen);
    return CK_OK;
}

/* The pointer an event of the program allocates or frees. */
static void **event_slot(ck_exec *e, const ck_event *ev)
{
    switch (ev->buf.kind) {
    case CK_BUF_VALUE:
        return &e->values[2 * ev->buf.id + ev->buf.copy];
    case CK_BUF_SAVED:
        return &e->saved[(2 * ev->buf.id + ev->buf.copy) * CK_OP_MAX_SAVED + ev->slot];
    case CK_BUF_PARAMS:
        return param_grad(e, ev->buf.id, ev->slot);
    case CK_BUF_TEMP:
        e->temp_bytes[ev->slot] = ev->bytes;
        return &e->temps[ev->slot];
    case CK_BUF_CHECKPOINT:
        return &e->checkpoints[ev->buf.id];
    case CK_BUF_STEP:
        return &e->steps[ev->buf.id];
    case CK_BUF_GRAD:
        break;
    }
    return &e->grad[ev->buf.id];
}

/* The reduce-scatter buffer's unit's gradients averaged into this rank's shares, and the
 * buffer emptied for the next unit. A backward visits units in descending order, each in
 * one run: a unit met again would have its shares overwritten, so it is refused. */
static int flush_scatter(ck_exec *e, ck_err *err)
{
    if (e->scattering == NO_UNIT)
        return CK_OK;
    int rc = ck_shard_reduce_scatter(&e->shard, &e->opts.dp->comm, e->scattering, e->scatter, e->grads,
                                     e->m->training.grad_dtype, err);
    memset(e->scatter, 0, (size_t)e->scatter_bytes);
    e->scattering = NO_UNIT;
    return rc;
}

/* What a data-parallel rank does before running node k: under ZeRO-2 and 3, when a
 * backward moves to another unit, the gradients of the one it leaves are reduce-scattered;
 * under ZeRO-3 the node's unit's whole parameters are all-gathered into its half of the
 * gather buffer unless they are there already. */
static int before_node(ck_exec *e, const ck_instr *in, ck_err *err)
{
    const ck_node *n = &e->m->nodes[in->node];
    if (e->zero < 2 || n->info.n_params == 0)
        return CK_OK;
    size_t u = e->shard.node_unit[in->node];
    int rc = CK_OK;
    if (in->kind == CK_INSTR_BACKWARD && n->trainable && e->scattering != u) {
        if (u >= e->scatter_below)
            return ck_err_fail(err, CK_ERR_RUNTIME, "%s: the backward returns to unit %zu after "
                               "reduce-scattering it", e->m->file, u);
        rc = flush_scatter(e, err);
        e->scattering = u;
        e->scatter_below = u;
    }
    if (rc == CK_OK && e->zero >= 3 && e->gathered[u % 2] != u) {
        rc = ck_shard_gather_unit(&e->shard, &e->opts.dp->comm, u, e->params, gathered_unit(e, u),
                                  e->m->training.param_dtype, err);
        e->gathered[u % 2] = rc == CK_OK ? u : NO_UNIT;
    }
    return rc;
}

/* The node of the running instruction, in the mode it asks for (the loss's event says which
 * of its passes). */
static int run_instruction(ck_exec *e, const ck_instr *in, const ck_event *ev, ck_err *err)
{
    int rc = before_node(e, in, err);
    if (rc != CK_OK)
        return rc;
    walk w = {e, in, in->kind == CK_INSTR_BACKWARD ? WALK_BACKWARD
                     : in->kind == CK_INSTR_LOSS   ? (ev->slot ? WALK_LOSS_BACKWARD : WALK_LOSS_FORWARD)
                     : in->keep                    ? WALK_SAVING
                                                   : WALK_PLAIN, ev->slot};
    return run_node(&w, in->node, err);
}

/* Allocates and frees real buffers on the events of an instruction (ck_program_run), and
 * runs its node on CK_EVENT_RUN. */
static int on_event(void *ctx, const ck_instr *in, const ck_event *ev, ck_err *err)
{
    ck_exec *e = ctx;
    static const ck_mem_kind kinds[] = {[CK_HOLD_ACTIVATION] = CK_MEM_ACTIVATION,
                                        [CK_HOLD_GRADIENT] = CK_MEM_GRADIENT,
                                        [CK_HOLD_WORKSPACE] = CK_MEM_WORKSPACE};
    switch (ev->kind) {
    case CK_EVENT_ALLOC:
        return alloc(e, kinds[ev->hold], event_slot(e, ev), ev->bytes, err);
    case CK_EVENT_FREE:
        release(e, kinds[ev->hold], event_slot(e, ev), ev->bytes);
        break;
    case CK_EVENT_WORKSPACE:
        e->ws_bytes = ev->bytes;
        return alloc(e, CK_MEM_WORKSPACE, &e->ws, ev->bytes, err);
    case CK_EVENT_WORKSPACE_FREE:
        release(e, CK_MEM_WORKSPACE, &e->ws, ev->bytes);
        break;
    case CK_EVENT_RUN:
        return run_instruction(e, in, ev, err);
    case CK_EVENT_MOVE: /* a pass: the owner takes the output gradient's buffer... */
        e->grad[ev->buf.id] = e->grad[ev->from.id];
        e->grad[ev->from.id] = NULL;
        break;
    case CK_EVENT_SHARE: /* ...and the sharer reads the same memory, which it does not own */
        e->grad[ev->buf.id] = e->grad[ev->from.id];
        break;
    case CK_EVENT_UNSHARE:
        e->grad[ev->buf.id] = NULL;
        break;
    }
    return CK_OK;
}

/* ---- the model backend ---- */

/* Action k compiled, and its instructions run. */
static int model_run(ck_exec *e, size_t k, const ck_action *a, const ck_action_effect *eff, ck_err *err)
{
    e->program.n = 0;
    int rc = ck_lower_action(e->lower, a, eff, &e->contexts[k], &e->program, err);
    for (size_t j = 0; j < e->program.n && rc == CK_OK; j++)
        rc = ck_program_run(&e->pstate, j, &e->program.instrs[j], on_event, e, NULL, err);
    return rc;
}

static int model_start_step(ck_exec *e, ck_err *err)
{
    const ck_model *m = e->m;
    int rc = ck_program_state_init(&e->pstate, m, err);
    if (rc == CK_OK && e->micro > 0) /* a later micro-step adds into the gradients made */
        ck_program_state_hold_params(&e->pstate);
    if (rc == CK_OK && !ck_model_is_static(m, 0))
        rc = alloc(e, CK_MEM_ACTIVATION, &e->values[0], m->tensors[0].bytes, err);
    if (rc != CK_OK)
        return rc;
    if (e->micro == 0 && !e->autograd) /* autograd's are made zeroed by the program */
        memset(e->grads, 0, e->n_grad_slots * ck_dtype_bytes(m->training.grad_dtype));
    if (e->scatter)
        memset(e->scatter, 0, (size_t)e->scatter_bytes);
    e->gathered[0] = e->gathered[1] = e->scattering = e->scatter_below = NO_UNIT;
    for (size_t t = 0; t < m->n_inputs; t++)
        fill_input(e, t, ck_model_is_static(m, t) ? e->held[t] : e->values[0]);
    return CK_OK;
}

static const backend model_backend = {model_start_step, model_run, model_release_step};

/* ---- the operations on a chain file's synthetic stages ---- */

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t checksum(const void *p, uint64_t bytes, uint64_t h)
{
    const unsigned char *b = p;
    uint64_t j = 0;
    for (; j + 8 <= bytes; j += 8) {
        uint64_t word;
        memcpy(&word, b + j, 8);
        h = (h ^ word) * 0x100000001b3ULL;
    }
    for (; j < bytes; j++)
        h = (h ^ b[j]) * 0x100000001b3ULL;
    return mix(h);
}

/* A deterministic stream of bytes from seed: the same prefix whatever the length, so x_{i+1}
 * is the beginning of x̄_{i+1}. */
static void fill(void *p, uint64_t bytes, uint64_t seed)
{
    unsigned char *b = p;
    for (uint64_t j = 0; j < bytes; j += 8) {
        uint64_t word = mix(seed + j);
        memcpy(b + j, &word, bytes - j < 8 ? bytes - j : 8);
    }
}

/* About `units` of the chain's time in GEMMs on fixed operands. */
static void gemm_work(const ck_exec *e, double units)
{
    if (!e->gemm)
        return;
    double calls = units * e->gemm_seconds_per_unit;
    const float *a = e->gemm, *b = e->gemm + GEMM_DIM * GEMM_DIM;
    float *c = e->gemm + 2 * GEMM_DIM * GEMM_DIM;
    for (double n = 0.5; n < calls; n += 1.0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, GEMM_DIM, GEMM_DIM, GEMM_DIM, 1.0f,
                    a, GEMM_DIM, b, GEMM_DIM, 0.0f, c, GEMM_DIM);
}

/* The operation's transient bytes, really written, and its time. */
static int chain_transient(ck_exec *e, uint64_t bytes, double time, uint64_t seed, ck_err *err)
{
    int rc = alloc(e, CK_MEM_WORKSPACE, &e->ws, bytes, err);
    if (rc != CK_OK)
        return rc;
    e->ws_bytes = bytes;
    fill(e->ws, bytes, seed);
    gemm_work(e, time);
    release(e, CK_MEM_WORKSPACE, &e->ws, bytes);
    return CK_OK;
}

static const void *chain_input(const ck_exec *e, size_t i)
{
    return e->x[i] ? e->x[i] : e->xbar[i];
}

/* The sizes and times are the effect's: a saving forward's are its variant's. */
static int chain_forward(ck_exec *e, size_t i, bool saving, const ck_action_effect *eff, ck_err *err)
{
    uint64_t h = checksum(chain_input(e, i), x_bytes(e, i), mix(i));
    void **result = saving ? &e->xbar[i + 1] : &e->x[i + 1];
    uint64_t bytes = eff->result_bytes;
    int rc = alloc(e, CK_MEM_ACTIVATION, result, bytes, err);
    if (rc != CK_OK)
        return rc;
    fill(*result, bytes, h);
    return chain_transient(e, eff->transient_bytes, eff->time, h, err);
}

static int chain_loss(ck_exec *e, ck_err *err)
{
    uint64_t h = checksum(chain_input(e, e->L), x_bytes(e, e->L), mix(e->L) ^ 1);
    fill(e->y[e->L], x_bytes(e, e->L), h);
    e->loss = (double)(h >> 11) * 0x1p-53;
    return chain_transient(e, e->c->loss_bwd_tmp_bytes, e->c->loss_bwd_time, h, err);
}

/* x̄_{i+1} is among the effect's frees, with the bytes of the variant that made it. */
static int chain_backward(ck_exec *e, size_t i, const ck_action_effect *eff, ck_err *err)
{
    uint64_t xbar = 0;
    for (size_t f = 0; f < eff->n_frees; f++)
        if (eff->frees[f].kind == CK_VALUE_XBAR)
            xbar = ck_action_value_bytes(e->c, eff->frees[f]);
    uint64_t h = checksum(e->y[i + 1], x_bytes(e, i + 1), mix(i) ^ 2);
    h = checksum(e->xbar[i + 1], xbar, h);
    h = checksum(chain_input(e, i), x_bytes(e, i), h);
    fill(e->y[i], x_bytes(e, i), h);
    return chain_transient(e, eff->transient_bytes, eff->time, h, err);
}

/* A chain tensor the action frees. */
static void release_value(ck_exec *e, ck_value v)
{
    void **slots[] = {[CK_VALUE_X] = e->x, [CK_VALUE_XBAR] = e->xbar, [CK_VALUE_Y] = e->y};
    ck_mem_kind kind = v.kind == CK_VALUE_Y ? CK_MEM_GRADIENT : CK_MEM_ACTIVATION;
    release(e, kind, &slots[v.kind][v.index], ck_action_value_bytes(e->c, v));
}

static int chain_run(ck_exec *e, size_t k, const ck_action *a, const ck_action_effect *eff, ck_err *err)
{
    (void)k;
    int rc = CK_OK;
    switch (a->kind) {
    case CK_F_ALL:
    case CK_F_CK:
    case CK_F_NONE:
        rc = chain_forward(e, a->stage, a->kind == CK_F_ALL, eff, err);
        break;
    case CK_LOSS:
        rc = alloc(e, CK_MEM_GRADIENT, &e->y[e->L], x_bytes(e, e->L), err);
        if (rc == CK_OK)
            rc = chain_loss(e, err);
        break;
    case CK_B:
        rc = alloc(e, CK_MEM_GRADIENT, &e->y[a->stage], x_bytes(e, a->stage), err);
        if (rc == CK_OK)
            rc = chain_backward(e, a->stage, eff, err);
        break;
    case CK_N_ACTIONS:
        break;
    }
    for (size_t f = 0; f < eff->n_frees && rc == CK_OK; f++)
        release_value(e, eff->frees[f]);
    return rc;
}

static int chain_start_step(ck_exec *e, ck_err *err)
{
    int rc = alloc(e, CK_MEM_ACTIVATION, &e->x[0], x_bytes(e, 0), err);
    if (rc == CK_OK)
        fill(e->x[0], x_bytes(e, 0), mix(e->opts.seed) ^ mix(e->step + 3));
    return rc;
}

static void chain_release_step(ck_exec *e)
{
    for (size_t i = 0; i <= e->L; i++) {
        release_value(e, (ck_value){CK_VALUE_X, i, 0});
        release_value(e, (ck_value){CK_VALUE_Y, i, 0});
        if (i > 0)
            release_value(e, (ck_value){CK_VALUE_XBAR, i, e->actions.xbar_variant[i]});
    }
    release(e, CK_MEM_WORKSPACE, &e->ws, e->ws_bytes);
}

static const backend chain_backend = {chain_start_step, chain_run, chain_release_step};

/* ---- a step ---- */

/* Action k, guarded by the action definition so that the executor is safe whatever it
 * is given (ck_exec_step has already replayed the schedule, which words the same problems
 * for users). */
static int run_action(ck_exec *e, size_t k, const ck_action *a, ck_err *err)
{
    ck_action_effect eff;
    int rc = ck_action_describe(&e->actions, k, a, &eff, err);
    if (rc == CK_OK)
        rc = e->be->run(e, k, a, &eff, err);
    if (rc == CK_OK)
        rc = ck_action_apply(&e->actions, k, a, &eff, NULL, err);
    return rc;
}

/* y_0's bytes as floats in [0, 1), then the loss. */
static void keep_chain_gradients(ck_exec *e)
{
    size_t n = e->n_chain_grads - 1;
    const unsigned char *y = e->y[0];
    for (size_t j = 0; j < n; j++) {
        uint32_t word;
        memcpy(&word, y + 4 * j, 4);
        e->chain_grads[j] = (float)(word >> 8) * (1.0f / 16777216.0f);
    }
    e->chain_grads[n] = (float)e->loss;
}

/* Runs operation k, measuring it. The tracker's peaks are reset before the operation so
 * that its own peak can be read after it, then merged back so that the step's peaks are as
 * if they had never been reset. */
static int traced_op(ck_exec *e, size_t k, const ck_action *op, double t0, const ck_exec_trace *trace,
                     ck_err *err)
{
    uint64_t saved[CK_MEM_N_KINDS];
    memcpy(saved, e->mem.peak, sizeof saved);
    uint64_t saved_total = e->mem.peak_activation_total, saved_all = e->mem.peak_total;
    ck_mem_reset_peaks(&e->mem);
    double t = ck_clock_seconds();
    int rc = run_action(e, k, op, err);
    double t1 = ck_clock_seconds();
    if (trace && rc == CK_OK) {
        if (trace->seconds)
            trace->seconds[k] = t1 - t;
        if (trace->start)
            trace->start[k] = t - t0;
        if (trace->live_after)
            trace->live_after[k] = e->mem.live_activation_total;
        if (trace->peak)
            trace->peak[k] = e->mem.peak_activation_total;
    }
    for (int kind = 0; kind < CK_MEM_N_KINDS; kind++)
        if (saved[kind] > e->mem.peak[kind])
            e->mem.peak[kind] = saved[kind];
    if (saved_total > e->mem.peak_activation_total)
        e->mem.peak_activation_total = saved_total;
    if (saved_all > e->mem.peak_total)
        e->mem.peak_total = saved_all;
    return rc;
}

/* Runs schedule s as step `step` from zeroed gradients: afterwards the gradients are this
 * microbatch's (a data-parallel rank's ZeRO-2/3 shares but for the last unit's) and
 * every tensor of the step is released. */
static int run_schedule(ck_exec *e, const ck_schedule *s, uint64_t step, double *t0,
                        const ck_exec_trace *trace, ck_err *err)
{
    ck_replay replay;
    int rc = ck_schedule_replay(e->c, s, &replay, NULL, NULL, err);
    if (rc != CK_OK)
        return rc;
    e->step = step;
    ck_mem_reset_peaks(&e->mem);
    *t0 = ck_clock_seconds();
    e->contexts = e->m ? malloc((s->n + 1) * sizeof *e->contexts) : NULL;
    rc = !e->m ? CK_OK : e->contexts ? ck_lower_contexts(e->lower, s, e->contexts, err) : ck_err_oom(err);
    if (rc == CK_OK)
        rc = ck_action_state_init(&e->actions, e->c, err);
    if (rc != CK_OK) {
        free(e->contexts);
        e->contexts = NULL;
        return rc;
    }
    rc = e->be->start_step(e, err);
    for (size_t k = 0; k < s->n && rc == CK_OK; k++) {
        rc = ck_err_check_stop(e->opts.stop, err);
        if (rc == CK_OK)
            rc = traced_op(e, k, &s->actions[k], *t0, trace, err);
    }
    if (rc == CK_OK && !e->actions.y[0])
        rc = ck_err_fail(err, CK_ERR_INPUT, "schedule: ends without y_0 being live");
    if (rc == CK_OK && !e->m)
        keep_chain_gradients(e);
    e->be->release_step(e);
    ck_action_state_free(&e->actions);
    free(e->contexts);
    e->contexts = NULL;
    return rc;
}

/* A data-parallel rank's gradients averaged over the ranks: all-reduced whole, or under
 * ZeRO-2 and 3 the last unit's reduce-scattered (the others were as the backward left
 * them). */
static int reduce_gradients(ck_exec *e, ck_err *err)
{
    const ck_exec_dp *dp = e->opts.dp;
    if (!dp)
        return CK_OK;
    if (e->zero >= 2)
        return flush_scatter(e, err);
    return ck_shard_allreduce(&dp->comm, e->shard.ranks, e->grads, e->m->training.grad_dtype,
                              e->n_trainable, err);
}

/* Under ZeRO-1 and 2 each rank updated its own shares of the whole parameters: every rank
 * all-gathers the others'. */
static int share_parameters(ck_exec *e, ck_err *err)
{
    if (e->zero != 1 && e->zero != 2)
        return CK_OK;
    return ck_shard_gather_all(&e->shard, &e->opts.dp->comm, NULL, e->params,
                               e->m->training.param_dtype, err);
}

/* The gradients of the step's micro-steps (training.grad_accum), each schedule run as step
 * number step·N + micro, adding into the gradients of the ones before. The trace is the
 * last micro-step's, whose memory is each operation's most. */
static int run_micro_steps(ck_exec *e, const ck_schedule *s, uint64_t step, double *t0,
                           const ck_exec_trace *trace, ck_err *err)
{
    uint64_t n = e->m ? e->m->training.grad_accum : 1;
    int rc = CK_OK;
    for (e->micro = 0; e->micro < n && rc == CK_OK; e->micro++) {
        double t;
        rc = run_schedule(e, s, step * n + e->micro, &t, trace, err);
        *t0 = e->micro ? *t0 : t;
    }
    e->micro = 0;
    return rc;
}

/* Under autograd, the gradients copied out of the nodes' blocks for ck_exec_gradients. */
static void keep_param_grads(ck_exec *e)
{
    uint64_t gb = ck_dtype_bytes(e->m->training.grad_dtype);
    for (size_t k = 0; e->autograd && k < e->m->n_nodes; k++)
        for (size_t i = 0; i < e->m->nodes[k].info.n_param_tensors; i++)
            if (*param_grad(e, k, i))
                memcpy((char *)e->grads + (e->param_off[k] + e->m->nodes[k].info.params[i].offset) * gb,
                       *param_grad(e, k, i), (size_t)ck_program_param_grad_bytes(e->m, k, i));
}

/* The optimizer step, holding its temporaries (ck_program_step_bytes less the gradients)
 * as workspace while it runs: its peak counts as the last operation's, as the replay has
 * it. */
static int optimize(ck_exec *e, const ck_schedule *s, const ck_exec_trace *trace, ck_err *err)
{
    uint64_t temps = ck_program_step_bytes(e->m), grads = e->mem.live[CK_MEM_GRADIENT];
    temps = temps > grads ? temps - grads : 0;
    void *ws = NULL;
    int rc = alloc(e, CK_MEM_WORKSPACE, &ws, temps, err);
    if (rc != CK_OK)
        return rc;
    optimizer_step(e);
    if (trace && trace->peak && s->n && e->mem.live_activation_total > trace->peak[s->n - 1])
        trace->peak[s->n - 1] = e->mem.live_activation_total;
    release(e, CK_MEM_WORKSPACE, &ws, temps);
    return share_parameters(e, err);
}

int ck_exec_step(ck_exec *e, const ck_schedule *s, uint64_t step, ck_step_stats *stats,
                 const ck_exec_trace *trace, ck_err *err)
{
    double t0 = 0;
    int rc = run_micro_steps(e, s, step, &t0, trace, err);
    if (rc == CK_OK && e->m)
        rc = reduce_gradients(e, err);
    if (rc == CK_OK && e->m)
        keep_param_grads(e);
    if (rc == CK_OK && e->grads_f32)
        ck_kernel_cast_forward(e->grads_f32, CK_F32, e->grads, e->m->training.grad_dtype, e->n_grad_slots);
    if (rc == CK_OK && e->m)
        rc = optimize(e, s, trace, err);
    if (e->m)
        release_param_grads(e);
    if (rc == CK_OK && stats)
        *stats = (ck_step_stats){.loss = e->loss, .seconds = ck_clock_seconds() - t0,
                                 .activation_peak_bytes = e->mem.peak_activation_total,
                                 .static_bytes = e->mem.live[CK_MEM_STATIC],
                                 .peak_bytes = e->mem.peak_total};
    return rc;
}

uint64_t ck_exec_step_rank(uint64_t step, uint64_t rank, uint64_t n)
{
    return step * n + rank;
}

int ck_exec_step_reference(ck_exec *e, const ck_schedule *s, uint64_t step, uint64_t n, ck_err *err)
{
    if (!e->m || e->opts.dp)
        return ck_err_fail(err, CK_ERR_RUNTIME, "executor: the data-parallel reference runs a "
                           "model in one process");
    if (e->autograd || e->m->training.grad_accum > 1)
        return ck_err_fail(err, CK_ERR_RUNTIME, "executor: the data-parallel reference runs held "
                           "gradients of one micro-step");
    ck_dtype d = e->m->training.grad_dtype;
    size_t bytes = e->n_trainable * ck_dtype_bytes(d), all = (size_t)n * bytes;
    unsigned char *each = malloc(all > 0 ? all : 1); /* a report's, not tracked */
    double t0;
    if (!each)
        return ck_err_oom(err);
    int rc = CK_OK;
    for (uint64_t r = 0; r < n && rc == CK_OK; r++) {
        rc = run_schedule(e, s, ck_exec_step_rank(step, r, n), &t0, NULL, err);
        memcpy(each + r * bytes, e->grads, bytes);
    }
    for (size_t j = 0; j < e->n_trainable && rc == CK_OK; j++)
        ck_kernel_store(d, e->grads, j, ck_shard_average(each, d, n, e->n_trainable, j));
    free(each);
    if (rc == CK_OK)
        optimizer_step(e);
    return rc;
}

size_t ck_exec_n_parameters(const ck_exec *e)
{
    return e->n_params;
}

int ck_exec_whole_parameters(ck_exec *e, float *out, ck_err *err)
{
    if (e->zero < 3) {
        ck_exec_parameters(e, out);
        return CK_OK;
    }
    ck_dtype d = e->m->training.param_dtype;
    void *whole = calloc(e->n_params + 1, ck_dtype_bytes(d));
    if (!whole)
        return ck_err_oom(err);
    int rc = ck_shard_gather_all(&e->shard, &e->opts.dp->comm, e->params, whole, d, err);
    if (rc == CK_OK)
        ck_kernel_cast_forward(out, CK_F32, whole, d, e->n_params);
    free(whole);
    return rc;
}

const float *ck_exec_gradients(const ck_exec *e, size_t *n)
{
    *n = e->m ? e->n_grad_slots : e->n_chain_grads;
    if (!e->m)
        return e->chain_grads;
    return e->grads_f32 ? e->grads_f32 : e->grads;
}

void ck_exec_parameters(const ck_exec *e, float *out)
{
    ck_kernel_cast_forward(out, CK_F32, e->params, e->m->training.param_dtype, e->n_params);
}

const ck_mem *ck_exec_memory(const ck_exec *e)
{
    return &e->mem;
}

/* ---- creating ---- */

/* What the executor cannot run, refused with the reason. */
static int check_model(const ck_model *m, const ck_exec_opts *opts, ck_err *err)
{
    ck_optimizer o = m->training.optimizer;
    if (o == CK_OPT_ADAFACTOR || o == CK_OPT_ADAM8BIT)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: optimizer %s is planned but not executed: the "
                       "executor runs none, sgd, momentum, adam and adamw (plan with another "
                       "--optimizer to run it)", m->file, ck_training_optimizer_name(o));
    if (m->training.grad_accum > 1 && opts->dp)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: gradient accumulation (grad_accum %llu) is "
                           "planned but not executed data-parallel: run it on one process",
                           m->file, (unsigned long long)m->training.grad_accum);
    for (size_t t = 0; t < m->n_inputs; t++) {
        ck_dtype d = m->tensors[t].type.dtype;
        if (!ck_dtype_is_float(d) && d != CK_I32)
            return ck_err_fail(err, CK_ERR_INPUT, "%s: input %s is %s; the executor takes float "
                           "and int32 inputs only", m->file, m->tensors[t].name, ck_dtype_name(d));
    }
    for (size_t k = 0; k + 1 < m->n_nodes; k++)
        for (size_t i = 0; i < m->nodes[k].op->arity; i++)
            if (ck_model_is_held(m, m->nodes[k].inputs[i]))
                return ck_err_fail(err, CK_ERR_INPUT, "%s: node %s reads input %s: the executor "
                               "lets only the loss read inputs other than the first", m->file,
                               m->nodes[k].name, m->tensors[m->nodes[k].inputs[i]].name);
    return CK_OK;
}

/* Integer inputs take values below the smallest limit the op table gives for any node that
 * reads them (an embedding's vocab, a cross_entropy's classes). */
static int find_id_limits(ck_exec *e, ck_err *err)
{
    const ck_model *m = e->m;
    for (size_t k = 0; k < m->n_nodes; k++) {
        const ck_node *n = &m->nodes[k];
        for (size_t i = 0; i < n->op->arity; i++) {
            size_t t = n->inputs[i];
            uint64_t limit = n->info.id_limit[i];
            if (limit && t < m->n_inputs &&
                (e->id_limit[t] == 0 || limit < (uint64_t)e->id_limit[t]))
                e->id_limit[t] = limit > INT32_MAX ? INT32_MAX : (int32_t)limit;
        }
    }
    for (size_t t = 0; t < m->n_inputs; t++)
        if (m->tensors[t].type.dtype == CK_I32 && e->id_limit[t] == 0)
            return ck_err_fail(err, CK_ERR_INPUT, "%s: int32 input %s is read by no op that says "
                           "which values it takes (embedding, cross_entropy): the executor "
                           "cannot draw it", m->file, m->tensors[t].name);
    return CK_OK;
}

/* Each node's own parameters one after another, in node order, the trainable nodes' first:
 * gradients and optimizer state cover those only, at the same offsets. */
static int lay_out_params(ck_exec *e, ck_err *err)
{
    const ck_model *m = e->m;
    uint64_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < m->n_nodes; k++) {
            if (m->nodes[k].trainable != (pass == 0))
                continue;
            e->param_off[k] = (size_t)total;
            if (!ck_size_add(total, m->nodes[k].info.n_params, &total) ||
                total > SIZE_MAX / sizeof(float))
                return ck_err_fail(err, CK_ERR_INPUT, "%s: too many parameters", m->file);
        }
        if (pass == 0)
            e->n_trainable = (size_t)total;
    }
    e->n_params = (size_t)total;
    return CK_OK;
}

/* What this rank of a data-parallel layout holds (opts.dp; else the whole model): its
 * shard of each array its stage shards, and the buffers of planner/derive's static
 * memory, which its units must fit (neighbours together in the gather buffer). */
static int lay_out_rank(ck_exec *e, ck_err *err)
{
    const ck_exec_dp *dp = e->opts.dp;
    e->n_param_slots = e->n_params;
    e->n_grad_slots = e->n_state_slots = e->n_trainable;
    if (!dp)
        return CK_OK;
    const ck_model *m = e->m;
    e->zero = ck_layout_shards(&dp->layout) ? dp->layout.zero : 0;
    ck_static_mem st;
    int rc = ck_shard_create(m, &dp->layout, dp->rank, e->param_off, &e->shard, err);
    if (rc == CK_OK)
        rc = ck_derive_static_memory(m, &dp->layout, &st, err);
    if (rc != CK_OK)
        return rc;
    const ck_shard *sh = &e->shard;
    e->n_param_slots = e->zero >= 3 ? (size_t)sh->n_shard : e->n_params;
    e->n_grad_slots = e->zero >= 2 ? (size_t)sh->n_trainable_shard : e->n_trainable;
    e->n_state_slots = e->zero >= 1 ? (size_t)sh->n_trainable_shard : e->n_trainable;
    e->gather_bytes = st.gather;
    e->scatter_bytes = st.reduce_scatter;
    uint64_t pb = ck_dtype_bytes(m->training.param_dtype), gb = ck_dtype_bytes(m->training.grad_dtype);
    for (size_t u = 0; u < sh->n_units; u++) {
        uint64_t pair = sh->units[u].params + (u + 1 < sh->n_units ? sh->units[u + 1].params : 0);
        if ((e->zero >= 3 && pair * pb > e->gather_bytes) ||
            (e->zero >= 2 && sh->units[u].grads * gb > e->scatter_bytes))
            return ck_err_fail(err, CK_ERR_RUNTIME, "%s: unit %zu does not fit the derived "
                               "gather or reduce-scatter buffer", m->file, u);
    }
    return CK_OK;
}

/* Static memory, each at its dtype's size (ck_derive_static_memory's figures): parameters,
 * their gradients, master weights, optimizer moments, held inputs. The widened gradients
 * for ck_exec_gradients are a report's, not the step's, and are not tracked. */
static int alloc_params(ck_exec *e, ck_err *err)
{
    const ck_model *m = e->m;
    const ck_training *tr = &m->training;
    uint64_t bytes = (uint64_t)e->n_state_slots * sizeof(float); /* master and moments */
    ck_optimizer o = tr->optimizer;
    int rc = alloc(e, CK_MEM_STATIC, &e->params, e->n_param_slots * ck_dtype_bytes(tr->param_dtype), err);
    if (rc == CK_OK && !e->autograd)
        rc = alloc(e, CK_MEM_STATIC, &e->grads, e->n_grad_slots * ck_dtype_bytes(tr->grad_dtype), err);
    if (rc == CK_OK && e->autograd) {
        e->grads = calloc(e->n_grad_slots + 1, ck_dtype_bytes(tr->grad_dtype));
        rc = e->grads ? CK_OK : ck_err_oom(err);
    }
    if (rc == CK_OK && e->zero >= 3)
        rc = alloc(e, CK_MEM_STATIC, &e->gather, e->gather_bytes, err);
    if (rc == CK_OK && e->zero >= 2)
        rc = alloc(e, CK_MEM_STATIC, &e->scatter, e->scatter_bytes, err);
    if (rc == CK_OK && tr->master_weights)
        rc = alloc(e, CK_MEM_STATIC, (void **)&e->master, bytes, err);
    if (rc == CK_OK && tr->grad_dtype != CK_F32) {
        e->grads_f32 = calloc(e->n_grad_slots + 1, sizeof *e->grads_f32);
        rc = e->grads_f32 ? CK_OK : ck_err_oom(err);
    }
    bool adam = o == CK_OPT_ADAM || o == CK_OPT_ADAMW;
    if (rc == CK_OK && (o == CK_OPT_MOMENTUM || adam))
        rc = alloc(e, CK_MEM_STATIC, (void **)&e->opt_m, bytes, err);
    if (rc == CK_OK && adam)
        rc = alloc(e, CK_MEM_STATIC, (void **)&e->opt_v, bytes, err);
    for (size_t t = 0; t < m->n_inputs && rc == CK_OK; t++)
        if (ck_model_is_static(m, t))
            rc = alloc(e, CK_MEM_STATIC, &e->held[t], m->tensors[t].bytes, err);
    return rc;
}

static int create_model(ck_exec *e, const size_t *stage_first, ck_err *err)
{
    const ck_model *m = e->m;
    size_t nt = m->n_tensors, nn = m->n_nodes;
    int rc = check_model(m, &e->opts, err);
    if (rc == CK_OK)
        rc = ck_lower_create(m, stage_first, e->L, &e->lower, err);
    if (rc != CK_OK)
        return rc;
    e->be = &model_backend;
    e->param_off = calloc(nn, sizeof *e->param_off);
    e->held = calloc(m->n_inputs, sizeof *e->held);
    e->id_limit = calloc(m->n_inputs, sizeof *e->id_limit);
    e->values = calloc(2 * nt, sizeof *e->values);
    e->saved = calloc(2 * nn * CK_OP_MAX_SAVED, sizeof *e->saved);
    e->grad = calloc(nt, sizeof *e->grad);
    e->keys = calloc(nn, sizeof *e->keys);
    e->kernel_ws = calloc(nn, sizeof *e->kernel_ws);
    e->param_grads = calloc(nn * CK_OP_MAX_PARAMS, sizeof *e->param_grads);
    e->checkpoints = calloc(nn, sizeof *e->checkpoints);
    e->autograd = m->training.grads == CK_GRADS_AUTOGRAD;
    if (!e->param_off || !e->held || !e->id_limit || !e->values || !e->saved ||
        !e->grad || !e->keys || !e->kernel_ws || !e->param_grads || !e->checkpoints)
        return ck_err_oom(err);
    rc = find_id_limits(e, err);
    for (size_t k = 0; k < nn && rc == CK_OK; k++)
        rc = ck_widen_kernel_workspace(m, &m->nodes[k], e->kernel_ws[k], err);
    if (rc == CK_OK)
        rc = lay_out_params(e, err);
    if (rc == CK_OK)
        rc = lay_out_rank(e, err);
    if (rc == CK_OK)
        rc = alloc_params(e, err);
    return rc;
}

/* GEMM calls per unit of chain time, so that the store-everything step takes about
 * CHAIN_STEP_SECONDS. */
static int calibrate(ck_exec *e, ck_err *err)
{
    const ck_chain *c = e->c;
    double total = c->loss_bwd_time;
    for (size_t i = 0; i < c->n_stages; i++)
        total += c->stages[i].fwd_time + c->stages[i].bwd_time;
    if (!(total > 0))
        return CK_OK;
    e->gemm = malloc(3 * GEMM_DIM * GEMM_DIM * sizeof *e->gemm);
    if (!e->gemm)
        return ck_err_oom(err);
    for (size_t j = 0; j < 3 * GEMM_DIM * GEMM_DIM; j++)
        e->gemm[j] = (float)(j % 7) * 0.125f;
    e->gemm_seconds_per_unit = 3; /* a warm-up of three calls */
    gemm_work(e, 1);
    enum { CALLS = 64 };
    e->gemm_seconds_per_unit = CALLS;
    double t = ck_clock_seconds();
    gemm_work(e, 1);
    double per_call = (ck_clock_seconds() - t) / CALLS;
    e->gemm_seconds_per_unit = per_call > 0 ? CHAIN_STEP_SECONDS / total / per_call : 0;
    return CK_OK;
}

static int create_chain(ck_exec *e, ck_err *err)
{
    e->be = &chain_backend;
    e->x = calloc(e->L + 1, sizeof *e->x);
    e->y = calloc(e->L + 1, sizeof *e->y);
    e->xbar = calloc(e->L + 1, sizeof *e->xbar);
    e->n_chain_grads = (size_t)(x_bytes(e, 0) / 4) + 1;
    e->chain_grads = calloc(e->n_chain_grads, sizeof *e->chain_grads);
    if (!e->x || !e->y || !e->xbar || !e->chain_grads)
        return ck_err_oom(err);
    return e->opts.skip_chain_work ? CK_OK : calibrate(e, err);
}

int ck_exec_create(const ck_model *m, const ck_chain *c, const size_t *stage_first,
                   const ck_exec_opts *opts, ck_exec **out, ck_err *err)
{
    *out = NULL;
    if (m && !stage_first)
        return ck_err_fail(err, CK_ERR_RUNTIME, "executor: a model needs its stages' first nodes");
    const ck_node *exchange = m ? ck_model_rank_exchange(m) : NULL;
    if (exchange)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: node %s exchanges activations with other ranks "
                           "(--sp, --cp): the executor runs one process and cannot execute it",
                           m->file, exchange->name);
    if (!m && opts->dp)
        return ck_err_fail(err, CK_ERR_INPUT, "executor: a chain file's stages have no parameters "
                           "to run data-parallel");
    ck_exec *e = calloc(1, sizeof *e);
    if (!e)
        return ck_err_oom(err);
    e->m = m;
    e->c = c;
    e->L = c->n_stages;
    e->opts = *opts;
    int rc = m ? create_model(e, stage_first, err) : create_chain(e, err);
    if (rc != CK_OK) {
        ck_exec_free(e);
        return rc;
    }
    ck_exec_reset(e);
    *out = e;
    return CK_OK;
}

/* Steps release what they allocate, so only static memory is left. */
void ck_exec_free(ck_exec *e)
{
    if (!e)
        return;
    if (e->m) {
        const ck_training *tr = &e->m->training;
        uint64_t trained = (uint64_t)e->n_state_slots * sizeof(float);
        release(e, CK_MEM_STATIC, &e->params, e->n_param_slots * ck_dtype_bytes(tr->param_dtype));
        if (e->autograd)
            free(e->grads);
        else
            release(e, CK_MEM_STATIC, &e->grads, e->n_grad_slots * ck_dtype_bytes(tr->grad_dtype));
        release(e, CK_MEM_STATIC, &e->gather, e->gather_bytes);
        release(e, CK_MEM_STATIC, &e->scatter, e->scatter_bytes);
        release(e, CK_MEM_STATIC, (void **)&e->master, trained);
        release(e, CK_MEM_STATIC, (void **)&e->opt_m, trained);
        release(e, CK_MEM_STATIC, (void **)&e->opt_v, trained);
        for (size_t t = 0; e->held && t < e->m->n_inputs; t++)
            release(e, CK_MEM_STATIC, &e->held[t], e->m->tensors[t].bytes);
    }
    ck_shard_free(&e->shard);
    ck_lower_free(e->lower);
    ck_program_free(&e->program);
    free(e->x);
    free(e->y);
    free(e->xbar);
    free(e->param_off);
    free(e->held);
    free(e->id_limit);
    free(e->values);
    free(e->saved);
    free(e->grad);
    free(e->param_grads);
    free(e->checkpoints);
    free(e->keys);
    free(e->kernel_ws);
    free(e->grads_f32);
    ck_widen_finish(&e->widen);
    free(e->chain_grads);
    free(e->gemm);
    free(e);
}
