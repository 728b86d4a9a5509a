/* fuzz_budget: bytes, NUL-terminated -> ck_size_parse. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "planner/size.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    uint64_t out;
    ck_err err;
    (void)ck_size_parse(text, &out, &err);
    free(text);
    return 0;
}
