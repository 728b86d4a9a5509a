#!/usr/bin/env python3
"""Checks a Chrome trace-event file written by ckplan (the JSON object format):
{"traceEvents": [...]}, every event has "ph"; complete events ("X") have ts, dur, pid, tid
and name, with ts and dur non-negative numbers; counter events ("C") have a name and args
whose values are numbers; at least one of each.

usage: check_trace.py FILE [--ops N] [--processes N] [--names NAME,NAME...]
  --ops        exactly N complete events
  --processes  exactly N distinct pids among complete events
  --names      each NAME is the name of some complete event
Exits 0 when every check passes, 1 with one line per failure otherwise."""
import argparse
import json
import sys


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--ops", type=int)
    ap.add_argument("--processes", type=int)
    ap.add_argument("--names", default="")
    a = ap.parse_args()
    try:
        with open(a.file, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{a.file}: not JSON: {e}")
        return 1
    problems = []
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        print(f"{a.file}: no traceEvents array")
        return 1
    xs, cs = [], []
    for i, e in enumerate(events):
        if not isinstance(e, dict) or "ph" not in e:
            problems.append(f"event {i} has no ph")
            continue
        if e["ph"] == "X":
            missing = [k for k in ("ts", "dur", "pid", "tid", "name") if k not in e]
            if missing:
                problems.append(f"event {i} (X) lacks {missing}")
            elif not (is_num(e["ts"]) and is_num(e["dur"]) and e["ts"] >= 0 and e["dur"] >= 0):
                problems.append(f"event {i} (X) has ts/dur that are not non-negative numbers")
            else:
                xs.append(e)
        elif e["ph"] == "C":
            args = e.get("args")
            if "name" not in e or not is_num(e.get("ts")) or not isinstance(args, dict) or \
                    not args or not all(is_num(v) for v in args.values()):
                problems.append(f"event {i} (C) needs a name, ts and numeric args")
            else:
                cs.append(e)
    if not xs:
        problems.append("no complete (X) events")
    if not cs:
        problems.append("no counter (C) events")
    if a.ops is not None and len(xs) != a.ops:
        problems.append(f"{len(xs)} complete events, wanted {a.ops}")
    pids = {e["pid"] for e in xs}
    if a.processes is not None and len(pids) != a.processes:
        problems.append(f"{len(pids)} processes, wanted {a.processes}")
    names = {e["name"] for e in xs}
    for n in filter(None, a.names.split(",")):
        if n not in names:
            problems.append(f"no event named {n!r}")
    for p in problems:
        print(f"{a.file}: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
