/* mem: the tracking allocator every executor buffer goes through, and the process's
 * resident-memory high-water mark.
 *
 * Bytes are counted at the tensor sizes the op table declares (not malloc's rounding), by
 * category, so that the tracked activation peak can be compared to the byte with the
 * schedule replay's prediction. */
#ifndef CK_MEMORY_H
#define CK_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "planner/err.h"

typedef enum {
    CK_MEM_ACTIVATION, /* x, x̄, tensors made during a forward */
    CK_MEM_GRADIENT,   /* y and intermediate gradients of activations */
    CK_MEM_WORKSPACE,  /* kernel workspace and loss internals, within one operation */
    CK_MEM_STATIC,     /* parameters, their gradients, optimizer state, held inputs */
    CK_MEM_N_KINDS
} ck_mem_kind;

typedef struct {
    uint64_t live[CK_MEM_N_KINDS], peak[CK_MEM_N_KINDS];
    uint64_t live_activation_total; /* activation + gradient + workspace */
    uint64_t peak_activation_total; /* the figure compared with activation_peak_bytes */
    uint64_t live_total, peak_total; /* every kind, static included: a rank's whole peak */
} ck_mem;

/* Zeroed memory of `bytes` bytes counted under kind; NULL when out of memory (nothing is
 * counted then). A zero-byte request returns a valid pointer to free. */
void *ck_mem_alloc(ck_mem *m, ck_mem_kind kind, uint64_t bytes);
void ck_mem_free(ck_mem *m, ck_mem_kind kind, void *p, uint64_t bytes);
/* Forgets the peaks (live counts stay). */
void ck_mem_reset_peaks(ck_mem *m);

/* Keeps freed memory in the process instead of handing it back to the system, as the
 * caching allocators of training frameworks do: the steps after the first then reuse
 * pages instead of paying page faults for fresh ones, and a schedule's time does not
 * depend on how much memory the step before it touched. Process-wide, so only programs
 * call it (ckplan's main, tests that measure times or the resident set), never library
 * code; idempotent. */
void ck_mem_keep_freed_memory(void);

/* Hands memory freed so far back to the system, then resets the kernel's resident-set
 * high-water mark (/proc/self/clear_refs, "5"), so the next reading is of what comes
 * after, not of memory kept from before. */
int ck_mem_rss_reset_peak(ck_err *err);
/* The resident-set high-water mark since the last reset (VmHWM of /proc/self/status). */
int ck_mem_rss_peak(uint64_t *bytes, ck_err *err);

#endif
