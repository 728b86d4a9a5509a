/* inject: fault injection for tests/faults/run. Linked into a test build of ckplan with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=write, so that
 * ckplan's own calls (and cJSON's, routed here with cJSON_InitHooks) come here.
 *
 *   CKPLAN_FAIL_ALLOC=N  the N-th allocation (malloc, calloc, realloc, strdup) returns NULL
 *   CKPLAN_FAIL_WRITE=N  the N-th write fails with EIO
 *   CKPLAN_SHORT_WRITE=1 ... or, as a disk filling up during it, writes only the first half
 *                        of its bytes (a short count), and the write after it fails with
 *                        ENOSPC: what is left of a record half written must be undone
 *   CKPLAN_FAULT_COUNT=1 prints "faults: A allocations, W writes" on stderr at exit
 *
 * The writes are ckplan's own write calls (its output files, cli/files.c) and the writes
 * of stdout's buffer. The C library writes stdout's buffer itself, out of reach of --wrap,
 * so stdout is replaced by a stream whose writes come here: a failing one then leaves the
 * stream's error flag set, as a full disk would. stderr is left alone: a message that
 * cannot be written has nowhere left to say so. fwrite is not wrapped: ckplan's only calls
 * are gcc's rewriting of fputs("...", stdout or stderr), and a wrapped fwrite that failed
 * set no error flag, so its failures were invisible to ckplan and to the test alike.
 *
 * Counting starts before main (in a constructor), which is where ckplan's own code starts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
char *__real_strdup(const char *s);
ssize_t __real_write(int fd, const void *buf, size_t len);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__wrap_strdup(const char *s);
ssize_t __wrap_write(int fd, const void *buf, size_t len);

static unsigned long fail_alloc, fail_write, n_alloc, n_write;
static int active, short_write, disk_full;

static unsigned long env_count(const char *name)
{
    const char *v = getenv(name);
    return v ? strtoul(v, NULL, 10) : 0;
}

static int alloc_fails(void)
{
    if (!active)
        return 0;
    n_alloc++;
    if (fail_alloc && n_alloc == fail_alloc) {
        errno = ENOMEM;
        return 1;
    }
    return 0;
}

enum write_fault { WRITE_OK, WRITE_FAILS, WRITE_CUT_SHORT };

static enum write_fault write_fault(size_t len)
{
    if (!active)
        return WRITE_OK;
    n_write++;
    if (disk_full || (fail_write && n_write == fail_write && !(short_write && len > 1))) {
        errno = disk_full ? ENOSPC : EIO;
        return WRITE_FAILS;
    }
    if (fail_write && n_write == fail_write) {
        disk_full = 1;
        return WRITE_CUT_SHORT;
    }
    return WRITE_OK;
}

void *__wrap_malloc(size_t size) { return alloc_fails() ? NULL : __real_malloc(size); }
void *__wrap_calloc(size_t n, size_t size) { return alloc_fails() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t size) { return alloc_fails() ? NULL : __real_realloc(p, size); }
char *__wrap_strdup(const char *s) { return alloc_fails() ? NULL : __real_strdup(s); }

ssize_t __wrap_write(int fd, const void *buf, size_t len)
{
    switch (write_fault(len)) {
    case WRITE_FAILS: return -1;
    case WRITE_CUT_SHORT: return __real_write(fd, buf, len / 2);
    default: return __real_write(fd, buf, len);
    }
}

static ssize_t stdout_write(void *cookie, const char *buf, size_t len)
{
    (void)cookie;
    return __wrap_write(STDOUT_FILENO, buf, len);
}

static void report(void)
{
    char line[96];
    int len = snprintf(line, sizeof line, "faults: %lu allocations, %lu writes\n", n_alloc, n_write);
    if (len > 0)
        (void)!__real_write(2, line, (size_t)len);
}

__attribute__((constructor)) static void inject_start(void)
{
    fail_alloc = env_count("CKPLAN_FAIL_ALLOC");
    fail_write = env_count("CKPLAN_FAIL_WRITE");
    short_write = env_count("CKPLAN_SHORT_WRITE") != 0;
    if (env_count("CKPLAN_FAULT_COUNT"))
        atexit(report);
    /* cJSON allocates with the C library's malloc unless told otherwise */
    cJSON_Hooks hooks = {.malloc_fn = __wrap_malloc, .free_fn = free};
    cJSON_InitHooks(&hooks);
    FILE *out = fopencookie(NULL, "w", (cookie_io_functions_t){.write = stdout_write});
    if (out)
        stdout = out;
    active = 1;
}
