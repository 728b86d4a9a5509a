/* The milp planner on Checkmate's training graphs. For each graph: the least budget at which
 * milp finds a schedule, by bisection between 0 and the no-rematerialization baseline's
 * peak (each probe under PROBE_S seconds; a probe that ends without an answer counts as
 * infeasible, and is reported), then the time at 0.9x and 0.7x the baseline's peak and at
 * that least budget, under TIME_LIMIT_S seconds each, warm-started from the least budget's
 * schedule where it fits. Every figure is replayed. Prints Markdown tables.
 * usage: bench_graphs TIME_LIMIT_S PROBE_S GRAPH.json... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/graph_milp.h"
#include "planner/json.h"
#include "sim/clock.h"

typedef struct {
    const char *file;
    ck_graph g;
    ck_graph_replay base;
    ck_graph_schedule least; /* the schedule of the least budget found */
    uint64_t lo, hi;         /* below lo: no schedule; hi: the least budget found */
    unsigned probes, unknown;
} bench_graph;

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int load(bench_graph *b, ck_err *err)
{
    cJSON *root = NULL;
    char *raw = NULL;
    size_t len = 0;
    ck_graph_schedule s = {0};
    int rc = ck_json_load_file(b->file, &root, &raw, &len, err);
    if (rc == CK_OK)
        rc = ck_graph_from_checkmate(root, b->file, &b->g, err);
    if (rc == CK_OK)
        rc = ck_graph_schedule_baseline(&b->g, &s, err);
    if (rc == CK_OK)
        rc = ck_graph_replay_schedule(&b->g, &s, &b->base, err);
    cJSON_Delete(root);
    free(raw);
    ck_graph_schedule_free(&s);
    return rc;
}

/* Bisection to 0.1% of the baseline's peak. */
static void least_budget(bench_graph *b, double probe_s)
{
    ck_graph_planner_opts opts = {.time_limit_s = probe_s};
    uint64_t step = b->base.peak_bytes / 1000;
    double start = ck_clock_seconds();
    b->lo = 0;
    b->hi = b->base.peak_bytes;
    if (ck_graph_schedule_baseline(&b->g, &b->least, NULL) != CK_OK)
        abort();
    while (b->hi - b->lo > step) {
        uint64_t mid = b->lo + (b->hi - b->lo) / 2, min_budget;
        ck_graph_plan_result r;
        ck_graph_replay rp;
        ck_err err;
        int rc = ck_graph_planner_milp.plan(&b->g, mid, &opts, &r, &min_budget, &err);
        b->probes++;
        if (rc == CK_OK) {
            if (ck_graph_replay_schedule(&b->g, &r.schedule, &rp, NULL) != CK_OK)
                abort();
            ck_graph_schedule_free(&b->least);
            b->least = r.schedule;
            b->hi = rp.peak_bytes;
        } else {
            b->unknown += rc != CK_ERR_INFEASIBLE;
            b->lo = mid + 1;
        }
    }
    printf("| %s | %zu | %.4f | %.4f | %u | %u | %.1f |\n", base_name(b->file), b->g.n_nodes,
           (double)b->lo / (double)b->base.peak_bytes, (double)b->hi / (double)b->base.peak_bytes,
           b->probes, b->unknown, ck_clock_seconds() - start);
    fflush(stdout);
}

static void plan_at(const bench_graph *b, const char *label, uint64_t budget, double limit)
{
    ck_graph_plan_result r;
    ck_graph_replay rp = {0};
    ck_err err = {{0}};
    uint64_t min_budget;
    ck_graph_planner_opts opts = {.time_limit_s = limit,
                                  .warm_start = b->hi <= budget ? &b->least : NULL};
    double start = ck_clock_seconds();
    int rc = ck_graph_planner_milp.plan(&b->g, budget, &opts, &r, &min_budget, &err);
    double wall = ck_clock_seconds() - start;
    if (rc == CK_OK && ck_graph_replay_schedule(&b->g, &r.schedule, &rp, &err) != CK_OK)
        abort();
    if (rc == CK_OK)
        printf("| %s | %s | %llu | %.4f | %.4f | %.1f | %s | %.2f%% |\n", base_name(b->file), label,
               (unsigned long long)budget, rp.time / b->base.time,
               (double)rp.peak_bytes / (double)budget, wall, r.status, 100 * r.gap);
    else
        printf("| %s | %s | %llu | | | %.1f | %s | |\n", base_name(b->file), label,
               (unsigned long long)budget, wall, err.msg);
    fflush(stdout);
    ck_graph_schedule_free(&r.schedule);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_graphs TIME_LIMIT_S PROBE_S GRAPH.json...\n");
        return 2;
    }
    double limit = atof(argv[1]), probe = atof(argv[2]);
    size_t n = (size_t)argc - 3;
    bench_graph *b = calloc(n, sizeof *b);
    ck_err err;
    for (size_t i = 0; i < n; i++) {
        b[i].file = argv[i + 3];
        if (load(&b[i], &err) != CK_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
    }
    printf("Least budget (ratios to the baseline's peak): no schedule below `from`, one at `to`;\n"
           "`unknown`: probes that ran out of time, counted as infeasible.\n\n");
    printf("| graph | nodes | from | to | probes | unknown | wall s |\n|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++)
        least_budget(&b[i], probe);
    printf("\nTime at each budget (ratios to the baseline's time and to the budget):\n\n");
    printf("| graph | budget | bytes | time / baseline | peak / budget | wall s | status | gap |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++) {
        uint64_t p = b[i].base.peak_bytes;
        plan_at(&b[i], "0.9x", (uint64_t)(0.9 * (double)p), limit);
        plan_at(&b[i], "0.7x", (uint64_t)(0.7 * (double)p), limit);
        plan_at(&b[i], "least", b[i].hi, limit);
        ck_graph_schedule_free(&b[i].least);
        ck_graph_free(&b[i].g);
    }
    free(b);
    return 0;
}
