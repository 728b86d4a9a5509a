/* graphgen: small random training graphs for tests, built in code from a seeded generator
 * (same seed, same graphs, on every host). */
#ifndef CK_GRAPHGEN_H
#define CK_GRAPHGEN_H

#include <stddef.h>
#include <stdint.h>

#include "planner/err.h"
#include "planner/graph.h"
#include "tests/unit/chaingen.h"

/* A forward chain f0 .. f(F-1) with random skip connections (f(i) reads f(i-1) and each
 * earlier f(j) with probability 1/3), the loss reading f(F-1), and a gradient node for each
 * of f(F-1) .. f1 reading the gradients of f(i)'s users, f(i)'s inputs and, every other
 * time, f(i) itself: 2F nodes. Bytes 1 .. max_bytes, whole costs 1 .. 9. */
int ck_graphgen_random(ck_graph *g, size_t forward, uint64_t max_bytes, ck_rng *rng, ck_err *err);

#endif
