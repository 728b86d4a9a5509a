/* pipeline: pipeline parallelism (docs/parallel.md, "Pipeline parallelism"). The model's
 * layers are split into N contiguous stages, or N x V chunks under Megatron's interleaved
 * 1F1B with chunk c on rank c mod N; the embeddings go with the first chunk, the head with
 * the last. Each chunk is a chain of its own (the model chain's stages [first, end)), whose
 * input is the activation received from the chunk before and whose loss, on every chunk but
 * the last, receives the gradient from the chunk after (no time, no transient bytes).
 *
 * Each rank holds several microbatches between their forward and their backward: under
 * 1F1B (PipeDream-Flush, Narayanan et al. 2021) rank i runs N - i - 1 forwards before its
 * first backward; interleaved, (N - i - 1) * 2 + (V - 1) * N chunk forwards (Megatron-LM's
 * warm-up count); either capped by the M (x V) that the step has. A rank's peak is its
 * static memory plus, chunk by chunk, the bytes each microbatch held in flight keeps (C:
 * what its forward leaves, by replay) and, for the one running, the peak of its forward and
 * backward (P, by replay) in place of its C. */
#ifndef CK_PIPELINE_H
#define CK_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "planner/chain.h"
#include "planner/derive.h"
#include "planner/err.h"
#include "planner/planner.h"
#include "planner/schedule.h"
#include "planner/workload.h"

/* Chunk forwards rank `rank` runs before its first backward, capped by the m * v chunk
 * forwards of a step, plus the one whose backward follows it: the chunk microbatches it
 * holds at its peak. n stages, m microbatches, v virtual stages, rank < n. */
uint64_t ck_pipeline_in_flight(uint64_t n, uint64_t m, uint64_t v, uint64_t rank);
/* Of those, the ones of the rank's local chunk j < v: Megatron runs a rank's chunk
 * forwards in groups of n microbatches, chunk 0's group, chunk 1's, ..., and again. */
uint64_t ck_pipeline_chunk_live(uint64_t n, uint64_t m, uint64_t v, uint64_t rank, uint64_t j);

/* What one schedule of a chunk's chain holds, by replay. */
typedef struct {
    ck_plan_result result; /* the schedule */
    ck_replay replay;
    uint64_t held; /* C: live once the loss has run, less the gradient it made */
} ck_pipeline_run;

typedef struct {
    size_t first, end; /* the model chain's stages [first, end) */
    size_t layers;     /* block instances in it */
    uint64_t live;     /* its microbatches held at the rank's peak */
    ck_chain chain;    /* its own chain */
    ck_pipeline_run plan, baseline; /* the rank's schedule of it; store-everything */
} ck_pipeline_chunk;

typedef struct {
    size_t n_chunks; /* virtual stages */
    ck_pipeline_chunk *chunks; /* chunk rank + j * N of the model, j < n_chunks */
    uint64_t in_flight;    /* ck_pipeline_in_flight */
    ck_static_mem statics; /* of its chunks' nodes, under the layout's ZeRO stage */
    /* What planning found: the chain budget its chunks were planned at (the largest whose
     * total fits, by bisection), and the replayed totals of the plan and the baseline. */
    uint64_t chain_budget, activation, baseline_activation;
    double time, baseline_time; /* one microbatch through its chunks */
    bool fits;
    uint64_t min_activation; /* infeasible: its total at the planner's smallest chain budget */
} ck_pipeline_rank;

typedef struct {
    uint64_t n_ranks, microbatches, virtual_stages;
    ck_pipeline_rank *ranks;
    size_t worst; /* the rank of the largest total (static + activations), planned */
} ck_pipeline;

/* Splits w (a model) by its layout's pipeline: checks that the layers divide by N x V (and
 * M by N when V > 1) and that a stage of w's chain begins where each chunk does, builds each
 * chunk's chain and each rank's static memory. CK_ERR_INPUT naming the values otherwise. */
int ck_pipeline_split(const ck_workload *w, ck_pipeline *out, ck_err *err);

/* Plans every rank under the per-GPU budget with planner p: for each, bisects the chain
 * budget B' over [the planner's smallest, budget - static] for the largest at which the
 * replayed total of its chunks' schedules fits what the budget leaves (a search, not an
 * optimum over the in-flight term: B' + 1 does not fit). CK_ERR_INFEASIBLE when a rank's
 * does not fit at all (its fits false, min_activation set); out->worst is set either way. */
int ck_pipeline_plan(ck_pipeline *pl, const ck_planner *p, uint64_t budget,
                     const ck_planner_opts *opts, ck_err *err);

/* Plans one rank with every chunk at chain budget b and replays: into r its activation
 * total, the sum over its chunks of live x C plus the largest P - C among them ((k - 1) x C
 * + P for one chunk), and its time. CK_ERR_INFEASIBLE when a chunk has no schedule under b
 * (r->min_activation: the planner's smallest chain budget of the chunk). */
int ck_pipeline_plan_rank_at(ck_pipeline_rank *r, const ck_planner *p, uint64_t b,
                             const ck_planner_opts *opts, ck_err *err);

/* Marks in mine (w->model->n_nodes entries) the nodes of r's chunks, the last chunk's
 * taking the loss: the part of the model the rank holds. */
void ck_pipeline_rank_nodes(const ck_workload *w, const ck_pipeline_rank *r, bool *mine);

void ck_pipeline_free(ck_pipeline *pl);

#endif
