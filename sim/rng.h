/* rng: a counter-based random generator. A draw is a pure function of (seed, step, node,
 * element), so recomputing a forward pass reproduces the first pass's dropout masks
 * exactly, with no generator state to save or restore. */
#ifndef CK_RNG_H
#define CK_RNG_H

#include <stddef.h>
#include <stdint.h>

/* Where a stream of draws belongs: one per (seed, training step, node). */
typedef struct {
    uint64_t seed, step, node;
} ck_rng_key;

/* 32 uniformly distributed bits for element `element` of the stream `key`. */
uint32_t ck_rng_u32(ck_rng_key key, uint64_t element);

/* Whether dropout with probability p keeps element `element`: the same answer every time
 * it is asked with the same key and element. */
int ck_rng_keep(ck_rng_key key, uint64_t element, float p);

/* keep[i] = ck_rng_keep(key, first + i, p) for i in [0, n), as 0 or 1. */
void ck_rng_keep_run(ck_rng_key key, uint64_t first, size_t n, float p, uint8_t *keep);

#endif
