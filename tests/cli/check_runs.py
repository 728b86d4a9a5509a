#!/usr/bin/env python3
"""Checks the records of verified runs (ckplan-run/1 JSONL): there are COUNT of them, each
passed --verify with the baseline's losses and gradients, and each execution's tracked
activation peak and static memory equal the predicted ones, to the byte. With --recomputes,
each plan's predicted peak is also below its baseline's. Exits 1 naming the first failure.

usage: check_runs.py RUNS COUNT [--recomputes]
"""
import json
import sys


def main(path, count, recomputes):
    records = [json.loads(line) for line in open(path)]
    assert len(records) == count, f"{len(records)} records, expected {count}"
    for r in records:
        p, m, b, v = r["predicted"], r["plan_run"], r["baseline"], r["verification"]
        assert v["passed"] and v["gradients_identical"] and v["loss_identical"], v
        assert m["activation_peak_bytes"] == p["activation_peak_bytes"], (m, p)
        assert b["activation_peak_bytes"] == p["baseline_activation_peak_bytes"], (b, p)
        assert m["static_bytes"] == b["static_bytes"] == p["static_bytes"], (m, b, p)
        assert not recomputes or p["activation_peak_bytes"] < p["baseline_activation_peak_bytes"], p


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:] == ["--recomputes"])
