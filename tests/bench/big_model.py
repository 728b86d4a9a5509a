#!/usr/bin/env python3
"""Writes a large ckplan-model/1 file for the loading benchmark and tests.

usage: big_model.py KIND N OUT [--indent I]

KIND says which names there are many of, each the way that loading looks names up:
  chain   N top-level relu nodes in a row (N stages at block granularity)
  inputs  N inputs, each added to the running sum by its own node
  blocks  N blocks of one relu node each, every one instantiated once
  tied    N pairs of an embedding and a head tied to it, each pair of its own sizes
Every model ends with an mse loss and is valid, unless N makes it exceed a limit.
--indent pretty-prints with that many spaces (a larger file for the same N)."""
import argparse
import json


def chain(n):
    nodes = [{"name": f"n{i}", "op": "relu", "inputs": [f"n{i - 1}" if i else "x"]} for i in range(n)]
    return {"inputs": [], "blocks": {}, "nodes": nodes, "last": f"n{n - 1}"}


def inputs(n):
    extra = [{"name": f"in{i}", "shape": ["B", "C"]} for i in range(n)]
    nodes = [{"name": f"s{i}", "op": "add", "inputs": [f"s{i - 1}" if i else "x", f"in{i}"]}
             for i in range(n)]
    return {"inputs": extra, "blocks": {}, "nodes": nodes, "last": f"s{n - 1}"}


def blocks(n):
    defs = {f"b{i}": {"input": "u", "nodes": [{"name": "r", "op": "relu", "inputs": ["u"]}]}
            for i in range(n)}
    nodes = [{"name": f"h{i}", "block": f"b{i}", "inputs": [f"h{i - 1}" if i else "x"]}
             for i in range(n)]
    return {"inputs": [], "blocks": defs, "nodes": nodes, "last": f"h{n - 1}"}


def tied(n):
    """Embedding i has vocab 2 + i: head i, tied to it, maps C to 2 + i, and the next pair
    starts again from the ids, so that every tied head looks for its own embedding."""
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append({"name": f"e{i}", "op": "embedding", "vocab": 2 + i, "dim": "C",
                      "inputs": ["ids"]})
        nodes.append({"name": f"j{i}", "op": "add", "inputs": [prev, f"e{i}"]})
        nodes.append({"name": f"t{i}", "op": "linear", "out": 2 + i, "bias": False, "tied": True,
                      "inputs": [f"j{i}"]})
        nodes.append({"name": f"p{i}", "op": "linear", "out": "C", "inputs": [f"t{i}"]})
        prev = f"p{i}"
    ids = [{"name": "ids", "shape": ["B"], "dtype": "int32"}]
    return {"inputs": ids, "blocks": {}, "nodes": nodes, "last": prev}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["chain", "inputs", "blocks", "tied"])
    p.add_argument("n", type=int)
    p.add_argument("out")
    p.add_argument("--indent", type=int, default=None)
    a = p.parse_args()
    body = globals()[a.kind](a.n)
    model = {
        "format": "ckplan-model/1",
        "name": f"{a.kind}{a.n}",
        "dims": {"B": 2, "C": 4},
        "inputs": [{"name": "x", "shape": ["B", "C"]}] + body["inputs"] +
                  [{"name": "y", "shape": ["B", "C"]}],
        "nodes": body["nodes"] + [{"name": "loss", "op": "mse", "inputs": [body["last"], "y"]}],
    }
    if body["blocks"]:
        model["blocks"] = body["blocks"]
    with open(a.out, "w") as f:
        json.dump(model, f, indent=a.indent, separators=None if a.indent else (",", ":"))


if __name__ == "__main__":
    main()
