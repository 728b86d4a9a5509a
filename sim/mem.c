#include "sim/mem.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void note_peaks(ck_mem *m, ck_mem_kind kind)
{
    if (m->live[kind] > m->peak[kind])
        m->peak[kind] = m->live[kind];
    if (m->live_activation_total > m->peak_activation_total)
        m->peak_activation_total = m->live_activation_total;
    if (m->live_total > m->peak_total)
        m->peak_total = m->live_total;
}

void *ck_mem_alloc(ck_mem *m, ck_mem_kind kind, uint64_t bytes)
{
    /* calloc(0) may return NULL; one byte keeps "NULL means out of memory" true. */
    if (bytes > SIZE_MAX)
        return NULL;
    void *p = calloc(bytes ? (size_t)bytes : 1, 1);
    if (!p)
        return NULL;
    m->live[kind] += bytes;
    m->live_total += bytes;
    if (kind != CK_MEM_STATIC)
        m->live_activation_total += bytes;
    note_peaks(m, kind);
    return p;
}

void ck_mem_free(ck_mem *m, ck_mem_kind kind, void *p, uint64_t bytes)
{
    if (!p)
        return;
    free(p);
    m->live[kind] -= bytes;
    m->live_total -= bytes;
    if (kind != CK_MEM_STATIC)
        m->live_activation_total -= bytes;
}

void ck_mem_reset_peaks(ck_mem *m)
{
    memcpy(m->peak, m->live, sizeof m->peak);
    m->peak_activation_total = m->live_activation_total;
    m->peak_total = m->live_total;
}

void ck_mem_keep_freed_memory(void)
{
    /* Blocks up to glibc's largest mmap threshold come from the heap, and the heap is
     * never trimmed; larger blocks are mapped, and their page faults are amortized. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, -1);
}

int ck_mem_rss_reset_peak(ck_err *err)
{
    malloc_trim(0);
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return ck_err_fail(err, CK_ERR_RUNTIME, "cannot reset the resident-memory peak: "
                       "/proc/self/clear_refs: %s", strerror(errno));
    int bad = fputs("5", f) == EOF;
    bad |= fclose(f) != 0;
    if (bad)
        return ck_err_fail(err, CK_ERR_RUNTIME, "cannot reset the resident-memory peak: writing "
                       "/proc/self/clear_refs: %s", strerror(errno));
    return CK_OK;
}

int ck_mem_rss_peak(uint64_t *bytes, ck_err *err)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return ck_err_fail(err, CK_ERR_RUNTIME, "cannot read the resident-memory peak: "
                       "/proc/self/status: %s", strerror(errno));
    char line[256];
    unsigned long long kib = 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "VmHWM: %llu kB", &kib) == 1;
    fclose(f);
    if (!found)
        return ck_err_fail(err, CK_ERR_RUNTIME, "cannot read the resident-memory peak: no VmHWM "
                       "line in /proc/self/status");
    *bytes = (uint64_t)kib * 1024;
    return CK_OK;
}
