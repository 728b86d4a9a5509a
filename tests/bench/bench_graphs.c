/* The milp planner on Checkmate's training graphs: for each graph, the time at 0.9x and
 * 0.7x the no-rematerialization baseline's peak and at the least budget any schedule can
 * have (the largest node plus its inputs: below it nothing fits), each solve under
 * TIME_LIMIT_S seconds in a child process killed at 1.5 times that plus 10 s (CBC checks its
 * limit only once branch and bound has started), warm-started from the fast planner's
 * schedule when it has one (its ratio is shown too). Every figure is replayed. Prints a
 * Markdown table.
 * usage: bench_graphs TIME_LIMIT_S GRAPH.json... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "planner/graph_milp.h"
#include "planner/graph_planners.h"
#include "planner/json.h"
#include "sim/clock.h"

typedef struct {
    const char *file;
    ck_graph g;
    ck_graph_replay base;
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

/* The least budget of any schedule: the largest node with its inputs. */
static uint64_t least_possible(const ck_graph *g)
{
    uint64_t most = 0;
    for (size_t v = 0; v < g->n_nodes; v++) {
        uint64_t need = g->nodes[v].bytes;
        for (size_t p = 0; p < g->nodes[v].n_inputs; p++)
            need += g->nodes[g->nodes[v].inputs[p]].bytes;
        most = need > most ? need : most;
    }
    return most;
}

/* One row: milp at budget, in this process (a child). */
static void plan_at(const bench_graph *b, const char *label, uint64_t budget, double limit)
{
    ck_graph_plan_result r;
    ck_graph_replay rp = {0};
    ck_err err = {{0}};
    uint64_t min_budget;
    ck_graph_plan_result fast;
    ck_graph_replay fast_rp = {0};
    ck_graph_planner_opts none = {0};
    bool warm = ck_graph_planners_run(&b->g, &ck_graph_planner_fast, budget, &none, &fast, &fast_rp,
                                      &min_budget, &err) == CK_OK;
    ck_graph_planner_opts opts = {.time_limit_s = limit, .warm_start = warm ? &fast.schedule : NULL};
    char fast_ratio[32] = "none";
    if (warm)
        snprintf(fast_ratio, sizeof fast_ratio, "%.4f", fast_rp.time / b->base.time);
    double start = ck_clock_seconds();
    int rc = ck_graph_planner_milp.plan(&b->g, budget, &opts, &r, &min_budget, &err);
    double wall = ck_clock_seconds() - start;
    if (rc == CK_OK && ck_graph_replay_schedule(&b->g, &r.schedule, &rp, &err) != CK_OK)
        abort();
    if (rc == CK_OK)
        printf("| %s | %s | %llu | %s | %.4f | %.4f | %.1f | %s | %.2f%% |\n", base_name(b->file),
               label, (unsigned long long)budget, fast_ratio, rp.time / b->base.time,
               (double)rp.peak_bytes / (double)budget, wall, r.status, 100 * r.gap);
    else
        printf("| %s | %s | %llu | %s | | | %.1f | %s | |\n", base_name(b->file), label,
               (unsigned long long)budget, fast_ratio, wall, err.msg);
    fflush(stdout);
    ck_graph_schedule_free(&r.schedule);
    ck_graph_plan_result_free(&fast);
}

/* plan_at in a child killed by SIGALRM at the hard limit; a row either way. */
static void plan_bounded(const bench_graph *b, const char *label, uint64_t budget, double limit)
{
    unsigned hard = (unsigned)(1.5 * limit) + 10;
    double start = ck_clock_seconds();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(hard);
        plan_at(b, label, budget, limit);
        _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        abort();
    if (WIFSIGNALED(status))
        printf("| %s | %s | %llu | | | | %.1f | %s | |\n", base_name(b->file), label,
               (unsigned long long)budget, ck_clock_seconds() - start,
               WTERMSIG(status) == SIGALRM ? "killed at the hard limit (CBC overran its own)"
                                           : strsignal(WTERMSIG(status)));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_graphs TIME_LIMIT_S GRAPH.json...\n");
        return 2;
    }
    double limit = atof(argv[1]);
    printf("| graph | budget | bytes | fast: time / baseline | milp: time / baseline | peak / budget"
           " | wall s | status | gap |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 2; i < argc; i++) {
        bench_graph b = {.file = argv[i]};
        ck_err err;
        if (load(&b, &err) != CK_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        uint64_t p = b.base.peak_bytes;
        plan_bounded(&b, "0.9x", (uint64_t)(0.9 * (double)p), limit);
        plan_bounded(&b, "0.7x", (uint64_t)(0.7 * (double)p), limit);
        uint64_t least = least_possible(&b.g);
        char label[32];
        snprintf(label, sizeof label, "%.4fx", (double)least / (double)p);
        plan_bounded(&b, label, least, limit);
        ck_graph_free(&b.g);
    }
    return 0;
}
