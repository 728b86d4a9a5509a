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

/* Best first: fits, then does not fit at this budget, then cannot divide the global batch. */
typedef enum { ROW_FITS, ROW_INFEASIBLE, ROW_STATIC_OVER, ROW_BATCH } row_status;

typedef struct {
    ck_layout layout;
    size_t order; /* in ck_layouts_for's list: the last tie-break */
    row_status status;
    uint64_t microbatches;
    /* per GPU: the plan's predicted figures; when it does not fit, the derivation's static
     * memory and the smallest budget dp plans it in */
    uint64_t static_bytes, activation_bytes, total_bytes, min_budget;
    double step_time, overhead; /* a step: microbatches x the plan's predicted time */
    ck_comm_bytes comm;
} gpus_row;

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

/* The planned (or not) layout into row's figures. */
static int fill_row(const ck_workload *w, int plan_rc, const ck_planned *p, const char *label,
                    gpus_row *row, ck_err *err)
{
    if (plan_rc == CK_ERR_INFEASIBLE) {
        row->status = p->static_too_large ? ROW_STATIC_OVER : ROW_INFEASIBLE;
        row->static_bytes = w->statics.total;
        row->min_budget = ck_planner_step_budget(w->statics.total, p->min_activation_bytes);
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
    row->step_time = f.time * (double)row->microbatches;
    row->overhead = f.overhead;
    return CK_OK;
}

/* Loads the model in row's layout, plans it with dp at the device's budget and counts its
 * communication; a layout the global batch does not divide is loaded and planned all the
 * same, so that a bad model is reported whatever the batch. The first layout's training
 * warnings go to stderr: they do not depend on the layout. */
static int plan_layout(const ck_gpus_settings *s, uint64_t batch, gpus_row *row, ck_err *err)
{
    ck_workload_opts wo = *s->workload_opts;
    wo.model.layout = row->layout;
    ck_workload w;
    int rc = ck_workload_load(s->model_path, &wo, &w, err);
    if (rc != CK_OK) /* a chain file among them: it takes no layout */
        return rc;
    bool divides = ck_layouts_microbatches(&row->layout, s->global_batch, batch, &row->microbatches);
    char name[64], label[512];
    ck_layouts_name(&row->layout, name, sizeof name);
    snprintf(label, sizeof label, "sweep of %s, %s", s->model_path, name);
    ck_planned planned;
    rc = ck_runner_plan(&w, &ck_planner_dp, ck_device_budget(wo.device), s->planner_opts, &wo,
                        &planned, err);
    if (row->order == 0)
        ck_warning_print(stderr, &planned.warnings);
    rc = fill_row(&w, rc, &planned, label, row, err);
    if (rc == CK_OK && divides)
        rc = ck_comm_data_parallel_of(w.model, &row->layout, row->microbatches, &row->comm, err);
    else if (rc == CK_OK)
        row->status = ROW_BATCH;
    ck_runner_planned_free(&planned);
    ck_workload_free(&w);
    return rc;
}

static int compare_u64(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}

static int rank_rows(const void *pa, const void *pb)
{
    const gpus_row *a = pa, *b = pb;
    bool fa = a->status == ROW_FITS, fb = b->status == ROW_FITS;
    bool ba = a->status == ROW_BATCH, bb = b->status == ROW_BATCH;
    int c = fa != fb ? (fa ? -1 : 1) : ba != bb ? (ba ? 1 : -1) : 0;
    if (!c && fa)
        c = (a->step_time > b->step_time) - (a->step_time < b->step_time);
    if (!c && fa)
        c = compare_u64(a->comm.total, b->comm.total);
    if (!c && !fa && !ba)
        c = compare_u64(a->min_budget, b->min_budget);
    return c ? c : compare_u64(a->order, b->order);
}

static const char *status_name(row_status s)
{
    static const char *const names[] = {"fits", "infeasible", "static_over_budget",
                                        "batch_does_not_divide"};
    return names[s];
}

static void print_csv(const gpus_row *rows, size_t n)
{
    printf("rank,layout,dp,zero,status,static_bytes,activation_bytes,total_bytes,min_budget_bytes,"
           "microbatches,step_time_s,overhead,comm_bytes,comm_gradient_bytes,comm_parameter_bytes\n");
    for (size_t i = 0; i < n; i++) {
        const gpus_row *r = &rows[i];
        char name[64];
        ck_layouts_name(&r->layout, name, sizeof name);
        printf("%zu,%s,%llu,%u,%s", i + 1, name, (unsigned long long)ck_layout_ranks(&r->layout),
               r->layout.zero, status_name(r->status));
        if (r->status == ROW_BATCH) {
            printf(",,,,,,,,,,\n");
            continue;
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
        printf(",%llu,%llu,%llu\n", (unsigned long long)r->comm.total,
               (unsigned long long)r->comm.gradients, (unsigned long long)r->comm.parameters);
    }
}

/* One table row: what does not apply is "-". */
static void print_row(size_t rank, const gpus_row *r)
{
    char name[64], st[32], act[32] = "-", tot[32] = "-", comm[32] = "-", fits[64], time[32] = "-",
                                  over[32] = "-";
    ck_layouts_name(&r->layout, name, sizeof name);
    ck_size_format(r->static_bytes, st, sizeof st);
    if (r->status != ROW_BATCH)
        ck_size_format(r->comm.total, comm, sizeof comm);
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
    printf("  %2zu  %-14s %-25s %10s %11s %10s %6s %11s %8s %13s\n", rank, name, fits, st, act, tot,
           micro, time, over, comm);
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
    printf("  %2s  %-14s %-25s %10s %11s %10s %6s %11s %8s %13s\n", "#", "layout", "fits", "static",
           "activations", "total", "micro", "step time", "overhead", "comm/GPU/step");
    for (size_t i = 0; i < n; i++)
        print_row(i + 1, &rows[i]);
    printf("\nBytes per GPU. Step time: the plan's predicted time of a microbatch at the device's\n"
           "rates, times the microbatches; communication is not in it (docs/parallel.md).\n");
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
