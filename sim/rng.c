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
uint32_t ck_rng_u32(ck_rng_key key, uint64_t element)
{
    uint64_t h = mix64(key.seed + 0x9e3779b97f4a7c15ULL);
    h = mix64(h ^ (key.step + 0x6a09e667f3bcc909ULL));
    h = mix64(h ^ (key.node + 0xbb67ae8584caa73bULL));
    h = mix64(h ^ (element * 0x9e3779b97f4a7c15ULL + 0x3c6ef372fe94f82bULL));
    return (uint32_t)(h >> 32);
}

/* Keep when the 32-bit draw is at or above p * 2^32, which happens with probability
 * 1 - p up to 2^-32. The threshold is computed in double, where p * 2^32 is exact for a
 * float p; p outside [0, 1) (or NaN) is clamped so no float-to-integer conversion is out
 * of range. */
int ck_rng_keep(ck_rng_key key, uint64_t element, float p)
{
    if (!(p > 0.0f))
        return 1;
    if (p >= 1.0f)
        return 0;
    uint64_t threshold = (uint64_t)((double)p * 4294967296.0);
    return (uint64_t)ck_rng_u32(key, element) >= threshold;
}
