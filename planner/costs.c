#include "planner/costs.h"

#include <stdlib.h>
#include <string.h>

#include "planner/json.h"

cJSON *ck_costs_to_json(const ck_chain *c, const char *model_path, const char *sha256,
                        const char *granularity, uint64_t measured_activation_peak_bytes)
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
    static const char *const model_keys[] = {"path", "sha256", NULL};
    memset(out, 0, sizeof *out);
    const char *format, *path = NULL, *sha = NULL, *granularity = NULL;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    int rc = ck_json_expect_format(root, formats, file, "", &format, err);
    if (rc == CK_OK) rc = ck_json_expect_object(root, keys, file, "", err);
    if (rc == CK_OK) rc = ck_json_expect_object(model, model_keys, file, "model", err);
    if (rc == CK_OK) rc = ck_json_get_string(model, "path", true, &path, file, "model", err);
    if (rc == CK_OK) rc = ck_json_get_string(model, "sha256", true, &sha, file, "model", err);
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
        if (!out->model_path || !out->model_sha256 || !out->granularity)
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
    ck_chain_free(&c->chain);
    memset(c, 0, sizeof *c);
}

int ck_costs_apply(const ck_costs *costs, const char *costs_file, const char *sha256,
                   const char *granularity, ck_chain *chain, ck_err *err)
{
    if (strcmp(costs->model_sha256, sha256) != 0)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: model.sha256: measured on a different version of "
                                          "%s; run 'ckplan profile' again", costs_file,
                       costs->model_path);
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
    for (size_t i = 0; i < m->n_stages; i++) {
        chain->stages[i].fwd_time = m->stages[i].fwd_time;
        chain->stages[i].bwd_time = m->stages[i].bwd_time;
    }
    chain->loss_bwd_time = m->loss_bwd_time;
    return CK_OK;
}
