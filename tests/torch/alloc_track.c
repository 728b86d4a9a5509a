/* alloc_track: an LD_PRELOAD library that counts the bytes PyTorch's CPU allocator holds.
 * c10's alloc_cpu takes every tensor's storage from posix_memalign (64-byte aligned) and
 * gives it back with free; nothing else in the Python process uses posix_memalign at these
 * sizes, so the bytes allocated through it and not yet freed are the tensors' memory. The
 * referee (tests/torch/referee.py) reads the figures through ctypes:
 *   ck_track_now()   bytes held now
 *   ck_track_peak()  the most held since the last ck_track_reset_peak()
 *   ck_track_reset_peak()  starts a new peak from what is held now */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *__libc_memalign(size_t alignment, size_t size);
void __libc_free(void *p);

/* Open addressing on the pointer; a freed entry becomes a tombstone. 2^20 entries hold far
 * more live tensors than a referee step makes. */
#define SLOTS (1u << 20)
#define TOMB ((void *)1)
static struct { void *p; size_t bytes; } table[SLOTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static size_t now, peak;

static size_t slot_of(const void *p)
{
    uintptr_t h = (uintptr_t)p >> 6;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15u;
    return (size_t)(h >> 40) & (SLOTS - 1);
}

int posix_memalign(void **out, size_t alignment, size_t size)
{
    void *p = __libc_memalign(alignment, size ? size : 1);
    if (!p)
        return 12; /* ENOMEM */
    pthread_mutex_lock(&lock);
    size_t i = slot_of(p);
    while (table[i].p && table[i].p != TOMB)
        i = (i + 1) & (SLOTS - 1);
    table[i].p = p;
    table[i].bytes = size;
    now += size;
    if (now > peak)
        peak = now;
    pthread_mutex_unlock(&lock);
    *out = p;
    return 0;
}

void free(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&lock);
    for (size_t i = slot_of(p); table[i].p; i = (i + 1) & (SLOTS - 1))
        if (table[i].p == p) {
            now -= table[i].bytes;
            table[i].p = TOMB;
            break;
        }
    pthread_mutex_unlock(&lock);
    __libc_free(p);
}

size_t ck_track_now(void)
{
    return now;
}

size_t ck_track_peak(void)
{
    return peak;
}

void ck_track_reset_peak(void)
{
    pthread_mutex_lock(&lock);
    peak = now;
    pthread_mutex_unlock(&lock);
}
