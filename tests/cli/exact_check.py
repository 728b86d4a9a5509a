#!/usr/bin/env python3
"""The figure the user reads is exact (issue 23 item 5), checked from outside for one model
and one planner: what `ckplan plan` writes is what `ckplan run` predicts and measures, a plan
is never given for a budget its figure exceeds, and the smallest budget printed on exit 3 is
met at that budget and not one byte below (docs/planners.md, "Exact figures").

usage: exact_check.py CKPLAN MODEL PLANNER [MODEL OPTIONS...]

Prints one line per budget tried; exits 1 with the first claim that fails.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

RUN_LIMIT = 256 << 20  # steps larger than this are planned only, not executed
FRACTIONS = (0.4, 0.6, 0.8)  # of the baseline's activations, beside the static memory
RUN_AT = 0.6


def plan(ckplan, model, planner, budget, opts, out):
    r = subprocess.run([ckplan, "plan", model, "--planner", planner, "--budget", str(budget),
                        "--json", "-o", out] + opts, capture_output=True, text=True)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else None), r.stderr


def smallest(stderr):
    m = re.search(r"its smallest plan needs [^(]*\((\d+) bytes\)", stderr)
    assert m, f"exit 3 without the smallest budget: {stderr}"
    return int(m.group(1))


def fits(p, budget, what):
    f = p["predicted"]
    assert f["peak_bytes"] == f["static_bytes"] + f["activation_peak_bytes"], f"{what}: {f}"
    assert f["peak_bytes"] <= budget, f"{what}: planned at {f['peak_bytes']} bytes, over the budget {budget}"
    assert p["budget_bytes"] == budget, f"{what}: budget_bytes {p['budget_bytes']}"


def run_verify(ckplan, path, p, what, tmp):
    runs = os.path.join(tmp, "runs.jsonl")
    r = subprocess.run([ckplan, "run", path, "--verify", "--steps", "1", "--runs", runs, "--quiet"],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"{what}: run --verify exit {r.returncode}: {r.stderr}"
    rec = json.loads(open(runs).read().splitlines()[-1])
    f = p["predicted"]
    for mine, theirs in [("activation_peak_bytes", rec["predicted"]["activation_peak_bytes"]),
                         ("activation_peak_bytes", rec["plan_run"]["activation_peak_bytes"]),
                         ("baseline_activation_peak_bytes", rec["predicted"]["baseline_activation_peak_bytes"]),
                         ("baseline_activation_peak_bytes", rec["baseline"]["activation_peak_bytes"])]:
        assert f[mine] == theirs, f"{what}: the plan says {mine} {f[mine]}, run {theirs}"
    assert rec["verification"]["plan_file_matches"], f"{what}: {rec['verification']}"


def main():
    ckplan, model, planner, opts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "p.json")
        rc, top, err = plan(ckplan, model, planner, 1 << 40, opts, path)
        assert rc == 0, err
        static = top["predicted"]["static_bytes"]
        acts = top["predicted"]["baseline_activation_peak_bytes"]
        rc, _, err = plan(ckplan, model, planner, static + 1, opts, path)
        assert rc == 3, f"{planner} plans {model} in {static + 1} bytes: exit {rc}"
        least = smallest(err)
        rc, at, err = plan(ckplan, model, planner, least, opts, path)
        assert rc == 0, f"at the smallest budget printed, {least}: exit {rc}: {err}"
        fits(at, least, f"at the smallest budget {least}")
        rc, _, err = plan(ckplan, model, planner, least - 1, opts, path)
        assert rc == 3 and smallest(err) == least, f"one byte below the smallest, {least - 1}: exit {rc}: {err}"
        print(f"smallest {least}: fits, one byte below exits 3")
        for f in FRACTIONS:
            budget = static + int(f * acts)
            rc, p, err = plan(ckplan, model, planner, budget, opts, path)
            what = f"at {f} of the baseline's activations ({budget} bytes)"
            if budget < least:
                assert rc == 3 and smallest(err) == least, f"{what}: exit {rc}: {err}"
                print(f"{what}: exit 3")
                continue
            assert rc == 0, f"{what}: exit {rc}: {err}"
            fits(p, budget, what)
            assert json.load(open(path)) == p, f"{what}: the plan file is not what --json printed"
            ran = f == RUN_AT and top["predicted"]["baseline_peak_bytes"] < RUN_LIMIT
            if ran:
                run_verify(ckplan, path, p, what, tmp)
            print(f"{what}: {p['predicted']['activation_peak_bytes']} bytes{', run verifies it' if ran else ''}")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        sys.exit(f"{sys.argv[2]} {sys.argv[3]}: {e}")
