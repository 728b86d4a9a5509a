#!/usr/bin/env python3
"""A large Checkmate training graph for the tests of how long planning takes to stop.

usage: big_graph.py N OUT.json

N forward nodes with residual links (every third node also reads the node three below
it, so that the graph is not a chain and the fast planner searches it), the loss, and
one gradient node per forward node, in reverse order: N * 2 + 1 nodes in all. Sizes and
costs vary with a fixed pattern, so the file is the same on every run. The format is
that of ../shared/graphs/checkmate (networkx node-link JSON)."""
import json
import sys


def graph(n):
    nodes, links = [], []

    def node(name, backward, cost, ram):
        nodes.append({"name": name, "backward": backward, "cost_cpu": cost,
                      "cost_ram": ram, "id": len(nodes)})
        return len(nodes) - 1

    fwd = []
    for i in range(n):
        v = node(f"f{i}", False, 100 + (i * 37) % 300, (1 + (i * 13) % 7) << 20)
        if i:
            links.append((fwd[i - 1], v))
        if i >= 3 and i % 3 == 0:
            links.append((fwd[i - 3], v))
        fwd.append(v)
    grad = node("loss", True, 10, 1 << 20)
    links.append((fwd[-1], grad))
    for i in reversed(range(n)):
        v = node(f"g{i}", True, 200 + (i * 29) % 400, (1 + (i * 11) % 5) << 20)
        links.append((grad, v))
        links.append((fwd[i], v))
        if i:
            links.append((fwd[i - 1], v))
        grad = v
    return {"directed": True, "multigraph": False, "graph": {"name": f"big-{n}"},
            "nodes": nodes,
            "links": [{"source": s, "target": t} for s, t in sorted(set(links))]}


if __name__ == "__main__":
    with open(sys.argv[2], "w") as f:
        json.dump(graph(int(sys.argv[1])), f)
