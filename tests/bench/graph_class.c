/* How often Checkmate's class of schedules (the one milp is exact over) misses the optimum
 * of all schedules, on small random graphs, by the exhaustive searches of
 * tests/unit/graph_brute.c: every budget from the least peak of all schedules to the
 * baseline's peak. Prints one Markdown paragraph.
 * usage: graph_class GRAPHS SEED */
#include <stdio.h>
#include <stdlib.h>

#include "tests/unit/graph_brute.h"
#include "tests/unit/graphgen.h"

typedef struct {
    unsigned long points, only_outside, faster_outside, graphs;
    double worst;
} tally;

static void count_graph(const ck_graph *g, tally *t)
{
    ck_err err;
    ck_graph_schedule s = {0};
    ck_graph_replay base;
    uint64_t least;
    if (ck_graph_schedule_baseline(g, &s, &err) != CK_OK ||
        ck_graph_replay_schedule(g, &s, &base, &err) != CK_OK ||
        ck_graph_brute_min_peak(g, CK_GRAPH_BRUTE_ALL, &least, &err) != CK_OK)
        abort();
    ck_graph_schedule_free(&s);
    bool missed = false;
    for (uint64_t b = least; b <= base.peak_bytes; b++) {
        double all, staged;
        if (ck_graph_brute_best(g, CK_GRAPH_BRUTE_ALL, b, &all, &err) != CK_OK)
            abort();
        t->points++;
        if (ck_graph_brute_best(g, CK_GRAPH_BRUTE_STAGED, b, &staged, &err) != CK_OK) {
            t->only_outside++;
            missed = true;
        } else if (all < staged) {
            t->faster_outside++;
            missed = true;
            t->worst = (staged - all) / all > t->worst ? (staged - all) / all : t->worst;
        }
    }
    t->graphs += missed;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: graph_class GRAPHS SEED\n");
        return 2;
    }
    unsigned long n = strtoul(argv[1], NULL, 10);
    ck_rng rng;
    ck_rng_seed(&rng, strtoull(argv[2], NULL, 10));
    tally t = {0};
    for (unsigned long k = 0; k < n; k++) {
        ck_graph g;
        ck_err err;
        if (ck_graphgen_random(&g, 3 + k % 3, 8, &rng, &err) != CK_OK)
            abort();
        count_graph(&g, &t);
        ck_graph_free(&g);
    }
    printf("On %lu random graphs of 6 to 10 nodes (`ck_graphgen_random`, seed %s) and every budget\n"
           "from the least peak of any schedule to the baseline's peak (%lu points), schedules\n"
           "outside Checkmate's class do better at %lu points of %lu graphs: at %lu only they fit,\n"
           "at %lu they are faster, by up to %.1f%%.\n",
           n, argv[2], t.points, t.only_outside + t.faster_outside, t.graphs, t.only_outside,
           t.faster_outside, 100 * t.worst);
    return 0;
}
