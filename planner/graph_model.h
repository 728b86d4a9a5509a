/* graph_model: an op-graph model's training step as a graph of planner/graph.h
 * (`--granularity node`), so that planners choose what to keep node by node, inside regions
 * that the chain derivation (planner/derive) must merge into one stage.
 *
 * Node layout: forward node k for model node k (all but the loss), in model order; then the
 * loss (forward and backward in one node, as the chain model has it); then a backward node
 * for every model node that runs a backward, in reverse model order. A forward node's
 * output holds the model node's output and the internal tensors its backward reads; a
 * backward node's output holds the gradients of the node's inputs that require one. A
 * backward node reads the backward nodes of its output's consumers (the gradient) and the
 * forward nodes whose outputs it saved. Transient bytes are the op's workspaces; the loss's
 * internal tensors are transient too. docs/plan-format.md, "Graphs of models", says what
 * this leaves out of the executor's exact accounting. */
#ifndef CK_GRAPH_MODEL_H
#define CK_GRAPH_MODEL_H

#include "planner/derive.h"
#include "planner/err.h"
#include "planner/graph.h"
#include "planner/model.h"

/* Builds *out from m, with costs in seconds from cm's roofline. *out is fully owned
 * (ck_graph_free). Fails only when out of memory or on 64-bit overflow. */
int ck_graph_model_build(const ck_model *m, const ck_cost_model *cm, ck_graph *out, ck_err *err);

#endif
