#!/usr/bin/env python3
"""An independent replay of a graph plan (ckplan-plan/1 with "kind": "graph") against the
Checkmate graph it names, written from issue 13's rules (docs/plan-format.md, "Graph
plans") alone, not from ckplan's C code: memory starts empty; `compute v` needs every input
of v resident and v not resident, makes v resident (cost_ram bytes) and costs cost_cpu; the
peak is the largest resident total right after a compute; `free v` drops a resident v;
every node is computed at least once. The baseline computes every node once in id order and
frees each output right after its last reader (outputs of backward nodes that nothing reads
stay). Checks the plan's predicted figures; exits 1 on any mismatch or invalid schedule.

usage: graph_replay.py PLAN GRAPH
"""
import json
import sys


class Invalid(Exception):
    pass


def load_graph(path):
    doc = json.load(open(path))
    nodes = {n["id"]: n for n in doc["nodes"]}
    inputs = {v: [] for v in nodes}
    for link in doc["links"]:
        inputs[link["target"]].append(link["source"])
    return nodes, inputs


def replay(nodes, inputs, schedule):
    resident, computed = set(), set()
    held = peak = 0
    time = 0.0
    for k, op in enumerate(schedule):
        v = op["node"]
        if v not in nodes:
            raise Invalid(f"schedule[{k}]: no node {v}")
        if op["op"] == "compute":
            if v in resident:
                raise Invalid(f"schedule[{k}]: node {v} is already resident")
            for u in inputs[v]:
                if u not in resident:
                    raise Invalid(f"schedule[{k}]: compute {v} needs node {u}, not resident")
            resident.add(v)
            computed.add(v)
            held += nodes[v]["cost_ram"]
            time += nodes[v]["cost_cpu"]
            peak = max(peak, held)
        elif op["op"] == "free":
            if v not in resident:
                raise Invalid(f"schedule[{k}]: free {v}, which is not resident")
            resident.remove(v)
            held -= nodes[v]["cost_ram"]
        else:
            raise Invalid(f"schedule[{k}]: unknown op {op['op']!r}")
    missing = set(nodes) - computed
    if missing:
        raise Invalid(f"never computes node {min(missing)}")
    return peak, time


def baseline(nodes, inputs):
    last_reader = {}
    for v in sorted(nodes):
        for u in inputs[v]:
            last_reader[u] = v
    ops = []
    for v in sorted(nodes):
        ops.append({"op": "compute", "node": v})
        ops += [{"op": "free", "node": u} for u in sorted(inputs[v]) if last_reader[u] == v]
        if v not in last_reader and not nodes[v]["backward"]:
            ops.append({"op": "free", "node": v})
    return replay(nodes, inputs, ops)


def main():
    plan = json.load(open(sys.argv[1]))
    nodes, inputs = load_graph(sys.argv[2])
    try:
        assert plan["format"] == "ckplan-plan/1" and plan["kind"] == "graph", "not a graph plan"
        assert plan["nodes"] == len(nodes), f"nodes {plan['nodes']}, the graph has {len(nodes)}"
        peak, time = replay(nodes, inputs, plan["schedule"])
    except Invalid as e:
        print(f"invalid schedule: {e}")
        return 1
    base_peak, base_time = baseline(nodes, inputs)
    p = plan["predicted"]
    want = {
        "peak_bytes": peak, "activation_peak_bytes": peak, "static_bytes": 0, "time": time,
        "baseline_time": base_time, "baseline_peak_bytes": base_peak,
        "baseline_activation_peak_bytes": base_peak,
        "overhead": time / base_time - 1 if base_time > 0 else 0,
    }
    bad = [f"{k}: plan {p.get(k)}, replay {v}" for k, v in want.items()
           if not (isinstance(p.get(k), (int, float)) and abs(p[k] - v) <= 1e-9 * max(1, abs(v)))]
    if plan["budget_bytes"] < peak:
        bad.append(f"budget_bytes {plan['budget_bytes']} below the peak {peak}")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
