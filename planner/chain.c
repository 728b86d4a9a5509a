#include "planner/chain.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/json.h"
#include "planner/limits.h"

static size_t max_stages(void)
{
    unsigned long n = ck_limits_get(CK_LIMIT_STAGES, CK_CHAIN_MAX_STAGES);
    return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}

int ck_chain_check_length(size_t n_stages, const char *file, const char *path, ck_err *err)
{
    size_t max = max_stages();
    if (n_stages <= max)
        return CK_OK;
    return ck_err_fail(err, CK_ERR_INPUT, "%s: %s%s%zu stages is more than the limit of %zu stages "
                   "(set %s to raise it)", file, path, path[0] ? ": " : "", n_stages, max,
                   ck_limits_name(CK_LIMIT_STAGES));
}

static void free_variants(ck_stage *st)
{
    for (size_t v = 0; v < st->n_variants; v++)
        free(st->variants[v].name);
    free(st->variants);
    st->variants = NULL;
    st->n_variants = 0;
}

int ck_chain_set_variants(ck_chain *c, size_t i, const ck_variant *v, size_t n, ck_err *err)
{
    ck_stage *st = &c->stages[i];
    free_variants(st);
    if (n == 0)
        return CK_OK;
    st->variants = calloc(n, sizeof *st->variants);
    if (!st->variants)
        return ck_err_oom(err);
    for (size_t k = 0; k < n; k++) {
        st->variants[k] = v[k];
        st->variants[k].name = strdup(v[k].name);
        st->n_variants = k + 1;
        if (!st->variants[k].name)
            return ck_err_oom(err);
    }
    return CK_OK;
}

ck_variant ck_chain_variant(const ck_chain *c, size_t i, size_t v)
{
    const ck_stage *st = &c->stages[i];
    if (v > 0 && v <= st->n_variants)
        return st->variants[v - 1];
    return (ck_variant){.name = CK_VARIANT_ALL, .saved_bytes = st->saved_bytes,
                        .fwd_tmp_bytes = st->fwd_tmp_bytes, .bwd_tmp_bytes = st->bwd_tmp_bytes,
                        .bwd_time = st->bwd_time};
}

bool ck_chain_variant_find(const ck_chain *c, size_t i, const char *name, size_t *v)
{
    for (size_t k = 0; k <= c->stages[i].n_variants; k++)
        if (strcmp(ck_chain_variant(c, i, k).name, name) == 0) {
            *v = k;
            return true;
        }
    return false;
}

int ck_chain_alloc(ck_chain *c, const char *name, size_t n_stages, ck_err *err)
{
    memset(c, 0, sizeof *c);
    c->name = strdup(name ? name : "");
    c->stages = calloc(n_stages ? n_stages : 1, sizeof *c->stages);
    if (!c->name || !c->stages) {
        ck_chain_free(c);
        return ck_err_oom(err);
    }
    c->n_stages = n_stages;
    return CK_OK;
}

void ck_chain_free(ck_chain *c)
{
    if (!c)
        return;
    if (c->stages)
        for (size_t i = 0; i < c->n_stages; i++) {
            free(c->stages[i].name);
            free_variants(&c->stages[i]);
        }
    free(c->stages);
    free(c->name);
    memset(c, 0, sizeof *c);
}

bool ck_chain_partitioned(const ck_chain *c)
{
    for (size_t i = 0; i < c->n_stages; i++)
        if (c->stages[i].shard_bytes)
            return true;
    return false;
}

uint64_t ck_chain_x_bytes(const ck_chain *c, size_t i)
{
    return i == 0 ? c->input_bytes : c->stages[i - 1].out_bytes;
}

uint64_t ck_chain_xbar_bytes(const ck_chain *c, size_t i)
{
    return i == 0 ? c->input_bytes : c->stages[i - 1].saved_bytes;
}

/* A time of the chain: finite, non-negative and at most CK_CHAIN_MAX_TIME. */
static int get_chain_time(const cJSON *obj, const char *key, bool required, double *out,
                          const char *file, const char *path, ck_err *err)
{
    int rc = ck_json_get_time(obj, key, required, out, file, path, err);
    if (rc != CK_OK || *out <= CK_CHAIN_MAX_TIME)
        return rc;
    char mpath[CK_JSON_PATH_MAX];
    ck_json_path_key(mpath, path, key);
    return ck_err_fail(err, CK_ERR_INPUT, "%s: %s: expected at most %g, got %g: " CK_CHAIN_MAX_TIME_WHY,
                   file, mpath, CK_CHAIN_MAX_TIME, *out);
}

static int read_variant(const cJSON *js, const char *path, const char *file, const ck_stage *st,
                        const ck_variant *earlier, size_t n_earlier, ck_variant *out, ck_err *err)
{
    static const char *const keys[] = {"name", "saved_bytes", "fwd_tmp_bytes", "bwd_time",
                                       "bwd_tmp_bytes", NULL};
    const char *name = NULL;
    int rc = ck_json_expect_object(js, keys, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_string(js, "name", true, &name, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_u64(js, "saved_bytes", true, &out->saved_bytes, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_u64(js, "fwd_tmp_bytes", false, &out->fwd_tmp_bytes, file, path, err);
    if (rc == CK_OK) rc = get_chain_time(js, "bwd_time", true, &out->bwd_time, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_u64(js, "bwd_tmp_bytes", false, &out->bwd_tmp_bytes, file, path, err);
    if (rc != CK_OK)
        return rc;
    bool taken = strcmp(name, CK_VARIANT_ALL) == 0;
    for (size_t k = 0; k < n_earlier; k++)
        taken = taken || strcmp(earlier[k].name, name) == 0;
    if (taken || !name[0])
        return ck_err_fail(err, CK_ERR_INPUT, "%s: %s.name: expected a name other than \"\", \""
                           CK_VARIANT_ALL "\" and the stage's other variants', got \"%s\"",
                           file, path, name);
    if (out->saved_bytes < st->out_bytes)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: %s.saved_bytes: expected at least the stage's "
                           "out_bytes (%llu), got %llu: the saved tensors include the stage's output",
                           file, path, (unsigned long long)st->out_bytes,
                           (unsigned long long)out->saved_bytes);
    out->name = (char *)name;
    return CK_OK;
}

/* "variants": the stage's ways to run F_all beyond "all" (docs/plan-format.md). */
static int read_variants(const cJSON *js, const char *path, const char *file, ck_chain *c,
                         size_t i, ck_err *err)
{
    const cJSON *list = NULL;
    int rc = ck_json_get_array(js, "variants", false, &list, file, path, err);
    if (rc != CK_OK || !list)
        return rc;
    char lpath[CK_JSON_PATH_MAX], vpath[CK_JSON_PATH_MAX];
    ck_json_path_key(lpath, path, "variants");
    size_t n = (size_t)cJSON_GetArraySize(list);
    if (n >= CK_STAGE_MAX_VARIANTS)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: %s: expected at most %d variants besides \""
                           CK_VARIANT_ALL "\", got %zu", file, lpath, CK_STAGE_MAX_VARIANTS - 1, n);
    ck_variant v[CK_STAGE_MAX_VARIANTS];
    size_t k = 0;
    for (const cJSON *e = list->child; e && rc == CK_OK; e = e->next, k++) {
        ck_json_path_index(vpath, lpath, k);
        v[k] = (ck_variant){0};
        rc = read_variant(e, vpath, file, &c->stages[i], v, k, &v[k], err);
    }
    return rc == CK_OK ? ck_chain_set_variants(c, i, v, n, err) : rc;
}

static int read_stage(const cJSON *js, const char *stages_path, size_t index, const char *file,
                      ck_stage *st, ck_err *err)
{
    static const char *const keys[] = {"name", "fwd_time", "bwd_time", "out_bytes", "saved_bytes",
                                       "fwd_tmp_bytes", "bwd_tmp_bytes", "variants", NULL};
    char path[CK_JSON_PATH_MAX];
    ck_json_path_index(path, stages_path, index);
    int rc = ck_json_expect_object(js, keys, file, path, err);
    const char *name = NULL;
    if (rc == CK_OK) rc = ck_json_get_string(js, "name", false, &name, file, path, err);
    if (rc == CK_OK) rc = get_chain_time(js, "fwd_time", true, &st->fwd_time, file, path, err);
    if (rc == CK_OK) rc = get_chain_time(js, "bwd_time", true, &st->bwd_time, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_u64(js, "out_bytes", true, &st->out_bytes, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_u64(js, "saved_bytes", true, &st->saved_bytes, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_u64(js, "fwd_tmp_bytes", false, &st->fwd_tmp_bytes, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_u64(js, "bwd_tmp_bytes", false, &st->bwd_tmp_bytes, file, path, err);
    if (rc != CK_OK)
        return rc;
    if (st->saved_bytes < st->out_bytes)
        return ck_err_fail(err, CK_ERR_INPUT,
                       "%s: %s.saved_bytes: expected at least out_bytes (%llu), got %llu: the saved "
                       "tensors include the stage's output",
                       file, path, (unsigned long long)st->out_bytes,
                       (unsigned long long)st->saved_bytes);
    char fallback[32];
    snprintf(fallback, sizeof fallback, "s%zu", index);
    st->name = strdup(name ? name : fallback);
    return st->name ? CK_OK : ck_err_oom(err);
}

int ck_chain_from_json(const cJSON *root, const char *file, const char *path, ck_chain *out,
                       ck_err *err)
{
    static const char *const keys[] = {"format", "name", "input_bytes", "stages", "loss", NULL};
    static const char *const loss_keys[] = {"bwd_time", "bwd_tmp_bytes", NULL};
    static const char *const chain_format[] = {CK_CHAIN_FORMAT, NULL};
    const char *format = NULL, *name = NULL;
    const cJSON *stages = NULL;
    uint64_t input_bytes = 0;
    char stages_path[CK_JSON_PATH_MAX], loss_path[CK_JSON_PATH_MAX];
    ck_json_path_key(stages_path, path, "stages");
    ck_json_path_key(loss_path, path, "loss");
    int rc = ck_json_expect_object(root, keys, file, path, err);
    if (rc == CK_OK) rc = ck_json_expect_format(root, chain_format, file, path, &format, err);
    if (rc == CK_OK) rc = ck_json_get_string(root, "name", false, &name, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_u64(root, "input_bytes", true, &input_bytes, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_array(root, "stages", true, &stages, file, path, err);
    if (rc != CK_OK)
        return rc;
    size_t n = (size_t)cJSON_GetArraySize(stages);
    if (n == 0)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: %s: expected at least one stage, got an empty array",
                       file, stages_path);
    rc = ck_chain_check_length(n, file, stages_path, err);
    if (rc != CK_OK)
        return rc;
    rc = ck_chain_alloc(out, name, n, err);
    if (rc != CK_OK)
        return rc;
    out->input_bytes = input_bytes;
    size_t i = 0;
    for (const cJSON *js = stages->child; js && rc == CK_OK; js = js->next, i++) {
        char spath[CK_JSON_PATH_MAX];
        ck_json_path_index(spath, stages_path, i);
        rc = read_stage(js, stages_path, i, file, &out->stages[i], err);
        if (rc == CK_OK)
            rc = read_variants(js, spath, file, out, i, err);
    }
    const cJSON *loss = cJSON_GetObjectItemCaseSensitive(root, "loss");
    if (rc == CK_OK && loss) {
        rc = ck_json_expect_object(loss, loss_keys, file, loss_path, err);
        if (rc == CK_OK) rc = get_chain_time(loss, "bwd_time", false, &out->loss_bwd_time, file, loss_path, err);
        if (rc == CK_OK) rc = ck_json_get_u64(loss, "bwd_tmp_bytes", false, &out->loss_bwd_tmp_bytes, file, loss_path, err);
    }
    if (rc != CK_OK)
        ck_chain_free(out);
    return rc;
}

static bool add_variants(cJSON *js, const ck_stage *s)
{
    cJSON *list = cJSON_AddArrayToObject(js, "variants");
    bool ok = list != NULL;
    for (size_t k = 0; ok && k < s->n_variants; k++) {
        const ck_variant *v = &s->variants[k];
        cJSON *e = cJSON_CreateObject();
        ok = e && cJSON_AddItemToArray(list, e) && cJSON_AddStringToObject(e, "name", v->name) &&
             ck_json_add_number(e, "saved_bytes", (double)v->saved_bytes) &&
             ck_json_add_number(e, "fwd_tmp_bytes", (double)v->fwd_tmp_bytes) &&
             ck_json_add_number(e, "bwd_time", v->bwd_time) &&
             ck_json_add_number(e, "bwd_tmp_bytes", (double)v->bwd_tmp_bytes);
    }
    return ok;
}

cJSON *ck_chain_to_json(const ck_chain *c)
{
    /* cJSON_Add*ToObject free what they created when they fail, and adding to an array
     * allocates nothing, so one flag and one delete at the end cover every failure. */
    cJSON *root = cJSON_CreateObject();
    cJSON *stages = NULL, *loss = NULL;
    bool ok = root && cJSON_AddStringToObject(root, "format", CK_CHAIN_FORMAT) &&
              cJSON_AddStringToObject(root, "name", c->name ? c->name : "") &&
              ck_json_add_number(root, "input_bytes", (double)c->input_bytes) &&
              (stages = cJSON_AddArrayToObject(root, "stages"));
    for (size_t i = 0; ok && i < c->n_stages; i++) {
        const ck_stage *s = &c->stages[i];
        cJSON *js = cJSON_CreateObject();
        ok = js && cJSON_AddItemToArray(stages, js) &&
             cJSON_AddStringToObject(js, "name", s->name ? s->name : "") &&
             ck_json_add_number(js, "fwd_time", s->fwd_time) &&
             ck_json_add_number(js, "bwd_time", s->bwd_time) &&
             ck_json_add_number(js, "out_bytes", (double)s->out_bytes) &&
             ck_json_add_number(js, "saved_bytes", (double)s->saved_bytes) &&
             ck_json_add_number(js, "fwd_tmp_bytes", (double)s->fwd_tmp_bytes) &&
             ck_json_add_number(js, "bwd_tmp_bytes", (double)s->bwd_tmp_bytes) &&
             (s->n_variants == 0 || add_variants(js, s));
    }
    ok = ok && (loss = cJSON_AddObjectToObject(root, "loss")) &&
         ck_json_add_number(loss, "bwd_time", c->loss_bwd_time) &&
         ck_json_add_number(loss, "bwd_tmp_bytes", (double)c->loss_bwd_tmp_bytes);
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}
