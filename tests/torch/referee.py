"""PyTorch as the second referee of ckplan's memory model (docs/pytorch.md).

usage: LD_PRELOAD=alloc_track.so $CKPLAN_PYTHON referee.py CKPLAN MODEL WORKDIR RESULTS
       [--label NAME] [model options for ckplan...]

For MODEL and every planner: ckplan plans it (at a budget between the smallest plan and the
baseline) and emits the plan as a PyTorch module (`ckplan emit torch`); the module runs a
training step in PyTorch, and three things are checked against ckplan:
  1. saved: the bytes each stage's saving forward keeps, counted with
     torch.autograd.graph.saved_tensors_hooks (each storage once; not the parameters, not
     the stage's input x_i; its output counted), equal the chain's saved_bytes;
  2. peak: the activation peak of the step (forward and backward, .grad buffers already
     allocated), measured by the allocator tracker, is within 2% of the plan's
     predicted.activation_peak_bytes;
  3. gradients: those of the step with the plan equal, bit for bit, those of the plain
     module (no plan, everything stored), dropout on.
Each check prints "ok ..." or "FAIL ..."; RESULTS gets one line per check (TSV) for
docs/benchmarks.md. Exit status 1 when any check failed.
"""

import ctypes
import importlib.util
import json
import subprocess
import sys

import torch

PLANNERS = ["none", "sqrt", "chen", "revolve", "dp"]
PEAK_TOLERANCE = 0.02

track = ctypes.CDLL(None)
for name in ("ck_track_now", "ck_track_peak"):
    getattr(track, name).restype = ctypes.c_size_t


def ckplan(*args):
    return subprocess.run([CKPLAN, *args], capture_output=True, text=True)


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def emit(plan, tag):
    path = "%s/%s.py" % (WORK, tag)
    args = ["emit", "torch", MODEL, "-o", path] + (["--plan", plan] if plan else OPTIONS)
    r = ckplan(*args)
    if r.returncode != 0:
        sys.exit("referee: ckplan %s failed: %s" % (" ".join(args), r.stderr.strip()))
    return load_module(path, tag)


def storage_of(t):
    s = t.untyped_storage()
    return s.data_ptr(), s.nbytes()


def count_saved(mod, model):
    """Installs the hook that records, per stage, the bytes each saving forward keeps."""
    params = {storage_of(p)[0] for p in model.parameters()}
    seen = {}

    def hook(i, leaf, run):
        kept = {}

        def pack(t):
            ptr, nbytes = storage_of(t)
            if ptr not in params and ptr != storage_of(leaf)[0]:
                kept[ptr] = nbytes
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = run()
        ptr, nbytes = storage_of(out)
        kept[ptr] = nbytes
        seen.setdefault(i, set()).add(sum(kept.values()))
        return out

    mod.FORWARD_HOOK = hook
    return seen


def step(model, inputs):
    loss = model(*inputs)
    loss.backward()
    return loss.item()


def grads(model):
    return [p.grad.clone() for p in model.parameters() if p.requires_grad]


def measured_peak(model, inputs, input_bytes):
    """The activation peak of a step whose .grad buffers exist already, as zero_grad(
    set_to_none=False) leaves them, which is what ckplan's own executor assumes (PyTorch 2's
    default, set_to_none=True, is the hf profile's concern): the most held beyond what was
    held before the forward, plus
    x_0 when ckplan counts it as an activation (a float input: the chain's input_bytes)."""
    for p in model.parameters():
        if p.grad is not None:
            p.grad.zero_()
    base = track.ck_track_now()
    track.ck_track_reset_peak()
    step(model, inputs)
    return track.ck_track_peak() - base + input_bytes


def report(check, planner, ok, detail, row):
    print("%s %s %s %s: %s" % ("ok" if ok else "FAIL", LABEL, planner, check, detail))
    RESULTS.write("\t".join([LABEL, planner, check, "ok" if ok else "FAIL"] + row) + "\n")
    return ok


def budget_between():
    """The static memory and 60% of the baseline's activation peak: most planners fit it,
    and it makes them recompute."""
    base = json.load(open(plan_at("none", "1000T", "base")))["predicted"]
    return base["static_bytes"] + base["baseline_activation_peak_bytes"] * 6 // 10


def plan_at(planner, budget, tag):
    path = "%s/%s.json" % (WORK, tag)
    r = ckplan("plan", MODEL, *OPTIONS, "--planner", planner, "--budget", str(budget), "-o", path)
    if r.returncode == 3:
        return None
    if r.returncode != 0:
        sys.exit("referee: ckplan plan %s failed: %s" % (MODEL, r.stderr.strip()))
    return path


def ckplan_figures(plan):
    """What `ckplan run` predicts for the plan (the replay of its compiled program, exact
    where the chain's figure is a bound) and measures on its own executor."""
    runs = "%s/runs.jsonl" % WORK
    r = ckplan("run", plan, "--steps", "1", "--runs", runs, "--quiet")
    if r.returncode != 0:
        sys.exit("referee: ckplan run %s failed: %s" % (plan, r.stderr.strip()))
    record = json.loads(open(runs).read().splitlines()[-1])
    return (record["predicted"]["activation_peak_bytes"],
            record["plan_run"]["activation_peak_bytes"])


def check_planner(planner, budget, chain, plain_grads):
    """The three checks for the planner's plan at budget, or a larger one where it has
    none (sqrt and chen do not reach dp's smallest plans)."""
    plan = None
    for part in (1.0, 1.25, 1.5, 2.0):
        plan = plan_at(planner, int(budget * part) if planner != "none" else "1000T", planner)
        if plan:
            break
    if plan is None:
        print("skip %s %s: no plan fits %d bytes" % (LABEL, planner, budget * 2))
        return True
    predicted, own = ckplan_figures(plan)
    mod = emit(plan, "%s_%s" % (LABEL.replace("-", "_"), planner))
    model, inputs = mod.build(0)
    saved = count_saved(mod, model)
    step(model, inputs)
    ok = report("gradients", planner, all(torch.equal(a, b) for a, b in zip(grads(model), plain_grads)),
                "with the plan equal the plain module's bit for bit", [])
    for i, s in enumerate(chain["stages"]):
        for got in sorted(saved.get(i, ())):
            ok &= report("saved", planner, got == s["saved_bytes"],
                         "stage %s saves %d bytes, ckplan %d" % (s["name"], got, s["saved_bytes"]),
                         [s["name"], str(got), str(s["saved_bytes"])])
    mod.FORWARD_HOOK = None
    peak = measured_peak(model, inputs, chain["input_bytes"])
    ratio = peak / predicted if predicted else float("inf")
    ok &= report("peak", planner, abs(ratio - 1) <= PEAK_TOLERANCE,
                 "PyTorch %d bytes, ckplan %d (%+.2f%%)" % (peak, predicted, (ratio - 1) * 100),
                 ["", str(peak), str(predicted), str(own)])
    return ok


def main():
    global CKPLAN, MODEL, WORK, RESULTS, LABEL, OPTIONS
    CKPLAN, MODEL, WORK, results = sys.argv[1:5]
    rest = sys.argv[5:]
    LABEL = rest[1] if rest[:1] == ["--label"] else MODEL.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    OPTIONS = rest[2:] if rest[:1] == ["--label"] else rest
    torch.set_num_threads(1)
    RESULTS = open(results, "a")
    r = ckplan("chain", MODEL, *OPTIONS, "-o", "%s/chain.json" % WORK)
    if r.returncode != 0:
        sys.exit("referee: ckplan chain %s failed: %s" % (MODEL, r.stderr.strip()))
    chain = json.load(open("%s/chain.json" % WORK))
    plain = emit(None, LABEL.replace("-", "_") + "_plain")
    model, inputs = plain.build(0)
    step(model, inputs)
    plain_grads = grads(model)
    # Plain autograd's own peak, for the record (docs/pytorch.md: it frees what the chain
    # model holds to B, and holds a tied head's gradient): not a check.
    RESULTS.write("\t".join([LABEL, "plain", "info", "info", "",
                             str(measured_peak(model, inputs, chain["input_bytes"]))]) + "\n")
    budget = budget_between()
    ok = all([check_planner(p, budget, chain, plain_grads) for p in PLANNERS])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
