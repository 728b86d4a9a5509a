/* emit_megatron: Megatron-LM's full recomputation flags. Megatron checkpoints whole
 * transformer layers in one of two ways: `--recompute-method block
 * --recompute-num-layers N` checkpoints the first N layers each on its own (keeping each
 * one's input), `uniform` the layers in consecutive groups of N (keeping each group's
 * input, recomputing the group whole). Each setting is a schedule on the plan's chain
 * (ck_layers_segments_schedule); the plan is expressed when one of them is its schedule,
 * and otherwise the closest one is found by replaying them all. */
#include <stdlib.h>

#include "cli/emit.h"
#include "cli/interrupt.h"

typedef enum { NO_RECOMPUTE, BLOCK, UNIFORM } method;

typedef struct {
    method how;
    size_t layers; /* --recompute-num-layers */
} flags;

/* The schedule of flags f: its segments, in stages, are the layers it checkpoints, alone
 * (block) or in groups (uniform). */
static int flags_schedule(const ck_emit_input *in, flags f, ck_schedule *out, ck_err *err)
{
    const ck_layers *l = in->layers;
    size_t *first = malloc((l->n_layers + 1) * sizeof *first);
    size_t *end = malloc((l->n_layers + 1) * sizeof *end);
    size_t n = 0;
    if (!first || !end) {
        free(first);
        free(end);
        return ck_err_oom(err);
    }
    size_t group = f.how == UNIFORM ? f.layers : 1;
    size_t until = f.how == BLOCK ? f.layers : f.how == UNIFORM ? l->n_layers : 0;
    for (size_t k = 0; k < until; k += group, n++) {
        size_t last = k + group < until ? k + group - 1 : until - 1;
        first[n] = l->first[k];
        end[n] = l->end[last];
    }
    int rc = ck_layers_segments_schedule(&in->w->chain, first, end, n, out, err);
    free(first);
    free(end);
    return rc;
}

typedef struct {
    flags f;
    ck_emit_figures fig;
    bool exact; /* its schedule is the plan's */
} candidate;

/* Whether a is closer to the plan than b: exactly it; else fitting the budget, then the
 * faster (fitting) or the smaller peak (neither fitting); ties to the fewer flags. */
static bool closer(const candidate *a, const candidate *b)
{
    if (a->exact != b->exact)
        return a->exact;
    if (a->fig.fits != b->fig.fits)
        return a->fig.fits;
    if (a->fig.fits && a->fig.time != b->fig.time)
        return a->fig.time < b->fig.time;
    if (a->fig.activation_peak_bytes != b->fig.activation_peak_bytes)
        return a->fig.activation_peak_bytes < b->fig.activation_peak_bytes;
    return a->fig.time < b->fig.time;
}

/* Flags f as a candidate, its figures the exact replay's (ck_emit_replay: the program's,
 * some ten times the chain's cost). With best given, *out->considered is false, and that
 * replay skipped, when the chain's replay already shows f cannot be closer than best: a
 * fitting best that f's time (the chain's and the program's alike) does not beat. */
static int evaluate(const ck_emit_input *in, flags f, const candidate *best, candidate *out,
                    bool *considered, ck_err *err)
{
    ck_schedule s;
    int rc = flags_schedule(in, f, &s, err);
    if (rc != CK_OK)
        return rc;
    out->f = f;
    out->exact = ck_layers_same_schedule(&s, &in->plan->schedule);
    ck_replay chain;
    *considered = true;
    if (best && !out->exact && best->fig.fits &&
        (rc = ck_schedule_replay(&in->w->chain, &s, &chain, NULL, NULL, err)) == CK_OK)
        *considered = !best->exact && chain.time <= best->fig.time;
    if (rc == CK_OK && *considered)
        rc = ck_emit_replay(in, &s, &out->fig, err);
    ck_schedule_free(&s);
    return rc;
}

/* The closest of all settings: no recomputation, block 1..n, uniform 2..n (uniform 1 is
 * block n). Each is a replay of the whole chain (for 10,000 layers some 15 s), and of
 * its program where it may be the closest, so a signal is polled between them. */
static int closest(const ck_emit_input *in, candidate *best, ck_err *err)
{
    size_t n = in->layers->n_layers;
    bool considered;
    int rc = evaluate(in, (flags){NO_RECOMPUTE, 0}, NULL, best, &considered, err);
    for (size_t k = 1; rc == CK_OK && k <= 2 * n; k++) {
        flags f = k <= n ? (flags){BLOCK, k} : (flags){UNIFORM, k - n};
        candidate c;
        if (f.how == UNIFORM && f.layers < 2)
            continue;
        if ((rc = ck_interrupt_check(err)) != CK_OK)
            break;
        rc = evaluate(in, f, best, &c, &considered, err);
        if (rc == CK_OK && considered && closer(&c, best))
            *best = c;
    }
    return rc;
}

/* The flags; with partitioned checkpoints, Megatron's own (docs/parallel.md: it makes the
 * shard after the layers' forward, DeepSpeed's before it, so its peak is at most the one
 * replayed). */
static void put_flags(FILE *out, flags f, bool partition)
{
    if (f.how == NO_RECOMPUTE)
        fputs("# no recomputation: pass none of the --recompute-* flags\n", out);
    else
        fprintf(out, "--recompute-granularity full --recompute-method %s --recompute-num-layers %zu%s\n",
                f.how == BLOCK ? "block" : "uniform", f.layers,
                partition ? " --distribute-saved-activations" : "");
}

int ck_emit_megatron(FILE *out, const ck_emit_input *in, ck_err *err)
{
    candidate best;
    int rc = closest(in, &best, err);
    if (rc != CK_OK)
        return rc;
    ck_emit_comment_header(out, in, "megatron: recomputation flags for Megatron-LM");
    fprintf(out, "# Layers are counted per pipeline stage: these flags are for --num-layers %zu and\n"
                 "# --pipeline-model-parallel-size 1.\n",
            in->layers->n_layers);
    if (best.exact) {
        fputs("# these flags are exactly the plan's schedule\n", out);
    } else {
        fputs("# Megatron's flags cannot express the plan: they checkpoint the first N layers each\n"
              "# on its own (block) or every layer in groups of N (uniform), and recompute a\n"
              "# layer whole from its input.\n", out);
        if (in->view->exact)
            fputs("#   - the plan checkpoints other layers than those, each on its own\n", out);
        ck_emit_comment_limit_list(out, in);
        fprintf(out, "# closest flags: %s\n", best.fig.fits ? "the fastest that fit the plan's budget"
                                                        : "none fits the plan's budget; the smallest peak");
    }
    ck_emit_comment_figures(out, in, "these flags", &best.fig);
    bool partition = in->plan->model_opts.layout.partition;
    if (partition)
        fputs("# checkpoints split over the tensor-parallel ranks (--distribute-saved-activations,\n"
              "# which makes each shard after its layers' forward: at most the peak above)\n", out);
    put_flags(out, best.f, partition);
    return CK_OK;
}
