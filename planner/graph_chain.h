/* graph_chain: graphs that are chains, and chain schedules turned into graph schedules, so
 * that on such a graph the graph planners do at least as well as the chain planners.
 *
 * The graph of a chain of L stages (x_0 of 0 bytes, x̄ = x): forward node i (0 <= i < L)
 * is stage i's output x_{i+1}, reading node i - 1; node L is the loss, reading node L - 1
 * and making y_L (as big as x_L); backward node 2L - i is B i, reading y_{i+1} (the loss
 * or node 2L - i - 1), x̄_{i+1} (node i) and x_i (node i - 1, none for i = 0), and making
 * y_i (as big as x_i; y_0 is 0 bytes). Transient bytes are the stages' and the loss's
 * temporaries, costs their times. */
#ifndef CK_GRAPH_CHAIN_H
#define CK_GRAPH_CHAIN_H

#include <stdbool.h>

#include "planner/chain.h"
#include "planner/err.h"
#include "planner/graph.h"
#include "planner/schedule.h"

/* Whether g is the graph of a chain; if so, *out is that chain (the caller frees it). */
int ck_graph_chain_of(const ck_graph *g, bool *is_chain, ck_chain *out, ck_err *err);

/* Appends to out the graph schedule of s, a valid schedule of c, the chain of g: a node
 * is resident while any chain value it stands for (x_{i+1} or x̄_{i+1}, y_i) is live, so
 * that a forward that remakes a value still held computes nothing. Its replay on g peaks
 * no higher and costs no more than s on c. */
int ck_graph_chain_schedule(const ck_graph *g, const ck_chain *c, const ck_schedule *s,
                            ck_graph_schedule *out, ck_err *err);

#endif
