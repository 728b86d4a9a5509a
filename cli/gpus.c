/* gpus: every layout of N GPUs planned and ranked (see gpus.h). */
#include "cli/gpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/human.h"
#include "cli/interrupt.h"
#include "cli/runner.h"
#include "planner/comm.h"
#include "planner/json.h"
#include "planner/layouts.h"
#include "planner/plan.h"
#include "planner/size.h"
#include "planner/warning.h"

/* Best first: fits, then does not fit at this budget, then cannot divide the global batch,
 * then the model or the pipeline takes no such layout. */
typedef enum { ROW_FITS, ROW_INFEASIBLE, ROW_STATIC_OVER, ROW_BATCH, ROW_REFUSED } row_status;

typedef struct {
    ck_layout layout;
    size_t order; /* in ck_layouts_for's list: the last tie-break */
    row_status status;
    uint64_t microbatches;
    /* per GPU: the plan's predicted figures; when it does not fit, the derivation's static
     * memory and the smallest budget dp plans it in */
    uint64_t static_bytes, activation_bytes, total_bytes, min_budget;
    double step_time, overhead; /* a step: the plan's predicted time x microbatches_a_step */
    ck_comm_bytes comm;
    char reason[1024]; /* ROW_REFUSED: why, as loading or splitting the model said */
} gpus_row;

/* Microbatch times a step takes: m one after the other; through a pipeline of p uniform
 * stages under 1F1B, m + p - 1, the bubble (Narayanan et al. 2021, section 2.2.1) included. */
static double microbatches_a_step(const gpus_row *row)
{
    return (double)row->microbatches + (double)(ck_layout_pp(&row->layout) - 1);
}

/* --batch's value, or 0 when the model's own batch is used. */
static uint64_t given_batch(const ck_model_opts *o)
{
    for (size_t i = 0; i < o->n_sets; i++)
        if (o->sets[i].len == 1 && o->sets[i].name[0] == 'B')
            return o->sets[i].value;
    return 0;
}

/* The predicted figures of a plan, read back from its JSON text as `ckplan plan` writes it. */
static int plan_figures(const ck_planned *p, const char *label, ck_plan_figures *f, ck_err *err)
{
    cJSON *root = NULL;
    int rc = ck_json_parse(label, p->text, strlen(p->text), &root, err);
    if (rc == CK_OK)
        rc = ck_plan_predicted_from_json(root, label, f, err);
    cJSON_Delete(root);
    return rc;
}

/* A layout that does not fit: the static memory and smallest budget of the plan's rank (a
 * pipeline's worst, which is one that does not fit). */
static void infeasible_row(const ck_workload *w, uint64_t budget, const ck_planned *p, gpus_row *row)
{
    uint64_t room;
    row->min_budget = ck_runner_min_budget(w, p, &row->static_bytes);
    bool over = p->pipelined ? !ck_planner_activation_budget(budget, row->static_bytes, &room)
                             : p->static_too_large;
    row->status = over ? ROW_STATIC_OVER : ROW_INFEASIBLE;
}

/* The planned (or not) layout into row's figures. */
static int fill_row(const ck_workload *w, uint64_t budget, int plan_rc, const ck_planned *p,
                    const char *label, gpus_row *row, ck_err *err)
{
    if (plan_rc == CK_ERR_INFEASIBLE) {
        infeasible_row(w, budget, p, row);
        return CK_OK;
    }
    ck_plan_figures f;
    int rc = plan_rc == CK_OK ? plan_figures(p, label, &f, err) : plan_rc;
    if (rc != CK_OK)
        return rc;
    row->status = ROW_FITS;
    row->static_bytes = f.static_bytes;
    row->activation_bytes = f.activation_peak_bytes;
    row->total_bytes = f.peak_bytes;
    row->step_time = f.time * microbatches_a_step(row);
    row->overhead = f.overhead;
    return CK_OK;
}

/* How often schedule s runs stage `stage` forward. */
static size_t forwards_of(const ck_schedule *s, size_t stage)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        n += s->actions[i].kind != CK_LOSS && s->actions[i].kind != CK_B && s->actions[i].stage == stage;
    return n;
}

/* Tensor parallelism's bytes: for each layer (block instance) of the rank's nodes (mine;
 * NULL: all), a microbatch's two all-reduces forward and two backward of its s.b.h input,
 * the chain's x at the layer's first stage (a 1/t shard of it under sequence parallelism),
 * again forward when the plan's schedule recomputes that stage (a pipeline's: the worst
 * rank's first chunk's, the whole rank with one chunk); times the microbatches. Every layer
 * begins a stage at block and op granularity; one that does not would have no s.b.h here
 * and is left out. */
static bool tensor_bytes(const ck_workload *w, const ck_planned *p, const bool *mine, bool fits,
                         gpus_row *row)
{
    const ck_model *m = w->model;
    const ck_layout *l = &row->layout;
    const ck_pipeline_chunk *c = p->pipelined ? &p->pipeline.ranks[p->pipeline.worst].chunks[0] : NULL;
    size_t first = c ? c->first : 0, end = c ? c->end : w->chain.n_stages;
    uint64_t sum = 0, t = ck_layout_tp(l);
    for (size_t g = 0; g < m->n_groups && t > 1; g++) {
        size_t s = ck_workload_stage_at(w, m->groups[g].first);
        if (!m->groups[g].instance || (mine && !mine[m->groups[g].first]) || s == SIZE_MAX)
            continue;
        bool again = fits && s >= first && s < end && forwards_of(&p->result.schedule, s - first) > 1;
        uint64_t act, one;
        if (!ck_size_mul(ck_chain_x_bytes(&w->chain, s), l->sp ? t : 1, &act) ||
            !ck_comm_tensor_parallel_layer(t, act, l->sp, again, &one) || !ck_size_add(sum, one, &sum))
            return false;
    }
    return ck_size_mul(sum, row->microbatches, &row->comm.tensor);
}

/* The bytes the plan's rank (a pipeline's worst) sends in a step: data-parallel of its own
 * nodes' shards, tensor-parallel, and the pipeline's boundary activations and gradients. */
static int count_comm(const ck_workload *w, const ck_planned *p, bool fits, gpus_row *row, ck_err *err)
{
    const ck_layout *l = &row->layout;
    bool *mine = NULL;
    const ck_pipeline *pl = &p->pipeline;
    if (p->pipelined) {
        if (!(mine = calloc(w->model->n_nodes, sizeof *mine)))
            return ck_err_oom(err);
        ck_pipeline_rank_nodes(w, &pl->ranks[pl->worst], mine);
    }
    int rc = ck_comm_data_parallel_of(w->model, l, mine, row->microbatches, &row->comm, err);
    bool ok = rc != CK_OK || tensor_bytes(w, p, mine, fits, row);
    if (ok && rc == CK_OK && p->pipelined && pl->n_ranks > 1)
        ok = ck_comm_pipeline_rank(pl->n_ranks, pl->virtual_stages, pl->worst, row->microbatches,
                                   ck_chain_x_bytes(&w->chain, pl->ranks[1].chunks[0].first),
                                   &row->comm.pipeline);
    ok = ok && ck_size_add(row->comm.total, row->comm.tensor, &row->comm.total) &&
         ck_size_add(row->comm.total, row->comm.pipeline, &row->comm.total);
    free(mine);
    if (!ok && rc == CK_OK)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: the bytes communicated in a step are over 64 bits",
                         w->path);
    return rc;
}

/* Whether l is one that a model may refuse: tensor or pipeline parallelism. */
static bool model_may_refuse(const ck_layout *l)
{
    return ck_layout_model_parallel_given(l) || ck_layout_pipelined(l);
}

/* A layout the model or the pipeline split refused (rc, err): a row saying why. */
static int refused(int rc, gpus_row *row, ck_err *err)
{
    if (rc != CK_ERR_INPUT || !model_may_refuse(&row->layout))
        return rc;
    row->status = ROW_REFUSED;
    snprintf(row->reason, sizeof row->reason, "%s", err->msg);
    *err = (ck_err){{0}};
    return CK_OK;
}

/* Loads the model in row's layout (a pipeline's with the microbatches the global batch
 * gives it), plans it with dp at the device's budget and counts its communication; a layout
 * the global batch does not divide is loaded and planned all the same, so that a bad model
 * is reported whatever the batch. The first layout's training warnings go to stderr: they
 * do not depend on the layout. */
static int plan_layout(const ck_gpus_settings *s, uint64_t batch, gpus_row *row, ck_err *err)
{
    bool divides = ck_layouts_microbatches(&row->layout, s->global_batch, batch, &row->microbatches);
    if (ck_layout_pipelined(&row->layout))
        row->layout.microbatches = divides ? row->microbatches : 0;
    ck_workload_opts wo = *s->workload_opts;
    wo.model.layout = row->layout;
    wo.pipelines = true;
    ck_workload w;
    int rc = ck_workload_load(s->model_path, &wo, &w, err);
    if (rc != CK_OK) /* a chain file among them: it takes no layout */
        return refused(rc, row, err);
    char name[64], label[512];
    ck_layouts_name(&row->layout, name, sizeof name);
    snprintf(label, sizeof label, "sweep of %s, %s", s->model_path, name);
    ck_planned planned;
    uint64_t budget = ck_device_budget(wo.device);
    rc = ck_runner_plan(&w, &ck_planner_dp, budget, s->planner_opts, &wo, &planned, err);
    if (row->order == 0)
        ck_warning_print(stderr, &planned.warnings);
    rc = rc == CK_ERR_INPUT ? refused(rc, row, err) : fill_row(&w, budget, rc, &planned, label, row, err);
    if (rc == CK_OK && row->status != ROW_REFUSED && divides)
        rc = count_comm(&w, &planned, row->status == ROW_FITS, row, err);
    else if (rc == CK_OK && row->status != ROW_REFUSED)
        row->status = ROW_BATCH;
    ck_runner_planned_free(&planned);
    ck_workload_free(&w);
    return rc;
}

static int compare_u64(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}

/* The rows' groups, best first: fits; does not fit; the batch does not divide; refused. */
static int row_group(row_status s)
{
    return s == ROW_FITS ? 0 : s == ROW_BATCH ? 2 : s == ROW_REFUSED ? 3 : 1;
}

static int rank_rows(const void *pa, const void *pb)
{
    const gpus_row *a = pa, *b = pb;
    bool fa = a->status == ROW_FITS;
    int c = row_group(a->status) - row_group(b->status);
    if (!c && fa)
        c = (a->step_time > b->step_time) - (a->step_time < b->step_time);
    if (!c && fa)
        c = compare_u64(a->comm.total, b->comm.total);
    if (!c && row_group(a->status) == 1)
        c = compare_u64(a->min_budget, b->min_budget);
    return c ? c : compare_u64(a->order, b->order);
}

static const char *status_name(row_status s)
{
    static const char *const names[] = {"fits", "infeasible", "static_over_budget",
                                        "batch_does_not_divide", "refused"};
    return names[s];
}

/* The reason of a refused row as one CSV field: quoted, its quotes doubled. */
static void print_csv_text(const char *text)
{
    putchar('"');
    for (const char *c = text; *c; c++)
        fputs(*c == '"' ? "\"\"" : (char[2]){*c, 0}, stdout);
    putchar('"');
}

static void print_csv_row(size_t rank, const gpus_row *r)
{
    char name[64];
    ck_layouts_name(&r->layout, name, sizeof name);
    printf("%zu,%s,%llu,%u,%llu,%d,%llu,%s", rank, name,
           (unsigned long long)ck_layout_ranks(&r->layout), r->layout.zero,
           (unsigned long long)ck_layout_tp(&r->layout), r->layout.sp,
           (unsigned long long)ck_layout_pp(&r->layout), status_name(r->status));
    if (r->status == ROW_BATCH || r->status == ROW_REFUSED) {
        printf(",,,,,,,,,,,,,");
        if (r->status == ROW_REFUSED)
            print_csv_text(r->reason);
        putchar('\n');
        return;
    }
    printf(",%llu", (unsigned long long)r->static_bytes);
    if (r->status == ROW_FITS)
        printf(",%llu,%llu,,", (unsigned long long)r->activation_bytes,
               (unsigned long long)r->total_bytes);
    else
        printf(",,,%llu,", (unsigned long long)r->min_budget);
    printf("%llu,", (unsigned long long)r->microbatches);
    if (r->status == ROW_FITS)
        printf("%.17g,%.17g", r->step_time, r->overhead);
    else
        printf(",");
    printf(",%llu,%llu,%llu,%llu,%llu,\n", (unsigned long long)r->comm.total,
           (unsigned long long)r->comm.gradients, (unsigned long long)r->comm.parameters,
           (unsigned long long)r->comm.tensor, (unsigned long long)r->comm.pipeline);
}

static void print_csv(const gpus_row *rows, size_t n)
{
    printf("rank,layout,dp,zero,tp,sp,pp,status,static_bytes,activation_bytes,total_bytes,"
           "min_budget_bytes,microbatches,step_time_s,overhead,comm_bytes,comm_gradient_bytes,"
           "comm_parameter_bytes,comm_tensor_bytes,comm_pipeline_bytes,reason\n");
    for (size_t i = 0; i < n; i++)
        print_csv_row(i + 1, &rows[i]);
}

#define ROW_COLUMNS "%-24s %-25s %10s %11s %10s %6s %11s %8s %13s %10s %10s\n"

/* One table row: what does not apply is "-"; a refused layout's reason after its name. */
static void print_row(size_t rank, const gpus_row *r)
{
    char name[64], st[32], act[32] = "-", tot[32] = "-", comm[32] = "-", tp[32] = "-", pp[32] = "-",
                           fits[64], time[32] = "-", over[32] = "-";
    ck_layouts_name(&r->layout, name, sizeof name);
    if (r->status == ROW_REFUSED) {
        printf("  %2zu  %-24s refused: ", rank, name);
        ck_human_put_terminal_text(stdout, r->reason); /* names from the input: shown, never obeyed */
        putchar('\n');
        return;
    }
    ck_size_format(r->static_bytes, st, sizeof st);
    if (r->status != ROW_BATCH) {
        ck_size_format(r->comm.total, comm, sizeof comm);
        ck_size_format(r->comm.tensor, tp, sizeof tp);
        ck_size_format(r->comm.pipeline, pp, sizeof pp);
    }
    if (r->status == ROW_FITS) {
        snprintf(fits, sizeof fits, "yes");
        ck_size_format(r->activation_bytes, act, sizeof act);
        ck_size_format(r->total_bytes, tot, sizeof tot);
        snprintf(time, sizeof time, "%.1f ms", 1e3 * r->step_time);
        snprintf(over, sizeof over, "%+.1f%%", 100 * r->overhead);
    } else if (r->status == ROW_BATCH) {
        snprintf(fits, sizeof fits, "batch does not divide");
        snprintf(st, sizeof st, "-");
    } else {
        char need[32];
        ck_size_format(r->min_budget, need, sizeof need);
        snprintf(fits, sizeof fits, "%s %s", r->status == ROW_STATIC_OVER ? "no, static; needs"
                                                                          : "no, needs", need);
    }
    char micro[24] = "-";
    if (r->status != ROW_BATCH)
        snprintf(micro, sizeof micro, "%llu", (unsigned long long)r->microbatches);
    printf("  %2zu  " ROW_COLUMNS, rank, name, fits, st, act, tot, micro, time, over, comm, tp, pp);
}

static void print_table(const ck_gpus_settings *s, uint64_t batch, const gpus_row *rows, size_t n)
{
    const ck_device *d = s->workload_opts->device;
    char budget[32];
    ck_size_format(ck_device_budget(d), budget, sizeof budget);
    printf("sweep: ");
    ck_human_put_terminal_text(stdout, s->model_path);
    printf(" over %llu GPU%s, %s: budget %s a GPU, planner dp\n", (unsigned long long)s->gpus,
           s->gpus == 1 ? "" : "s", d->label, budget);
    if (batch)
        printf("global batch: %llu sequences a step, microbatches of --batch %llu: each layout's "
               "ranks run %llu / (dp x %llu) microbatches a step\n\n",
               (unsigned long long)s->global_batch, (unsigned long long)batch,
               (unsigned long long)s->global_batch, (unsigned long long)batch);
    else
        printf("global batch: %llu microbatches of the model's batch a step, split over the "
               "data-parallel ranks\n\n", (unsigned long long)s->global_batch);
    printf("  %2s  " ROW_COLUMNS, "#", "layout", "fits", "static", "activations", "total", "micro",
           "step time", "overhead", "comm/GPU/step", "of it tp", "pp");
    for (size_t i = 0; i < n; i++)
        print_row(i + 1, &rows[i]);
    printf("\nBytes per GPU (a pipeline's: its worst rank's). Step time: the plan's predicted time\n"
           "of a microbatch at the device's rates, times the microbatches; through a pipeline of\n"
           "pp stages, times microbatches + pp - 1 (1F1B's bubble). Communication is not in it;\n"
           "its bytes: data-parallel, of which tensor- and pipeline-parallel (docs/parallel.md).\n");
}

int ck_gpus_sweep(const ck_gpus_settings *s, ck_err *err)
{
    uint64_t batch = given_batch(&s->workload_opts->model);
    ck_gpus_settings set = *s;
    if (set.global_batch && !batch)
        return ck_err_fail(err, CK_ERR_INPUT, "sweep: --global-batch counts sequences of --batch's "
                                              "microbatches: give --batch too");
    if (!set.global_batch && !ck_size_mul(set.gpus, batch ? batch : 1, &set.global_batch))
        return ck_err_fail(err, CK_ERR_INPUT, "sweep: --gpus x --batch is over 64 bits");
    ck_layout_list layouts;
    int rc = ck_layouts_for(set.gpus, &layouts, err);
    if (rc != CK_OK)
        return rc;
    gpus_row *rows = calloc(layouts.n, sizeof *rows);
    if (!rows)
        rc = ck_err_oom(err);
    for (size_t i = 0; rc == CK_OK && i < layouts.n; i++) {
        rows[i] = (gpus_row){.layout = layouts.items[i], .order = i};
        rc = ck_interrupt_check(err);
        if (rc == CK_OK)
            rc = plan_layout(&set, batch ? batch : 1, &rows[i], err);
    }
    if (rc == CK_OK) {
        qsort(rows, layouts.n, sizeof *rows, rank_rows);
        if (set.csv)
            print_csv(rows, layouts.n);
        else
            print_table(&set, batch, rows, layouts.n);
    }
    free(rows);
    ck_layouts_free(&layouts);
    return rc;
}
