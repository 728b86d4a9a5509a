#include "planner/dtype.h"

#include <string.h>

static const struct {
    const char *name;
    uint64_t bytes;
    bool is_float;
} dtypes[] = {
    [CK_F32] = {"f32", 4, true},  [CK_BF16] = {"bf16", 2, true}, [CK_F16] = {"f16", 2, true},
    [CK_I32] = {"int32", 4, false}, [CK_U8] = {"u8", 1, false},
    [CK_I64] = {"int64", 8, false},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

const char *ck_dtype_name(ck_dtype d) { return dtypes[d].name; }
uint64_t ck_dtype_bytes(ck_dtype d) { return dtypes[d].bytes; }
bool ck_dtype_is_float(ck_dtype d) { return dtypes[d].is_float; }

bool ck_dtype_parse(const char *name, ck_dtype *out)
{
    for (size_t d = 0; d < N_DTYPES; d++)
        if (strcmp(name, dtypes[d].name) == 0) {
            *out = (ck_dtype)d;
            return true;
        }
    return false;
}
