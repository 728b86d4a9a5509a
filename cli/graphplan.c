#include "cli/graphplan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/files.h"
#include "cli/human.h"
#include "cli/interrupt.h"
#include "cli/main.h"
#include "cli/runner.h"
#include "planner/graph_plan.h"
#include "planner/graph_planners.h"
#include "planner/json.h"
#include "planner/sha256.h"
#include "planner/size.h"

/* *root: the parsed document at path when it is a regular file that parses, else NULL.
 * Running out of memory is an error (CK_ERR_RUNTIME); any other failure is for whoever
 * loads the file next to report. */
static int try_parse(const char *path, cJSON **root, ck_err *err)
{
    struct stat st;
    *root = NULL;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return CK_OK;
    int rc = ck_json_load_file(path, root, NULL, NULL, err);
    return rc == CK_ERR_RUNTIME ? rc : CK_OK;
}

int ck_graphplan_is_graph_file(const char *path, bool *yes, ck_err *err)
{
    cJSON *root;
    int rc = try_parse(path, &root, err);
    *yes = root && ck_graph_is_checkmate(root);
    cJSON_Delete(root);
    return rc;
}

int ck_graphplan_is_graph_plan(const char *path, bool *yes, ck_err *err)
{
    cJSON *root;
    int rc = try_parse(path, &root, err);
    *yes = root && ck_graph_plan_is_graph(root);
    cJSON_Delete(root);
    return rc;
}

int ck_graphplan_load(const char *path, ck_graph *g, char *sha256, ck_err *err)
{
    cJSON *root = NULL;
    char *raw = NULL;
    size_t len = 0;
    int rc = ck_json_load_file(path, &root, &raw, &len, err);
    if (rc != CK_OK)
        return rc;
    ck_sha256_hex(raw, len, sha256);
    free(raw);
    rc = ck_graph_from_checkmate(root, path, g, err);
    cJSON_Delete(root);
    return rc;
}

/* ---- plan ---- */

/* The registry's graph planners, comma separated, into list; with telling_only, those that
 * tell their smallest budget. */
static void planner_names(char *list, size_t size, bool telling_only)
{
    size_t used = 0;
    list[0] = '\0';
    for (const ck_graph_planner *const *p = ck_graph_planners; *p; p++)
        if (!telling_only || (*p)->tells_min_budget)
            used += (size_t)snprintf(list + used, used < size ? size - used : 0, "%s%s",
                                     used ? ", " : "", (*p)->name);
}

/* --min-budget with a planner that cannot say it: a usage error, before any work. */
static int refuse_min_budget(const ck_graph_planner *planner, ck_err *err)
{
    char list[256];
    planner_names(list, sizeof list, true);
    return ck_err_fail(err, CK_ERR_INPUT, "--min-budget: planner %s does not tell its smallest "
                       "budget (%s do)", planner->name, list);
}

static int find_planner(const char *name, const ck_graph_planner **out, ck_err *err)
{
    *out = name ? ck_graph_planners_find(name) : ck_graph_planners[0];
    if (*out)
        return CK_OK;
    char list[256];
    planner_names(list, sizeof list, false);
    return ck_err_fail(err, CK_ERR_INPUT, "--planner: no graph planner '%s' (%s)", name, list);
}

/* What one graph is planned with: the graph, its baseline, the planner, and for a model the
 * memory the graph leaves out. */
typedef struct {
    ck_graph g;
    char sha[65];
    ck_graph_replay baseline;
    const ck_graph_planner *planner;
    uint64_t static_bytes;
} graph_job;

/* A model's graph, taken over from its workload (--granularity node). */
static int load_model_graph(const char *path, const ck_workload_opts *opts, graph_job *j,
                            ck_err *err)
{
    ck_workload w;
    int rc = ck_workload_load(path, opts, &w, err);
    if (rc != CK_OK)
        return rc;
    j->g = *w.graph;
    *w.graph = (ck_graph){0};
    j->static_bytes = w.graph_static_bytes;
    memcpy(j->sha, w.sha256, sizeof j->sha);
    ck_workload_free(&w);
    return CK_OK;
}

static int load_job(const ck_graphplan_args *a, graph_job *j, ck_err *err)
{
    memset(j, 0, sizeof *j);
    int rc = find_planner(a->planner, &j->planner, err);
    if (rc == CK_OK && a->min_budget && !j->planner->tells_min_budget)
        return refuse_min_budget(j->planner, err);
    if (rc == CK_OK && a->workload)
        rc = load_model_graph(a->graph_path, a->workload, j, err);
    else if (rc == CK_OK)
        rc = ck_graphplan_load(a->graph_path, &j->g, j->sha, err);
    if (rc != CK_OK)
        return rc;
    ck_graph_schedule base;
    rc = ck_graph_schedule_baseline(&j->g, &base, err);
    if (rc == CK_OK) rc = ck_graph_replay_schedule(&j->g, &base, &j->baseline, err);
    ck_graph_schedule_free(&base);
    return rc;
}

/* The planner's smallest budget: what it says when given none. */
static int min_budget_of(const graph_job *j, const ck_graph_planner_opts *opts, uint64_t *out,
                         ck_err *err)
{
    ck_graph_plan_result res;
    ck_graph_replay r;
    *out = 0;
    int rc = ck_graph_planners_run(&j->g, j->planner, 0, opts, &res, &r, out, err);
    ck_graph_plan_result_free(&res);
    if (rc == CK_OK) /* a graph whose nodes hold nothing fits in 0 bytes */
        *out = r.peak_bytes;
    if (rc == CK_OK || (rc == CK_ERR_INFEASIBLE && *out))
        *out = ck_planner_step_budget(j->static_bytes, *out);
    if (rc == CK_ERR_INFEASIBLE && *out == 0)
        return ck_err_fail(err, CK_ERR_RUNTIME, "planner %s does not tell its smallest budget",
                           j->planner->name);
    return rc == CK_ERR_INFEASIBLE ? CK_OK : rc;
}

static void report_infeasible(const ck_graphplan_args *a, const graph_job *j, uint64_t min)
{
    char have[32], need[32];
    ck_size_format(a->budget, have, sizeof have);
    ck_size_format(min, need, sizeof need);
    fputs("ckplan: ", stderr);
    ck_human_put_terminal_text(stderr, a->graph_path);
    fprintf(stderr, ": budget %s (%llu bytes) is too small for planner %s", have,
            (unsigned long long)a->budget, j->planner->name);
    if (min)
        fprintf(stderr, ": its smallest plan needs %s\nsmallest feasible budget: %llu bytes\n", need,
                (unsigned long long)min);
    else
        fputs(" (it does not tell its smallest budget)\n", stderr);
}

/* The fast planner's schedule at the budget, for a planner that starts from one; empty
 * when it finds none. */
static int warm_start(const graph_job *j, uint64_t budget, const ck_graph_planner_opts *opts,
                      ck_graph_plan_result *warm, ck_err *err)
{
    ck_graph_replay r;
    uint64_t min = 0;
    ck_graph_plan_result_init(warm);
    if (j->planner == &ck_graph_planner_fast)
        return CK_OK;
    int rc = ck_graph_planners_run(&j->g, &ck_graph_planner_fast, budget, opts, warm, &r, &min, err);
    /* none found, or one past the schedule length limit: the planner starts without one */
    bool none = rc == CK_ERR_INFEASIBLE || rc == CK_ERR_INPUT;
    if (none)
        ck_graph_plan_result_free(warm);
    return none ? CK_OK : rc;
}

static void print_summary(FILE *out, const ck_graphplan_args *a, const graph_job *j,
                          const ck_graph_plan_result *res, const ck_graph_replay *r)
{
    const ck_graph *g = &j->g;
    char statics[32];
    ck_size_format(j->static_bytes, statics, sizeof statics);
    char budget[32], peak[32], base[32];
    ck_size_format(a->budget, budget, sizeof budget);
    ck_size_format(r->peak_bytes, peak, sizeof peak);
    ck_size_format(j->baseline.peak_bytes, base, sizeof base);
    ck_human_put_terminal_text(out, g->name); /* names from the input: shown, never obeyed */
    fputs(" (", out);
    ck_human_put_terminal_text(out, a->graph_path);
    fprintf(out, "): a graph of %zu nodes (%zu forward, %zu backward), planned node by node\n",
            g->n_nodes, g->loss, g->n_nodes - g->loss);
    fprintf(out, "planner %s, budget %s (%llu bytes)", j->planner->name, budget,
            (unsigned long long)a->budget);
    if (a->workload)
        fprintf(out, ", static memory %s of it (parameters, gradients, optimizer state, "
                "inputs)", statics);
    fputs("\n\n", out);
    fprintf(out, "  %-13s %12s %12s\n", "", "plan", "baseline");
    fprintf(out, "  %-13s %12s %12s   peak of the replayed schedule (%llu bytes)\n", "activations",
            peak, base, (unsigned long long)r->peak_bytes);
    fprintf(out, "  %-13s %12.6g %12.6g   %+.2f%% overhead (in the graph's cost unit)\n\n", "cost",
            r->time, j->baseline.time, 100 * ck_plan_overhead(r->time, j->baseline.time));
    fprintf(out, "computes: %zu for %zu nodes (%zu recomputed)\n", r->computes, g->n_nodes,
            r->computes - g->n_nodes);
    if (res->status)
        fprintf(out, "status: %s", res->status);
    if (res->status && isfinite(res->bound))
        fprintf(out, ", bound %.6g", res->bound);
    if (res->status && isfinite(res->gap))
        fprintf(out, ", gap %.4f%%", 100 * res->gap);
    if (res->status)
        fputc('\n', out);
    fprintf(out, "plan written to %s\n", a->output);
}

/* The plan file's text for the planned result; NULL when out of memory. */
static char *plan_text(const ck_graphplan_args *a, const graph_job *j,
                       const ck_graph_plan_result *res, const ck_graph_replay *r)
{
    ck_graph_plan_doc d = {
        .planner = j->planner->name, .model_path = a->graph_path, .model_sha256 = j->sha,
        .budget_bytes = a->budget, .graph = &j->g, .result = res, .predicted = *r,
        .baseline = j->baseline, .time_limit_s = a->time_limit_s,
        .static_bytes = j->static_bytes, .granularity = a->workload ? "node" : NULL,
        .model_opts = a->workload ? &a->workload->model : NULL,
    };
    cJSON *doc = ck_graph_plan_to_json(&d);
    char *text = doc ? ck_json_print(doc) : NULL;
    cJSON_Delete(doc);
    return text;
}

/* Writes the plan (atomically) and prints it or its summary. */
static int write_plan(const ck_graphplan_args *a, const graph_job *j,
                      const ck_graph_plan_result *res, const ck_graph_replay *r, ck_err *err)
{
    char *text = plan_text(a, j, res, r);
    int rc = text ? ck_interrupt_check(err) : ck_err_oom(err);
    if (rc == CK_OK) rc = ck_json_check_output_size(a->output, strlen(text), err);
    if (rc == CK_OK) rc = ck_files_write_atomic(a->output, text, strlen(text), err);
    if (rc == CK_OK && a->json)
        fputs(text, stdout);
    else if (rc == CK_OK)
        print_summary(stdout, a, j, res, r);
    free(text);
    return rc;
}

/* Refuses, before any search, a graph whose plan cannot fit the input limit: every plan
 * computes each node at least once, so the plan of that schedule alone (every figure as
 * long as the baseline's) is a lower bound on the file's size, up to the digits of the
 * figures, for which SLACK is kept. Plans that recompute much are bounded by the schedule
 * length limit inside the planner (planner/graph_fast.c). */
#define FIGURES_SLACK 256
static int check_plan_fits(const ck_graphplan_args *a, const graph_job *j, ck_err *err)
{
    ck_graph_plan_result least;
    ck_graph_plan_result_init(&least);
    int rc = CK_OK;
    for (size_t v = 0; v < j->g.n_nodes && rc == CK_OK; v++)
        if (!ck_graph_schedule_push(&least.schedule, CK_GRAPH_COMPUTE, v))
            rc = ck_err_oom(err);
    char *text = rc == CK_OK ? plan_text(a, j, &least, &j->baseline) : NULL;
    if (rc == CK_OK && !text)
        rc = ck_err_oom(err);
    size_t len = text ? strlen(text) : 0;
    if (rc == CK_OK)
        rc = ck_json_check_output_size(a->output, len > FIGURES_SLACK ? len - FIGURES_SLACK : 0, err);
    if (rc == CK_ERR_INPUT) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        ck_err_fail(err, rc, "%s (at the least, with each of the graph's %zu nodes computed once: "
                    "refused before planning)", why, j->g.n_nodes);
    }
    free(text);
    ck_graph_plan_result_free(&least);
    return rc;
}

static int plan_job(const ck_graphplan_args *a, const graph_job *j, ck_err *err)
{
    ck_graph_planner_opts opts = {.time_limit_s = a->time_limit_s, .stop = ck_interrupt_flag()};
    uint64_t min = 0, budget = 0;
    if (a->min_budget) {
        int rc = min_budget_of(j, &opts, &min, err);
        if (rc == CK_OK)
            printf("%llu\n", (unsigned long long)min);
        return rc;
    }
    ck_graph_plan_result warm, res;
    ck_graph_replay r;
    bool room = ck_planner_activation_budget(a->budget, j->static_bytes, &budget);
    int rc = check_plan_fits(a, j, err);
    if (rc != CK_OK)
        return rc;
    rc = warm_start(j, budget, &opts, &warm, err);
    opts.warm_start = warm.schedule.n ? &warm.schedule : NULL;
    if (rc == CK_OK)
        rc = ck_graph_planners_run(&j->g, j->planner, budget, &opts, &res, &r, &min, err);
    else
        ck_graph_plan_result_init(&res);
    if (rc == CK_OK && !room) /* the graph fits in 0 bytes, the static memory does not */
        rc = CK_ERR_INFEASIBLE;
    if (rc == CK_ERR_INFEASIBLE)
        report_infeasible(a, j, min || !room ? ck_planner_step_budget(j->static_bytes, min) : 0);
    if (rc == CK_OK)
        rc = write_plan(a, j, &res, &r, err);
    ck_graph_plan_result_free(&res);
    ck_graph_plan_result_free(&warm);
    return rc;
}

int ck_graphplan_plan(const ck_graphplan_args *a)
{
    ck_err err = {{0}};
    graph_job j;
    int rc = load_job(a, &j, &err);
    if (rc == CK_OK)
        rc = plan_job(a, &j, &err);
    ck_graph_free(&j.g);
    return rc == CK_ERR_INFEASIBLE ? rc : ck_main_report(rc, err.msg);
}

/* ---- run: replay ---- */

/* Prints one figure of the plan file that the replay contradicts; counts it. */
static void differs(const char *label, const char *field, double file, double replayed, size_t *n)
{
    if (file == replayed)
        return;
    fputs("ckplan: ", stderr);
    ck_human_put_terminal_text(stderr, label);
    fprintf(stderr, ": %s: the plan file says %.17g, the replay gives %.17g\n", field, file, replayed);
    (*n)++;
}

/* The plan file's figures against the replays: how many differ (each printed). */
static size_t compare_figures(const char *label, const ck_graph_plan_file *p, const ck_graph_replay *r,
                              const ck_graph_replay *base)
{
    ck_plan_figures want;
    ck_graph_plan_figures(r, base, p->predicted.static_bytes, &want);
    const ck_plan_figures *f = &p->predicted;
    size_t n = 0;
    differs(label, "predicted.peak_bytes", (double)f->peak_bytes, (double)want.peak_bytes, &n);
    differs(label, "predicted.activation_peak_bytes", (double)f->activation_peak_bytes,
            (double)want.activation_peak_bytes, &n);
    differs(label, "predicted.time", f->time, want.time, &n);
    differs(label, "predicted.baseline_time", f->baseline_time, want.baseline_time, &n);
    differs(label, "predicted.baseline_peak_bytes", (double)f->baseline_peak_bytes,
            (double)want.baseline_peak_bytes, &n);
    differs(label, "predicted.baseline_activation_peak_bytes",
            (double)f->baseline_activation_peak_bytes, (double)want.baseline_activation_peak_bytes, &n);
    differs(label, "predicted.overhead", f->overhead, want.overhead, &n);
    if (p->budget_bytes < want.peak_bytes)
        differs(label, "budget_bytes (at least the replayed peak)", (double)p->budget_bytes,
                (double)want.peak_bytes, &n);
    return n;
}

/* The graph of a model planned with --granularity node, loaded as it was planned; its
 * static memory must be the plan's. */
static int load_node_graph(const char *plan_path, const char *path, const ck_graph_plan_file *p,
                           ck_graph *g, char *sha, ck_err *err)
{
    ck_workload_opts opts;
    ck_workload_opts_default(&opts);
    opts.granularity = CK_GRAN_NODE;
    opts.graphs = true;
    opts.model = p->model_opts;
    graph_job j = {0};
    int rc = load_model_graph(path, &opts, &j, err);
    *g = j.g;
    memcpy(sha, j.sha, sizeof j.sha);
    if (rc == CK_OK && j.static_bytes != p->predicted.static_bytes)
        rc = ck_err_fail(err, CK_ERR_RUNTIME, "%s: predicted.static_bytes: the plan file says %llu, "
                         "the model's graph leaves out %llu", plan_path,
                         (unsigned long long)p->predicted.static_bytes,
                         (unsigned long long)j.static_bytes);
    return rc;
}

/* The graph the plan names, checked to be the one planned. */
static int load_plan_graph(const char *plan_path, const ck_graph_plan_file *p, ck_graph *g,
                           ck_err *err)
{
    char *path = ck_runner_plan_relative(plan_path, p->model_path), sha[65];
    if (!path)
        return ck_err_oom(err);
    int rc = p->granularity ? load_node_graph(plan_path, path, p, g, sha, err)
                            : ck_graphplan_load(path, g, sha, err);
    if (rc == CK_OK && !p->granularity && p->predicted.static_bytes != 0)
        rc = ck_err_fail(err, CK_ERR_RUNTIME, "%s: predicted.static_bytes: the plan file says %llu, "
                         "a Checkmate graph has none", plan_path,
                         (unsigned long long)p->predicted.static_bytes);
    if (rc == CK_OK && strcmp(sha, p->model_sha256) != 0)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: model.sha256: %s is not the graph planned: its "
                         "sha256 is %s, the plan's %s (plan it again)", plan_path, path, sha,
                         p->model_sha256);
    if (rc == CK_OK && g->n_nodes != p->nodes)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: nodes: the plan says %zu, %s has %zu", plan_path,
                         p->nodes, path, g->n_nodes);
    free(path);
    return rc;
}

static int replay_plan(const char *plan_path, const ck_graph_plan_file *p, const ck_graph *g,
                       bool quiet, ck_err *err)
{
    ck_graph_replay r, base;
    ck_graph_schedule bs;
    ck_err why;
    if (ck_graph_replay_schedule(g, &p->schedule, &r, &why) != CK_OK)
        return ck_err_fail(err, CK_ERR_RUNTIME, "%s: the schedule does not replay: %s", plan_path,
                           why.msg);
    int rc = ck_graph_schedule_baseline(g, &bs, err);
    if (rc == CK_OK) rc = ck_graph_replay_schedule(g, &bs, &base, err);
    ck_graph_schedule_free(&bs);
    if (rc != CK_OK)
        return rc;
    size_t n = compare_figures(plan_path, p, &r, &base);
    if (n)
        return ck_err_fail(err, CK_ERR_RUNTIME, "%s: %zu figure%s of the plan file differ%s from "
                           "its replay", plan_path, n, n == 1 ? "" : "s", n == 1 ? "s" : "");
    if (!quiet) {
        char peak[32];
        ck_size_format(r.peak_bytes, peak, sizeof peak);
        ck_human_put_terminal_text(stdout, plan_path);
        printf(": a graph plan (%s, %zu nodes): replayed, not executed (a graph has no kernels)\n"
               "valid: every node computed, each input resident when read; peak %s (%llu bytes), "
               "cost %.6g (%+.2f%% over the baseline's %.6g), %zu computes\n"
               "the plan file's figures are the replay's\n",
               p->planner, g->n_nodes, peak, (unsigned long long)r.peak_bytes, r.time,
               100 * ck_plan_overhead(r.time, base.time), base.time, r.computes);
    }
    return CK_OK;
}

int ck_graphplan_run(const char *plan_path, bool quiet)
{
    ck_err err = {{0}};
    cJSON *root = NULL;
    ck_graph_plan_file p = {0};
    ck_graph g = {0};
    int rc = ck_json_load_file(plan_path, &root, NULL, NULL, &err);
    if (rc == CK_OK) rc = ck_graph_plan_from_json(root, plan_path, &p, &err);
    if (rc == CK_OK) rc = load_plan_graph(plan_path, &p, &g, &err);
    if (rc == CK_OK) rc = replay_plan(plan_path, &p, &g, quiet, &err);
    ck_graph_free(&g);
    ck_graph_plan_file_free(&p);
    cJSON_Delete(root);
    return ck_main_report(rc, err.msg);
}
