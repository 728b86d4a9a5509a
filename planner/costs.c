#include "planner/costs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/json.h"

cJSON *ck_costs_to_json(const ck_chain *c, const char *model_path, const char *sha256,
                        const char *options, const char *granularity,
                        uint64_t measured_activation_peak_bytes)
{
    /* A chain document with the costs' identity around it: the stage list keeps the chain
     * format, so a costs file can also be read as a description of the measured chain. */
    cJSON *chain = ck_chain_to_json(c);
    cJSON *root = cJSON_CreateObject();
    cJSON *model = NULL;
    bool ok = chain && root && cJSON_AddStringToObject(root, "format", CK_COSTS_FORMAT) &&
              (model = cJSON_AddObjectToObject(root, "model")) &&
              cJSON_AddStringToObject(model, "path", model_path) &&
              cJSON_AddStringToObject(model, "sha256", sha256) &&
              (!*options || cJSON_AddStringToObject(model, "options", options)) &&
              cJSON_AddStringToObject(root, "granularity", granularity) &&
              ck_json_add_number(root, "measured_activation_peak_bytes",
                                      (double)measured_activation_peak_bytes) &&
              cJSON_AddItemToObject(root, "chain", chain);
    if (!ok) {
        if (!cJSON_GetObjectItem(root, "chain"))
            cJSON_Delete(chain);
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

int ck_costs_from_json(const cJSON *root, const char *file, ck_costs *out, ck_err *err)
{
    static const char *const formats[] = {CK_COSTS_FORMAT, NULL};
    static const char *const keys[] = {"format", "model", "granularity",
                                       "measured_activation_peak_bytes", "chain", NULL};
    static const char *const model_keys[] = {"path", "sha256", "options", NULL};
    memset(out, 0, sizeof *out);
    const char *format, *path = NULL, *sha = NULL, *granularity = NULL, *options = "";
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    int rc = ck_json_expect_format(root, formats, file, "", &format, err);
    if (rc == CK_OK) rc = ck_json_expect_object(root, keys, file, "", err);
    if (rc == CK_OK) rc = ck_json_expect_object(model, model_keys, file, "model", err);
    if (rc == CK_OK) rc = ck_json_get_string(model, "path", true, &path, file, "model", err);
    if (rc == CK_OK) rc = ck_json_get_string(model, "sha256", true, &sha, file, "model", err);
    if (rc == CK_OK) rc = ck_json_get_string(model, "options", false, &options, file, "model", err);
    if (rc == CK_OK) rc = ck_json_get_string(root, "granularity", true, &granularity, file, "", err);
    if (rc == CK_OK)
        rc = ck_json_get_u64(root, "measured_activation_peak_bytes", true,
                             &out->measured_activation_peak_bytes, file, "", err);
    const cJSON *chain = cJSON_GetObjectItemCaseSensitive(root, "chain");
    if (rc == CK_OK && !chain)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: chain: missing (expected a ckplan-chain/1 object)", file);
    if (rc == CK_OK) rc = ck_chain_from_json(chain, file, "chain", &out->chain, err);
    if (rc == CK_OK) {
        out->model_path = strdup(path);
        out->model_sha256 = strdup(sha);
        out->granularity = strdup(granularity);
        out->model_options = strdup(options);
        if (!out->model_path || !out->model_sha256 || !out->granularity || !out->model_options)
            rc = ck_err_oom(err);
    }
    if (rc != CK_OK)
        ck_costs_free(out);
    return rc;
}

void ck_costs_free(ck_costs *c)
{
    free(c->model_path);
    free(c->model_sha256);
    free(c->granularity);
    free(c->model_options);
    ck_chain_free(&c->chain);
    memset(c, 0, sizeof *c);
}

/* A stage's measured times replace the cost model's. A variant's backward is the stage's
 * plus the forwards it recomputes, which are not measured: that extra is scaled as the
 * stage's forward was, by measured over modelled (unscaled when the model said 0). */
static void measured_stage(ck_stage *st, const ck_stage *measured)
{
    double scale = st->fwd_time > 0 ? measured->fwd_time / st->fwd_time : 1;
    for (size_t v = 0; v < st->n_variants; v++) {
        double extra = st->variants[v].bwd_time - st->bwd_time;
        st->variants[v].bwd_time = measured->bwd_time + (extra > 0 ? extra * scale : 0);
    }
    st->fwd_time = measured->fwd_time;
    st->bwd_time = measured->bwd_time;
}

int ck_costs_apply(const ck_costs *costs, const char *costs_file, const char *sha256,
                   const char *options, const char *granularity, ck_chain *chain, ck_err *err)
{
    if (strcmp(costs->model_sha256, sha256) != 0)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: model.sha256: measured on a different version of "
                                          "%s; run 'ckplan profile' again", costs_file,
                       costs->model_path);
    if (strcmp(costs->model_options, options) != 0)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: model.options: measured with the model options "
                       "'%.300s', planning with '%.300s'; give the same options or profile again",
                       costs_file, *costs->model_options ? costs->model_options : "(none)",
                       *options ? options : "(none)");
    if (strcmp(costs->granularity, granularity) != 0)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: granularity: measured at '%s' granularity, planning "
                                          "at '%s'; use --granularity %s or profile again",
                       costs_file, costs->granularity, granularity, costs->granularity);
    const ck_chain *m = &costs->chain;
    if (m->n_stages != chain->n_stages)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: chain.stages: %zu measured stages, the model has %zu",
                       costs_file, m->n_stages, chain->n_stages);
    for (size_t i = 0; i < m->n_stages; i++)
        if (strcmp(m->stages[i].name, chain->stages[i].name) != 0)
            return ck_err_fail(err, CK_ERR_INPUT, "%s: chain.stages[%zu].name: expected \"%s\", got \"%s\"",
                           costs_file, i, chain->stages[i].name, m->stages[i].name);
    for (size_t i = 0; i < m->n_stages; i++)
        measured_stage(&chain->stages[i], &m->stages[i]);
    chain->loss_bwd_time = m->loss_bwd_time;
    return CK_OK;
}

int ck_costs_from_profile(const ck_chain *c, const ck_schedule *every, const double *median,
                          double outside_ops, ck_chain *measured, double *keep_all, ck_err *err)
{
    size_t L = c->n_stages;
    *measured = *c;
    ck_stage *stages = malloc(L * sizeof *stages);
    double *keep_nothing = calloc(L, sizeof *keep_nothing);
    if (!stages || !keep_nothing) {
        free(stages);
        free(keep_nothing);
        measured->stages = NULL;
        return ck_err_oom(err);
    }
    memcpy(stages, c->stages, L * sizeof *stages);
    measured->stages = stages;
    memset(keep_all, 0, L * sizeof *keep_all);
    for (size_t k = 0; k < every->n; k++) {
        const ck_action *op = &every->actions[k];
        if (op->kind == CK_F_CK)
            keep_nothing[op->stage] = median[k];
        else if (op->kind == CK_F_ALL)
            keep_all[op->stage] = median[k];
        else if (op->kind == CK_B)
            stages[op->stage].bwd_time = median[k];
        else
            measured->loss_bwd_time = median[k];
    }
    keep_nothing[L - 1] = keep_all[L - 1]; /* the last stage is never checkpointed */
    measured->loss_bwd_time += outside_ops;
    for (size_t i = 0; i < L; i++) {
        stages[i].fwd_time = keep_nothing[i];
        stages[i].bwd_time = fmax(0, stages[i].bwd_time + keep_all[i] - keep_nothing[i]);
    }
    free(keep_nothing);
    return CK_OK;
}
