/* fuzz_budget: bytes, NUL-terminated -> ck_size_parse; an accepted size is below 2^53. */
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
    /* Whatever is accepted must be writable as a JSON number and read back exactly. */
    if (ck_size_parse(text, &out, &err) == CK_OK && out >= CK_EXACT_LIMIT)
        abort();
    free(text);
    return 0;
}
