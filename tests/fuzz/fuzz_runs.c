/* fuzz_runs: bytes -> ck_record_parse_runs, as the contents of a runs file. Refused lines
 * are reported to a callback that drops them. */
#include <stddef.h>
#include <stdint.h>

#include "sim/record.h"

static void ignore(void *ctx, const char *msg)
{
    (void)ctx;
    (void)msg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ck_runs r;
    ck_err err;
    if (ck_record_parse_runs("fuzz.jsonl", (const char *)data, size, ignore, NULL, NULL, &r, &err) == CK_OK)
        ck_record_runs_free(&r);
    return 0;
}
