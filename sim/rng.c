#include "sim/rng.h"

/* A 64-bit bijective finaliser (splitmix64's constants): every input bit flips about half
 * of the output bits, so consecutive counters give independent-looking words. */
static uint64_t mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return z;
}

/* Each word of the key is absorbed through a full mix, with distinct odd offsets, so that
 * swapping step and node (or seed and element) gives unrelated streams. For a fixed key
 * the map element -> 64-bit word is a bijection (xor with a constant, then a bijective
 * mix), so no two elements of one stream collide before truncation. */
static uint64_t key_hash(ck_rng_key key)
{
    uint64_t h = mix64(key.seed + 0x9e3779b97f4a7c15ULL);
    h = mix64(h ^ (key.step + 0x6a09e667f3bcc909ULL));
    return mix64(h ^ (key.node + 0xbb67ae8584caa73bULL));
}

static uint32_t element_word(uint64_t h, uint64_t element)
{
    return (uint32_t)(mix64(h ^ (element * 0x9e3779b97f4a7c15ULL + 0x3c6ef372fe94f82bULL)) >> 32);
}

uint32_t ck_rng_u32(ck_rng_key key, uint64_t element)
{
    return element_word(key_hash(key), element);
}

/* Keep when the 32-bit draw is at or above p * 2^32, which happens with probability
 * 1 - p up to 2^-32. The threshold is computed in double, where p * 2^32 is exact for a
 * float p; p outside [0, 1) (or NaN) is clamped so no float-to-integer conversion is out
 * of range: to 0 (every draw keeps) at or below 0, to 2^32 (none does) from 1. */
static uint64_t keep_threshold(float p)
{
    if (!(p > 0.0f))
        return 0;
    if (p >= 1.0f)
        return UINT64_C(1) << 32;
    return (uint64_t)((double)p * 4294967296.0);
}

int ck_rng_keep(ck_rng_key key, uint64_t element, float p)
{
    return (uint64_t)ck_rng_u32(key, element) >= keep_threshold(p);
}

/* The key's three mixes once for the run rather than once per element: dropout's draws
 * were a tenth of a gpt2-tiny step. */
void ck_rng_keep_run(ck_rng_key key, uint64_t first, size_t n, float p, uint8_t *keep)
{
    uint64_t h = key_hash(key), threshold = keep_threshold(p);
    for (size_t i = 0; i < n; i++)
        keep[i] = (uint64_t)element_word(h, first + i) >= threshold;
}
