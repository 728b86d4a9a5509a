#!/usr/bin/env python3
"""An independent replay of a ckplan-plan/1 file against a ckplan-chain/1 file, written from
../shared/spec/chain-model.md section 2 alone (not from ckplan's C code), as an outside
reader of plan files would, with the stage variants of docs/plan-format.md (an F_all's
"variant" names one of its stage's "variants"; absent means the stage's own figures). Checks the plan's predicted figures; exits 1 on any mismatch.

usage: replay.py [--bound] PLAN CHAIN

--bound: PLAN is a model's plan and CHAIN the model's chain (`ckplan chain`). Its figures
are the exact replay of the model's compiled program, which the chain's bounds (a saving
forward's transient is its own there, y_i is made later): the activation peaks must be at
most the replay's, the times equal it, and the plan's own peak must fit its budget.
"""
import json
import sys


def replay(chain, schedule):
    L = len(chain["stages"])
    st = chain["stages"]
    x = lambda i: chain["input_bytes"] if i == 0 else st[i - 1]["out_bytes"]
    loss = chain.get("loss", {})
    live = {("x", 0)}
    size = {}
    held = chain["input_bytes"]
    peak = held
    time = 0.0
    made_by = {}  # stage -> the variant figures its live x̄ was made with

    def variant(i, name):
        if name in (None, "all"):
            return st[i]
        found = [v for v in st[i].get("variants", []) if v["name"] == name]
        assert found, f"stage {i} has no variant {name}"
        return found[0]

    def alloc(name, nbytes):
        nonlocal held
        assert name not in live, f"{name} already live"
        live.add(name)
        size[name] = nbytes
        held += nbytes

    def free(name):
        nonlocal held
        live.discard(name)
        held -= size.get(name, chain["input_bytes"] if name == ("x", 0) else 0)

    def has_input(i):
        return ("x", i) in live or (i > 0 and ("xbar", i) in live)

    for k, op in enumerate(schedule):
        kind, i = op["op"], op.get("stage")
        if kind in ("F_all", "F_ck", "F_none"):
            assert has_input(i), f"op {k}: input of stage {i} not live"
            fig = st[i]
            if kind == "F_all":
                fig = made_by[i] = variant(i, op.get("variant"))
                alloc(("xbar", i + 1), fig["saved_bytes"])
            else:
                assert "variant" not in op, f"op {k}: only F_all has a variant"
                alloc(("x", i + 1), x(i + 1))
            peak = max(peak, held + fig.get("fwd_tmp_bytes", 0))
            if kind == "F_none":
                free(("x", i) if ("x", i) in live else ("xbar", i))
            time += st[i]["fwd_time"]
        elif kind == "loss":
            assert has_input(L), f"op {k}: x_L not live"
            alloc(("y", L), x(L))
            peak = max(peak, held + loss.get("bwd_tmp_bytes", 0))
            time += loss.get("bwd_time", 0)
        elif kind == "B":
            assert ("y", i + 1) in live and ("xbar", i + 1) in live and has_input(i), f"op {k}: B {i} lacks inputs"
            alloc(("y", i), x(i))
            fig = made_by[i]
            peak = max(peak, held + fig.get("bwd_tmp_bytes", 0))
            if ("x", i) in live:
                free(("x", i))
            free(("y", i + 1))
            free(("xbar", i + 1))
            time += fig["bwd_time"]
        else:
            raise AssertionError(f"op {k}: unknown op {kind}")
    assert ("y", 0) in live, "schedule does not end with y_0"
    return peak, time


def main():
    args = sys.argv[1:]
    bound = args[:1] == ["--bound"]
    if bound:
        args = args[1:]
    plan = json.load(open(args[0]))
    chain = json.load(open(args[1]))
    L = len(chain["stages"])
    peak, time = replay(chain, plan["schedule"])
    base = [{"op": "F_all", "stage": i} for i in range(L)] + [{"op": "loss"}] + \
           [{"op": "B", "stage": i} for i in reversed(range(L))]
    base_peak, base_time = replay(chain, base)
    p = plan["predicted"]
    if bound:  # the exact figures, checked to lie within the chain's
        bad = [f"{name}: plan says {got}, above the replay's bound {want}"
               for name, got, want in [("activation_peak_bytes", p["activation_peak_bytes"], peak),
                                       ("baseline_activation_peak_bytes", p["baseline_activation_peak_bytes"], base_peak)]
               if got > want]
        peak, base_peak = p["activation_peak_bytes"], p["baseline_activation_peak_bytes"]
    checks = [
        ("format", plan["format"], "ckplan-plan/1"),
        ("stages", plan["stages"], L),
        ("activation_peak_bytes", p["activation_peak_bytes"], peak),
        ("peak_bytes", p["peak_bytes"], p["static_bytes"] + peak),
        ("baseline_activation_peak_bytes", p["baseline_activation_peak_bytes"], base_peak),
        ("baseline_peak_bytes", p["baseline_peak_bytes"], p["static_bytes"] + base_peak),
    ]
    bad = (bad if bound else []) + [f"{name}: plan says {got}, replay gives {want}"
                                    for name, got, want in checks if got != want]
    for name, got, want in [("time", p["time"], time), ("baseline_time", p["baseline_time"], base_time),
                            ("overhead", p["overhead"], time / base_time - 1 if base_time else 0)]:
        if abs(got - want) > 1e-9 * max(1.0, abs(want)):
            bad.append(f"{name}: plan says {got}, replay gives {want}")
    if peak > plan["budget_bytes"] - p["static_bytes"]:
        bad.append(f"peak {peak} exceeds the activation budget")
    for line in bad:
        print(line, file=sys.stderr)
    print(f"peak {peak} time {time}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
