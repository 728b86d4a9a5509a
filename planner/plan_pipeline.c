/* plan: a pipeline plan's `pipeline` object, every rank kind's figures (plan.h,
 * docs/plan-format.md). */
#include "planner/plan.h"

#include <stdlib.h>
#include <string.h>

#include "planner/json.h"

static const char *const chunk_keys[] = {"first_stage", "end_stage", "layers", "in_flight",
                                         "checkpoint_bytes", "microbatch_peak_bytes", NULL};
static const char *const rank_keys[] = {"rank", "in_flight", "static_bytes", "activation_bytes",
                                        "total_bytes", "chain_budget_bytes", "chunks", NULL};

static bool add_u64(cJSON *obj, const char *key, uint64_t v)
{
    return ck_json_add_number(obj, key, (double)v) != NULL;
}

static bool add_chunk(cJSON *list, const ck_pipeline_chunk *c)
{
    cJSON *o = cJSON_CreateObject();
    const uint64_t v[] = {c->first, c->end, c->layers, c->live, c->plan.held,
                          c->plan.replay.peak_bytes};
    bool ok = o && cJSON_AddItemToArray(list, o);
    for (size_t i = 0; ok && chunk_keys[i]; i++)
        ok = add_u64(o, chunk_keys[i], v[i]);
    return ok;
}

static bool add_rank(cJSON *list, const ck_pipeline_rank *r, uint64_t i)
{
    cJSON *o = cJSON_CreateObject(), *chunks = NULL;
    const uint64_t v[] = {i, r->in_flight, r->statics.total, r->activation,
                          r->statics.total + r->activation, r->chain_budget};
    bool ok = o && cJSON_AddItemToArray(list, o);
    for (size_t k = 0; ok && k < sizeof v / sizeof v[0]; k++)
        ok = add_u64(o, rank_keys[k], v[k]);
    ok = ok && (chunks = cJSON_AddArrayToObject(o, "chunks"));
    for (size_t j = 0; ok && j < r->n_chunks; j++)
        ok = add_chunk(chunks, &r->chunks[j]);
    return ok;
}

bool ck_plan_pipeline_add_json(cJSON *root, const ck_pipeline *p)
{
    if (!p)
        return true;
    cJSON *o = cJSON_AddObjectToObject(root, "pipeline"), *ranks = NULL;
    bool ok = o && add_u64(o, "stages", p->n_ranks) && add_u64(o, "microbatches", p->microbatches) &&
              add_u64(o, "virtual_stages", p->virtual_stages) && add_u64(o, "worst_rank", p->worst) &&
              ck_json_add_number(o, "bubble_fraction", ck_plan_pipeline_bubble(p->n_ranks,
                                 p->microbatches, p->virtual_stages)) &&
              (ranks = cJSON_AddArrayToObject(o, "ranks"));
    for (uint64_t i = 0; ok && i < p->n_ranks; i++)
        ok = add_rank(ranks, &p->ranks[i], i);
    return ok;
}

double ck_plan_pipeline_bubble(uint64_t n, uint64_t m, uint64_t v)
{
    return (double)(n - 1) / ((double)m * (double)v);
}

/* Reads the u64 members keys[0 .. n) of obj at path into v. */
static int read_u64s(const cJSON *obj, const char *const *keys, size_t n, uint64_t *v,
                     const char *file, const char *path, ck_err *err)
{
    int rc = CK_OK;
    for (size_t i = 0; rc == CK_OK && i < n; i++)
        rc = ck_json_get_u64(obj, keys[i], true, &v[i], file, path, err);
    return rc;
}

/* An array member of exactly `want` entries. */
static int get_list(const cJSON *obj, const char *key, uint64_t want, const char *what,
                    const cJSON **list, const char *file, const char *path, ck_err *err)
{
    int rc = ck_json_get_array(obj, key, true, list, file, path, err);
    size_t n = rc == CK_OK ? (size_t)cJSON_GetArraySize(*list) : 0;
    if (rc == CK_OK && n != want)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: %s.%s: expected %llu entries, one per %s, got %zu",
                         file, path, key, (unsigned long long)want, what, n);
    return rc;
}

/* The chunks' stages are the model chain's, whose length whoever loads the model checks. */
static int read_chunks(const cJSON *list, const char *file, const char *path,
                       ck_plan_pipeline_rank *r, ck_err *err)
{
    if (!(r->chunks = calloc(r->n_chunks ? r->n_chunks : 1, sizeof *r->chunks)))
        return ck_err_oom(err);
    size_t j = 0;
    int rc = CK_OK;
    for (const cJSON *js = list->child; js && rc == CK_OK; js = js->next, j++) {
        char at[CK_JSON_PATH_MAX];
        ck_json_path_index(at, path, j);
        ck_plan_pipeline_chunk *c = &r->chunks[j];
        uint64_t v[6];
        rc = ck_json_expect_object(js, chunk_keys, file, at, err);
        if (rc == CK_OK) rc = read_u64s(js, chunk_keys, 6, v, file, at, err);
        *c = (ck_plan_pipeline_chunk){v[0], v[1], v[2], v[3], v[4], v[5]};
        if (rc == CK_OK && c->first_stage >= c->end_stage)
            rc = ck_err_fail(err, CK_ERR_INPUT, "%s: %s: expected first_stage < end_stage (the "
                             "model chain's stages [first, end)), got %llu and %llu", file, at,
                             (unsigned long long)c->first_stage, (unsigned long long)c->end_stage);
    }
    return rc;
}

static int read_rank(const cJSON *js, const char *file, const char *at, size_t i,
                     const ck_plan_pipeline *p, ck_plan_pipeline_rank *r, ck_err *err)
{
    uint64_t v[6];
    const cJSON *chunks = NULL;
    char path[CK_JSON_PATH_MAX];
    ck_json_path_key(path, at, "chunks");
    int rc = ck_json_expect_object(js, rank_keys, file, at, err);
    if (rc == CK_OK) rc = read_u64s(js, rank_keys, 6, v, file, at, err);
    *r = (ck_plan_pipeline_rank){.in_flight = v[1], .static_bytes = v[2], .activation_bytes = v[3],
                                 .total_bytes = v[4], .chain_budget_bytes = v[5]};
    if (rc == CK_OK && v[0] != i)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: %s.rank: expected %zu (ranks in order), got %llu",
                         file, at, i, (unsigned long long)v[0]);
    if (rc == CK_OK && r->static_bytes + r->activation_bytes != r->total_bytes)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: %s.total_bytes: expected static_bytes + "
                         "activation_bytes = %llu, got %llu", file, at,
                         (unsigned long long)(r->static_bytes + r->activation_bytes),
                         (unsigned long long)r->total_bytes);
    if (rc == CK_OK) rc = get_list(js, "chunks", p->virtual_stages, "virtual stage", &chunks, file, at, err);
    r->n_chunks = rc == CK_OK ? (size_t)p->virtual_stages : 0;
    if (rc == CK_OK) rc = read_chunks(chunks, file, path, r, err);
    return rc;
}

/* The worst rank is the one of the largest total, and predicted holds its figures. */
static int check_worst(const ck_plan_pipeline *p, const ck_plan_figures *f, const char *file,
                       ck_err *err)
{
    if (p->worst_rank >= p->n_ranks)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: pipeline.worst_rank: expected a rank below %zu, "
                           "got %llu", file, p->n_ranks, (unsigned long long)p->worst_rank);
    const ck_plan_pipeline_rank *w = &p->ranks[p->worst_rank];
    for (size_t i = 0; i < p->n_ranks; i++)
        if (p->ranks[i].total_bytes > w->total_bytes)
            return ck_err_fail(err, CK_ERR_INPUT, "%s: pipeline.worst_rank: rank %zu's total_bytes "
                               "%llu is above rank %llu's %llu: the worst rank is the largest",
                               file, i, (unsigned long long)p->ranks[i].total_bytes,
                               (unsigned long long)p->worst_rank, (unsigned long long)w->total_bytes);
    if (f->peak_bytes != w->total_bytes || f->static_bytes != w->static_bytes)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: predicted: peak_bytes %llu and static_bytes %llu "
                           "must be the worst rank's (pipeline.ranks[%llu]: %llu and %llu)", file,
                           (unsigned long long)f->peak_bytes, (unsigned long long)f->static_bytes,
                           (unsigned long long)p->worst_rank, (unsigned long long)w->total_bytes,
                           (unsigned long long)w->static_bytes);
    return CK_OK;
}

int ck_plan_pipeline_read(const cJSON *root, const char *file, const ck_layout *l,
                          const ck_plan_figures *f, ck_plan_pipeline *out, ck_err *err)
{
    static const char *const keys[] = {"stages", "microbatches", "virtual_stages", "worst_rank",
                                       "bubble_fraction", "ranks", NULL};
    memset(out, 0, sizeof *out);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "pipeline"), *ranks = NULL;
    if (!o && !ck_layout_pipelined(l))
        return CK_OK;
    if (!o || !ck_layout_pipelined(l))
        return ck_err_fail(err, CK_ERR_INPUT, "%s: pipeline: %s", file, o ? "given, but "
                           "model.options has no pp (a plan without a pipeline layout has none)"
                           : "missing: model.options.pp makes a pipeline plan, which lists its ranks");
    uint64_t v[4];
    double bubble = 0;
    int rc = ck_json_expect_object(o, keys, file, "pipeline", err);
    if (rc == CK_OK) rc = read_u64s(o, keys, 4, v, file, "pipeline", err);
    if (rc == CK_OK) rc = ck_json_get_time(o, "bubble_fraction", true, &bubble, file, "pipeline", err);
    if (rc == CK_OK && (v[0] != ck_layout_pp(l) || v[1] != ck_layout_microbatches(l) ||
                        v[2] != ck_layout_virtual(l)))
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: pipeline: stages %llu, microbatches %llu and "
                         "virtual_stages %llu must be model.options' pp, microbatches and "
                         "virtual_stages (%llu, %llu, %llu)", file, (unsigned long long)v[0],
                         (unsigned long long)v[1], (unsigned long long)v[2],
                         (unsigned long long)ck_layout_pp(l),
                         (unsigned long long)ck_layout_microbatches(l),
                         (unsigned long long)ck_layout_virtual(l));
    out->given = rc == CK_OK;
    out->stages = v[0], out->microbatches = v[1], out->virtual_stages = v[2], out->worst_rank = v[3];
    if (rc == CK_OK) rc = get_list(o, "ranks", v[0], "pipeline stage", &ranks, file, "pipeline", err);
    if (rc == CK_OK && !(out->ranks = calloc((size_t)v[0], sizeof *out->ranks)))
        rc = ck_err_oom(err);
    out->n_ranks = rc == CK_OK ? (size_t)v[0] : 0;
    size_t i = 0;
    for (const cJSON *js = ranks ? ranks->child : NULL; js && rc == CK_OK; js = js->next, i++) {
        char at[CK_JSON_PATH_MAX];
        ck_json_path_index(at, "pipeline.ranks", i);
        rc = read_rank(js, file, at, i, out, &out->ranks[i], err);
    }
    if (rc == CK_OK)
        rc = check_worst(out, f, file, err);
    return rc;
}

void ck_plan_pipeline_free(ck_plan_pipeline *p)
{
    for (size_t i = 0; p->ranks && i < p->n_ranks; i++)
        free(p->ranks[i].chunks);
    free(p->ranks);
    memset(p, 0, sizeof *p);
}
