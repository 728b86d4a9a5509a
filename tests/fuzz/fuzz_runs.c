/* fuzz_runs: bytes -> a temporary file (in /dev/shm when possible) -> ck_runs_read.
 * Warnings about bad lines go to /dev/null. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/runs.h"

static char path[64];
static FILE *devnull;

static void cleanup(void)
{
    if (path[0])
        unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!devnull) {
        devnull = fopen("/dev/null", "w");
        if (!devnull)
            abort();
        /* in memory when there is a tmpfs: the file is rewritten for every input */
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof path, "%s/fuzz_runs.%ld.jsonl", dir, (long)getpid());
        atexit(cleanup);
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    if (fclose(f) != 0)
        abort();
    ck_runs r;
    ck_err err;
    if (ck_runs_read(path, devnull, NULL, &r, &err) == CK_OK)
        ck_runs_free(&r);
    return 0;
}
