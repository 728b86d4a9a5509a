/* chaingen: chains for tests, built in code: the spec's example, uniform chains and
 * random small chains from a seeded generator (same seed, same chains, on every host). */
#ifndef CK_CHAINGEN_H
#define CK_CHAINGEN_H

#include <stddef.h>
#include <stdint.h>

#include "planner/chain.h"
#include "planner/err.h"

typedef struct {
    uint64_t state;
} ck_rng;

void ck_rng_seed(ck_rng *rng, uint64_t seed);
/* Uniform in 0 .. n-1 (n >= 1). */
uint64_t ck_rng_below(ck_rng *rng, uint64_t n);

/* hetero-3, the example of chain-model.md section 3. */
int ck_chaingen_hetero3(ck_chain *c, ck_err *err);

/* L identical stages: out and saved bytes `size`, no temporaries, forward and backward
 * time 1; input_bytes `size`. */
int ck_chaingen_uniform(ck_chain *c, size_t L, uint64_t size, ck_err *err);

/* L stages with out_bytes and input_bytes in 0 .. max_size, saved_bytes often equal to
 * out_bytes and otherwise up to max_size more, temporaries usually 0 .. max_size but now
 * and then up to 4 * max_size, times in 0 .. max_time in steps of 0.1 (zero included). */
int ck_chaingen_random(ck_chain *c, size_t L, uint64_t max_size, unsigned max_time, ck_rng *rng,
                       ck_err *err);

/* Gives each stage of c 0 to 3 variants (planner/chain.h): saved bytes from out_bytes to
 * its "all" figure plus a little, temporaries in 0 .. max_size, backward times from its own
 * to max_time more, so that a variant may keep less and take longer, or be worse at both. */
int ck_chaingen_variants(ck_chain *c, uint64_t max_size, unsigned max_time, ck_rng *rng, ck_err *err);

#endif
