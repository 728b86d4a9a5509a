#include "planner/plan_check.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "planner/json.h"
#include "planner/layers.h"
#include "planner/schedule.h"
#include "planner/size.h"

static bool times_agree(double a, double b)
{
    return a == b || fabs(a - b) <= CK_PLAN_TIME_TOLERANCE * fmax(fabs(a), fabs(b));
}

static void differ_bytes(ck_plan_check *out, const char *field, uint64_t plan, uint64_t replayed)
{
    out->differences[out->n_differences++] =
        (ck_plan_difference){.field = field, .plan_bytes = plan, .replayed_bytes = replayed};
}

static void compare_bytes(ck_plan_check *out, const char *field, uint64_t plan, uint64_t replayed)
{
    if (plan != replayed)
        differ_bytes(out, field, plan, replayed);
}

static void compare_time(ck_plan_check *out, const char *field, double plan, double replayed)
{
    if (!times_agree(plan, replayed))
        out->differences[out->n_differences++] = (ck_plan_difference){
            .field = field, .is_time = true, .plan_time = plan, .replayed_time = replayed};
}

static int replay_both(const ck_plan_file *p, const ck_chain *c, const ck_schedule_replayer *exact,
                       ck_replay *plan, ck_replay *base, ck_err *err)
{
    ck_schedule baseline = {0};
    int rc = ck_schedule_replay_by(exact, c, &p->schedule, plan, err);
    if (rc == CK_OK)
        rc = ck_schedule_baseline(c, &baseline, err);
    if (rc == CK_OK)
        rc = ck_schedule_replay_by(exact, c, &baseline, base, err);
    ck_schedule_free(&baseline);
    return rc;
}

/* predicted.every_layer against the replay (by exact) of every-layer checkpointing on c. */
static int check_every(const ck_plan_file *p, const ck_chain *c, const ck_schedule_replayer *exact,
                       uint64_t static_bytes, ck_plan_check *out, ck_err *err)
{
    ck_plan_figures *r = &out->replayed;
    const ck_plan_figures *f = &p->predicted;
    ck_schedule s;
    ck_replay every;
    size_t layers;
    int rc = ck_layers_every(c, &s, &layers, err);
    if (rc == CK_OK)
        rc = ck_schedule_replay_by(exact, c, &s, &every, err);
    ck_schedule_free(&s);
    if (rc != CK_OK)
        return rc;
    if (!ck_size_add(static_bytes, every.peak_bytes, &r->every_peak_bytes))
        return ck_err_fail(err, CK_ERR_INPUT, "static memory plus activations exceed 2^64 bytes");
    r->has_every = true;
    r->every_layers = layers;
    r->every_activation_peak_bytes = every.peak_bytes;
    r->every_time = every.time;
    r->every_overhead = ck_plan_overhead(every.time, r->baseline_time);
    if (f->every_layers != r->every_layers)
        out->differences[out->n_differences++] = (ck_plan_difference){
            .field = "predicted.every_layer.layers", .is_count = true,
            .plan_bytes = f->every_layers, .replayed_bytes = r->every_layers};
    compare_bytes(out, "predicted.every_layer.peak_bytes", f->every_peak_bytes, r->every_peak_bytes);
    compare_bytes(out, "predicted.every_layer.activation_peak_bytes", f->every_activation_peak_bytes,
                  r->every_activation_peak_bytes);
    compare_time(out, "predicted.every_layer.time", f->every_time, r->every_time);
    compare_time(out, "predicted.every_layer.overhead", f->every_overhead, r->every_overhead);
    return CK_OK;
}

int ck_plan_check_replay(const ck_plan_file *p, const ck_chain *c, const ck_schedule_replayer *exact,
                         uint64_t static_bytes, ck_plan_check *out, ck_err *err)
{
    memset(out, 0, sizeof *out);
    ck_replay plan, base;
    int rc = replay_both(p, c, exact, &plan, &base, err);
    if (rc != CK_OK)
        return rc;
    ck_plan_figures *r = &out->replayed;
    if (!ck_size_add(static_bytes, plan.peak_bytes, &r->peak_bytes) ||
        !ck_size_add(static_bytes, base.peak_bytes, &r->baseline_peak_bytes))
        return ck_err_fail(err, CK_ERR_INPUT, "static memory plus activations exceed 2^64 bytes");
    r->activation_peak_bytes = plan.peak_bytes;
    r->static_bytes = static_bytes;
    r->baseline_activation_peak_bytes = base.peak_bytes;
    r->time = plan.time;
    r->baseline_time = base.time;
    r->overhead = ck_plan_overhead(plan.time, base.time);

    const ck_plan_figures *f = &p->predicted;
    if (p->budget_bytes < r->peak_bytes)
        differ_bytes(out, "budget_bytes", p->budget_bytes, r->peak_bytes);
    compare_bytes(out, "predicted.peak_bytes", f->peak_bytes, r->peak_bytes);
    compare_bytes(out, "predicted.activation_peak_bytes", f->activation_peak_bytes, r->activation_peak_bytes);
    compare_bytes(out, "predicted.static_bytes", f->static_bytes, r->static_bytes);
    compare_bytes(out, "predicted.baseline_peak_bytes", f->baseline_peak_bytes, r->baseline_peak_bytes);
    compare_bytes(out, "predicted.baseline_activation_peak_bytes", f->baseline_activation_peak_bytes,
                  r->baseline_activation_peak_bytes);
    compare_time(out, "predicted.time", f->time, r->time);
    compare_time(out, "predicted.baseline_time", f->baseline_time, r->baseline_time);
    compare_time(out, "predicted.overhead", f->overhead, r->overhead);
    return f->has_every ? check_every(p, c, exact, static_bytes, out, err) : CK_OK;
}

void ck_plan_check_statics(const ck_plan_file *p, const ck_static_mem *s, ck_plan_check *out)
{
    ck_plan_figures *r = &out->replayed;
    r->has_static = true;
    ck_plan_static_of(s, &r->statics);
    for (size_t i = 0; p->predicted.has_static && i < CK_PLAN_STATIC_PARTS; i++)
        compare_bytes(out, ck_plan_static_path(i), p->predicted.statics.bytes[i], r->statics.bytes[i]);
    if (p->has_parameters && p->parameters != s->n_params)
        out->differences[out->n_differences++] = (ck_plan_difference){
            .field = "model.parameters", .is_count = true, .plan_bytes = p->parameters,
            .replayed_bytes = s->n_params};
}

static int stage_differs(const char *path, const char *plan, const char *derived, ck_err *err)
{
    return ck_err_fail(err, CK_ERR_INPUT, "%s: the plan says %s, the model derives %s: the plan was "
                                          "made for other stages; plan it again", path, plan, derived);
}

static void quoted(char *buf, size_t len, const char *s)
{
    snprintf(buf, len, "\"%.60s%s\"", s, strlen(s) > 60 ? "..." : "");
}

static void node_count(char *buf, size_t len, bool has_nodes, size_t n)
{
    if (has_nodes)
        snprintf(buf, len, "%zu node%s", n, n == 1 ? "" : "s");
    else
        snprintf(buf, len, "no nodes");
}

/* Entry i of p's stage_info against stage i of m. */
static int check_stage(const ck_plan_file *p, const ck_plan_stage_map *m, size_t i, ck_err *err)
{
    const ck_plan_stage *s = &p->stage_info[i];
    char entry[CK_JSON_PATH_MAX], path[CK_JSON_PATH_MAX], plan[96], derived[96];
    ck_json_path_index(entry, "stage_info", i);
    const char *name = m->chain->stages[i].name;
    if (strcmp(s->name, name) != 0) {
        ck_json_path_key(path, entry, "name");
        quoted(plan, sizeof plan, s->name);
        quoted(derived, sizeof derived, name);
        return stage_differs(path, plan, derived, err);
    }
    size_t first = m->model ? m->stage_first[i] : 0;
    size_t n = m->model ? m->stage_first[i + 1] - first : 0;
    ck_json_path_key(path, entry, "nodes");
    if (s->has_nodes != (m->model != NULL) || s->n_nodes != n) {
        node_count(plan, sizeof plan, s->has_nodes, s->n_nodes);
        node_count(derived, sizeof derived, m->model != NULL, n);
        return stage_differs(path, plan, derived, err);
    }
    for (size_t k = 0; k < n; k++) {
        const char *node = m->model->nodes[first + k].name;
        if (strcmp(s->nodes[k], node) != 0) {
            char node_path[CK_JSON_PATH_MAX];
            ck_json_path_index(node_path, path, k);
            quoted(plan, sizeof plan, s->nodes[k]);
            quoted(derived, sizeof derived, node);
            return stage_differs(node_path, plan, derived, err);
        }
    }
    return CK_OK;
}

int ck_plan_check_stages(const ck_plan_file *p, const ck_plan_stage_map *m, ck_err *err)
{
    if (p->stages != m->chain->n_stages)
        return ck_err_fail(err, CK_ERR_RUNTIME, "checking stage_info against a chain of %zu stages, "
                                                "the plan has %zu", m->chain->n_stages, p->stages);
    int rc = CK_OK;
    for (size_t i = 0; p->stage_info && i < p->stages && rc == CK_OK; i++)
        rc = check_stage(p, m, i, err);
    return rc;
}

void ck_plan_check_describe(const ck_plan_difference *d, char *buf, size_t len)
{
    if (d->is_time) {
        snprintf(buf, len, "%s: the plan file says %.15g, the replay gives %.15g", d->field,
                 d->plan_time, d->replayed_time);
        return;
    }
    if (d->is_count) {
        snprintf(buf, len, "%s: the plan file says %llu, the model has %llu", d->field,
                 (unsigned long long)d->plan_bytes, (unsigned long long)d->replayed_bytes);
        return;
    }
    char plan[32], replayed[32];
    ck_size_format(d->plan_bytes, plan, sizeof plan);
    ck_size_format(d->replayed_bytes, replayed, sizeof replayed);
    if (strcmp(d->field, "budget_bytes") == 0)
        snprintf(buf, len, "budget_bytes: the plan file says %llu (%s), below the replayed "
                           "peak_bytes of %llu (%s)", (unsigned long long)d->plan_bytes, plan,
                 (unsigned long long)d->replayed_bytes, replayed);
    else
        snprintf(buf, len, "%s: the plan file says %llu (%s), the replay gives %llu (%s)", d->field,
                 (unsigned long long)d->plan_bytes, plan, (unsigned long long)d->replayed_bytes,
                 replayed);
}
