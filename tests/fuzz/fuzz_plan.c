/* fuzz_plan: bytes -> ck_json_parse -> ck_plan_from_json. */
#include <stddef.h>
#include <stdint.h>

#include "planner/json.h"
#include "planner/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ck_err err;
    cJSON *root = NULL;
    if (ck_json_parse("fuzz.json", (const char *)data, size, &root, &err) != CK_OK)
        return 0;
    ck_plan_file p;
    if (ck_plan_from_json(root, "fuzz.json", &p, &err) == CK_OK)
        ck_plan_file_free(&p);
    cJSON_Delete(root);
    return 0;
}
