/* fuzz_model: bytes -> ck_json_parse -> ck_model_from_json, or for a Hugging Face config
 * ck_hf_to_model first; a model that loads is derived into a chain at both granularities
 * and its static memory is computed. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "planner/derive.h"
#include "planner/hf.h"
#include "planner/json.h"
#include "planner/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ck_err err;
    cJSON *root = NULL;
    if (ck_json_parse("fuzz.json", (const char *)data, size, &root, &err) != CK_OK)
        return 0;
    if (ck_hf_is_config(root)) {
        /* the input's length picks adapters and the attention kernel, to reach those paths */
        ck_model_opts opts = {.lora_rank = size % 2 ? 2 : 0, .attention = size % 3 ? NULL : "eager"};
        cJSON *model = NULL;
        int rc = ck_hf_to_model(root, "fuzz.json", &opts, &model, &err);
        cJSON_Delete(root);
        if (rc != CK_OK)
            return 0;
        root = model;
    }
    ck_model *m = NULL;
    if (ck_model_from_json(root, "fuzz.json", &m, &err) == CK_OK) {
        ck_cost_model cm;
        ck_derive_cost_model_default(&cm);
        const ck_granularity grans[] = {CK_GRAN_OP, CK_GRAN_BLOCK};
        for (size_t g = 0; g < 2; g++) {
            ck_chain c;
            size_t *first = NULL;
            if (ck_derive_chain(m, grans[g], &cm, &c, &first, &err) == CK_OK) {
                ck_chain_free(&c);
                free(first);
            }
        }
        ck_static_mem sm;
        (void)ck_derive_static_memory(m, NULL, &sm, &err);
        ck_model_free(m);
    }
    cJSON_Delete(root);
    return 0;
}
