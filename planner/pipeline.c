/* pipeline: splitting a model into pipeline stages and chunks (see pipeline.h). */
#include "planner/pipeline.h"

#include <stdlib.h>
#include <string.h>

uint64_t ck_pipeline_in_flight(uint64_t n, uint64_t m, uint64_t v, uint64_t rank)
{
    uint64_t warmup = v == 1 ? n - rank - 1 : (n - rank - 1) * 2 + (v - 1) * n;
    return warmup + 1 < m * v ? warmup + 1 : m * v;
}

uint64_t ck_pipeline_chunk_live(uint64_t n, uint64_t m, uint64_t v, uint64_t rank, uint64_t j)
{
    uint64_t k = ck_pipeline_in_flight(n, m, v, rank), cycle = n * v;
    uint64_t rest = k % cycle, from = j * n;
    uint64_t extra = rest <= from ? 0 : rest - from < n ? rest - from : n;
    return k / cycle * n + extra;
}

/* The chain of stages [a, b) of c: their copies, x_a as input, and the loss only when b is
 * the end (otherwise it stands for the gradient received from the next chunk). */
static int sub_chain(const ck_chain *c, size_t a, size_t b, ck_chain *out, ck_err *err)
{
    int rc = ck_chain_alloc(out, c->name, b - a, err);
    for (size_t i = a; i < b && rc == CK_OK; i++) {
        ck_stage *s = &out->stages[i - a];
        *s = c->stages[i];
        s->n_variants = 0;
        s->variants = NULL;
        s->name = strdup(c->stages[i].name);
        rc = s->name ? ck_chain_set_variants(out, i - a, c->stages[i].variants,
                                             c->stages[i].n_variants, err)
                     : ck_err_oom(err);
    }
    out->input_bytes = ck_chain_x_bytes(c, a);
    out->layers = c->layers;
    out->loss_bwd_time = b == c->n_stages ? c->loss_bwd_time : 0;
    out->loss_bwd_tmp_bytes = b == c->n_stages ? c->loss_bwd_tmp_bytes : 0;
    return rc;
}

/* The stages each of the n_chunks chunks begins at (bounds[n_chunks] = the end), at a block
 * instance every layers / n_chunks. */
static int chunk_bounds(const ck_workload *w, size_t n_chunks, size_t *bounds, size_t *layers,
                        ck_err *err)
{
    const ck_model *m = w->model;
    size_t n = 0, per = 0;
    for (size_t g = 0; g < m->n_groups; g++)
        n += m->groups[g].instance;
    const ck_layout *l = &w->statics.layout;
    if (n == 0 || n % n_chunks != 0)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: --pp %llu --virtual-stages %llu: the model's %zu "
                           "layers (block instances) must divide into %zu chunks of equal length, "
                           "as Megatron-LM requires", w->path, (unsigned long long)ck_layout_pp(l),
                           (unsigned long long)ck_layout_virtual(l), n, n_chunks);
    per = n / n_chunks;
    bounds[0] = 0;
    bounds[n_chunks] = w->chain.n_stages;
    *layers = per;
    size_t seen = 0;
    for (size_t g = 0; g < m->n_groups; g++) {
        if (!m->groups[g].instance)
            continue;
        if (seen % per == 0 && seen > 0) {
            size_t s = ck_workload_stage_at(w, m->groups[g].first);
            if (s == SIZE_MAX)
                return ck_err_fail(err, CK_ERR_INPUT, "%s: --pp: no stage of the chain begins at "
                                   "layer %s, where chunk %zu would: more than one tensor crosses "
                                   "there", w->path, m->groups[g].name, seen / per);
            bounds[seen / per] = s;
        }
        seen++;
    }
    return CK_OK;
}

void ck_pipeline_rank_nodes(const ck_workload *w, const ck_pipeline_rank *r, bool *mine)
{
    const ck_model *m = w->model;
    memset(mine, 0, m->n_nodes * sizeof *mine);
    for (size_t j = 0; j < r->n_chunks; j++) {
        const ck_pipeline_chunk *c = &r->chunks[j];
        size_t end = c->end == w->chain.n_stages ? m->n_nodes : w->stage_first[c->end];
        for (size_t k = w->stage_first[c->first]; k < end; k++)
            mine[k] = true;
    }
}

/* Rank r's static memory: that of the nodes of its chunks (the last chunk's take the loss). */
static int rank_statics(const ck_workload *w, ck_pipeline_rank *r, ck_err *err)
{
    bool *mine = calloc(w->model->n_nodes, sizeof *mine);
    if (!mine)
        return ck_err_oom(err);
    ck_pipeline_rank_nodes(w, r, mine);
    int rc = ck_derive_static_memory_part(w->model, &w->statics.layout, mine, &r->statics, err);
    free(mine);
    return rc;
}

static int check_counts(const ck_workload *w, const ck_pipeline *p, ck_err *err)
{
    if (!w->model)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: --pp applies to model files", w->path);
    if (p->virtual_stages > 1 && p->microbatches % p->n_ranks != 0)
        return ck_err_fail(err, CK_ERR_INPUT, "--microbatches %llu --pp %llu --virtual-stages %llu: "
                           "the interleaved schedule needs the microbatches to divide by the "
                           "pipeline stages, as Megatron-LM does",
                           (unsigned long long)p->microbatches, (unsigned long long)p->n_ranks,
                           (unsigned long long)p->virtual_stages);
    return CK_OK;
}

static int fill_ranks(const ck_workload *w, ck_pipeline *p, const size_t *bounds, size_t per,
                      ck_err *err)
{
    int rc = CK_OK;
    for (uint64_t i = 0; i < p->n_ranks && rc == CK_OK; i++) {
        ck_pipeline_rank *r = &p->ranks[i];
        r->in_flight = ck_pipeline_in_flight(p->n_ranks, p->microbatches, p->virtual_stages, i);
        /* n_chunks only once they exist: ck_pipeline_free walks them */
        if (!(r->chunks = calloc((size_t)p->virtual_stages, sizeof *r->chunks)))
            return ck_err_oom(err);
        r->n_chunks = (size_t)p->virtual_stages;
        for (size_t j = 0; j < r->n_chunks && rc == CK_OK; j++) {
            size_t c = (size_t)(i + j * p->n_ranks);
            ck_pipeline_chunk *ch = &r->chunks[j];
            ch->first = bounds[c];
            ch->end = bounds[c + 1];
            ch->layers = per;
            ch->live = ck_pipeline_chunk_live(p->n_ranks, p->microbatches, p->virtual_stages, i, j);
            rc = sub_chain(&w->chain, ch->first, ch->end, &ch->chain, err);
        }
        if (rc == CK_OK)
            rc = rank_statics(w, r, err);
    }
    return rc;
}

int ck_pipeline_split(const ck_workload *w, ck_pipeline *out, ck_err *err)
{
    const ck_layout *l = &w->statics.layout;
    memset(out, 0, sizeof *out);
    out->n_ranks = ck_layout_pp(l);
    out->microbatches = ck_layout_microbatches(l);
    out->virtual_stages = ck_layout_virtual(l);
    int rc = check_counts(w, out, err);
    if (rc != CK_OK)
        return rc;
    size_t n_chunks = (size_t)(out->n_ranks * out->virtual_stages), per = 0;
    size_t *bounds = calloc(n_chunks + 1, sizeof *bounds);
    if (!bounds || !(out->ranks = calloc((size_t)out->n_ranks, sizeof *out->ranks)))
        rc = ck_err_oom(err);
    if (rc == CK_OK)
        rc = chunk_bounds(w, n_chunks, bounds, &per, err);
    if (rc == CK_OK)
        rc = fill_ranks(w, out, bounds, per, err);
    free(bounds);
    if (rc != CK_OK)
        ck_pipeline_free(out);
    return rc;
}

void ck_pipeline_free(ck_pipeline *pl)
{
    for (uint64_t i = 0; pl->ranks && i < pl->n_ranks; i++) {
        for (size_t j = 0; j < pl->ranks[i].n_chunks; j++) {
            ck_pipeline_chunk *c = &pl->ranks[i].chunks[j];
            ck_planner_result_free(&c->plan.result);
            ck_planner_result_free(&c->baseline.result);
            ck_chain_free(&c->chain);
        }
        free(pl->ranks[i].chunks);
    }
    free(pl->ranks);
    memset(pl, 0, sizeof *pl);
}
