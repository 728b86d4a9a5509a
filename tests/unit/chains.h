/* Chains for tests: the spec's worked example and uniform chains. */
#ifndef CK_TEST_CHAINS_H
#define CK_TEST_CHAINS_H

#include "planner/chain.h"

/* The `hetero-3` chain of ../shared/spec/chain-model.md section 3. */
void test_chain_hetero3(ck_chain *c);
/* n stages, every tensor `size` bytes (saved = out + extra), unit times, no transients. */
void test_chain_uniform(ck_chain *c, size_t n, uint64_t size, uint64_t extra);

/* n stages with sizes in 0..max_size (saved >= out), times in 0..10 and, now and then,
 * large transient memory; deterministic in *seed. */
void test_chain_random(ck_chain *c, size_t n, unsigned *seed, uint64_t max_size);

#endif
