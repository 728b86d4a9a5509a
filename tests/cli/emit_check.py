#!/usr/bin/env python3
"""Checks what `ckplan emit` writes, from the plan file alone (not from ckplan's C code), for
tests/cli/suites/emit.sh (docs/emit.md has the semantics).

usage:
  emit_check.py layers PLAN
      prints the indices of the decoder layers the plan checkpoints, as JSON
  emit_check.py pick KIND CKPLAN OUT MODEL [PLAN OPTIONS...]
      plans MODEL at budgets from its baseline's peak down and writes to OUT the first plan
      of KIND (none, some-exact, first-exact, mixed, all, all-nested, inner: see KINDS)
  emit_check.py run hf|fsdp SNIPPET PLAN          (needs torch: run with the venv's python, CKPLAN_PYTHON)
      executes the snippet against a small module tree of Hugging Face's shape
      (model.model.layers, model.config.use_cache) and checks that exactly the plan's
      layers are recomputed in backward and that every gradient equals the unwrapped
      module's, bit for bit, with dropout on
  emit_check.py figures hf|fsdp|megatron|deepspeed OUTPUT PLAN CHAIN CKPLAN
      builds the schedule that the output expresses, runs it with `CKPLAN run` (one step)
      and checks that the activation peak the output predicts is the tracked peak measured,
      and within the replay of that schedule on CHAIN (from `ckplan chain`, with
      tests/cli/replay.py: the spec's bound), and that the time it predicts is the replay's
  emit_check.py measure CKPLAN PLAN
      prints the tracked activation peak of one step of PLAN as `CKPLAN run` measures it
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay import replay  # noqa: E402  (the spec's replay, written apart from ckplan's)

LAYER_NODE = re.compile(r"^h\.(\d+)\.")


def stage_layers(plan):
    """For each stage, the decoder layer (instance of block entry h) its nodes lie in, or None."""
    out = []
    for info in plan["stage_info"]:
        found = {int(m.group(1)) for m in map(LAYER_NODE.match, info["nodes"]) if m}
        assert len(found) <= 1, f"stage {info['name']} spans layers {found}"
        out.append(found.pop() if found else None)
    return out


def checkpointed_layers(plan):
    """Layers with a stage that the forward phase (before the loss) runs without F_all."""
    stored = set()
    for op in plan["schedule"]:
        if op["op"] == "loss":
            break
        if op["op"] == "F_all":
            stored.add(op["stage"])
    layers = stage_layers(plan)
    return sorted({k for s, k in enumerate(layers) if k is not None and s not in stored})


def layer_stages(plan, k):
    stages = [s for s, layer in enumerate(stage_layers(plan)) if layer == k]
    return stages[0], stages[-1] + 1


def segments_schedule(L, segments):
    """Checkpointing each segment [a, b) of stages as a unit: F_ck a, F_none the rest; in the
    backward F_all over it again, then B from b-1 down to a. Other stages F_all and B."""
    seg_of = {}
    for a, b in segments:
        for s in range(a, b):
            seg_of[s] = (a, b)
    fwd = []
    for s in range(L):
        op = "F_all" if s not in seg_of else ("F_ck" if seg_of[s][0] == s else "F_none")
        fwd.append({"op": op, "stage": s})
    bwd, s = [], L - 1
    while s >= 0:
        if s not in seg_of:
            bwd.append({"op": "B", "stage": s})
            s -= 1
            continue
        a, b = seg_of[s]
        bwd += [{"op": "F_all", "stage": r} for r in range(a, b)]
        bwd += [{"op": "B", "stage": r} for r in reversed(range(a, b))]
        s = a - 1
    return fwd + [{"op": "loss"}] + bwd


def per_layer_view(plan):
    """What the plan is, per layer: the checkpointed layers, whether checkpointing exactly
    them (each alone) is its schedule, and which of the limits of docs/emit.md it has."""
    layers = stage_layers(plan)
    chosen = checkpointed_layers(plan)
    own = segments_schedule(len(layers), [layer_stages(plan, k) for k in chosen])
    forward = plan["schedule"][:plan["schedule"].index({"op": "loss"})]
    stored = {op["stage"] for op in forward if op["op"] == "F_all"}
    dropped = {op["stage"] for op in forward if op["op"] == "F_none"} - stored
    return {
        "layers": chosen,
        "n_layers": max(k for k in layers if k is not None) + 1,
        "exact": own == plan["schedule"],
        "non_layer": any(k is None and s not in stored for s, k in enumerate(layers)),
        "input_dropped": any(layer_stages(plan, k)[0] in dropped for k in chosen),
        "nested": any(op["op"] in ("F_ck", "F_none") for op in plan["schedule"][len(forward):]),
        "inner_checkpoint": any(op["op"] == "F_ck" and op["stage"] not in stored and layers[op["stage"]] is not None
                                and layer_stages(plan, layers[op["stage"]])[0] != op["stage"] for op in forward),
    }


# What each kind of test plan is, seen per layer.
KINDS = {
    "none": lambda v: not v["layers"],
    "some-exact": lambda v: v["exact"] and 0 < len(v["layers"]) < v["n_layers"] and v["layers"][0] > 0,
    "first-exact": lambda v: v["exact"] and v["layers"] and v["layers"] == list(range(len(v["layers"]))),
    "mixed": lambda v: v["non_layer"] and v["input_dropped"] and len(v["layers"]) < v["n_layers"],
    "all": lambda v: len(v["layers"]) == v["n_layers"],
    "all-nested": lambda v: len(v["layers"]) == v["n_layers"] and v["nested"],
    "inner": lambda v: v["inner_checkpoint"],
}


def pick(kind, ckplan, out, model, args):
    """Plans model (with args) at budgets from the baseline's down to the static memory and
    keeps in out the first plan of that kind: the test plans follow the model's figures."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "p.json")
        subprocess.run([ckplan, "plan", model, "--budget", "1T", "-o", path] + args, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        p = json.load(open(path))["predicted"]
        static, base = p["static_bytes"], p["baseline_activation_peak_bytes"]
        for step in range(100, 9, -1):
            budget = static + base * step // 100
            r = subprocess.run([ckplan, "plan", model, "--budget", str(budget), "-o", path] + args,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if r.returncode == 0 and KINDS[kind](per_layer_view(json.load(open(path)))):
                os.replace(path, out)
                return
    sys.exit(f"pick: no budget gives a plan of kind {kind} for {model} {' '.join(args)}")


def expressed_segments(kind, text, plan):
    n_layers = max(k for k in stage_layers(plan) if k is not None) + 1
    if kind in ("hf", "fsdp"):
        chosen = json.loads(re.search(r"^CKPLAN_CHECKPOINT = (\[[0-9, ]*\])", text, re.M).group(1))
        groups = [[k] for k in chosen]
    elif kind == "deepspeed":
        groups = [[k] for k in json.loads(text)["ckplan"]["checkpoint_layers"]]
    else:
        flags = [line for line in text.splitlines() if line.startswith("--")]
        groups = []
        if flags:
            m = re.fullmatch(r"--recompute-granularity full --recompute-method (block|uniform) "
                             r"--recompute-num-layers (\d+)", flags[0])
            n = int(m.group(2))
            if m.group(1) == "block":
                groups = [[k] for k in range(n)]
            else:
                groups = [list(range(k, min(k + n, n_layers))) for k in range(0, n_layers, n)]
    return [(layer_stages(plan, g[0])[0], layer_stages(plan, g[-1])[1]) for g in groups]


def predicted(kind, text):
    """The activation peak (bytes) and step time (as printed) the output gives for what it expresses."""
    if kind == "deepspeed":
        p = json.loads(text)["ckplan"]["predicted"]
        return p["activation_peak_bytes"], p["time"]
    name = "these flags" if kind == "megatron" else "these layers"
    m = re.search(r"^#   " + name + r" +(\d+) bytes +\S+ \S+ +\S+ \S+ +([0-9.]+) (us|ms|s) ", text, re.M)
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(3)]
    return int(m.group(1)), float(m.group(2)) * scale


def measure(ckplan, plan_path):
    """The tracked activation peak of one step of the plan, as `ckplan run` measures it (the
    plan's figures need not be right: run warns and measures all the same)."""
    with tempfile.TemporaryDirectory() as tmp:
        runs = os.path.join(tmp, "runs.jsonl")
        subprocess.run([ckplan, "run", plan_path, "--steps", "1", "--runs", runs, "--quiet"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return json.loads(open(runs).read().splitlines()[-1])["plan_run"]["activation_peak_bytes"]


def measured_peak(ckplan, plan, schedule):
    """measure() of plan with its schedule replaced, remembered per schedule in the current
    directory (hf, fsdp and deepspeed express the same one)."""
    key = hashlib.sha256(json.dumps([plan["model"], schedule], sort_keys=True).encode()).hexdigest()[:16]
    memo = f"measured-{key}.txt"
    if not os.path.exists(memo):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "expressed.json")
            json.dump(dict(plan, schedule=schedule), open(path, "w"))
            open(memo, "w").write(str(measure(ckplan, path)))
    return int(open(memo).read())


def check_figures(kind, output, plan_path, chain_path, ckplan):
    text = open(output).read()
    plan, chain = json.load(open(plan_path)), json.load(open(chain_path))
    schedule = segments_schedule(len(chain["stages"]), expressed_segments(kind, text, plan))
    bound, time = replay(chain, schedule)
    peak = measured_peak(ckplan, plan, schedule)
    got_peak, got_time = predicted(kind, text)
    assert got_peak == peak, f"{kind}: predicted activation peak {got_peak}, measured {peak}"
    assert peak <= bound, f"{kind}: measured activation peak {peak} above the chain's bound {bound}"
    tolerance = 1e-9 if kind == "deepspeed" else 0.006  # printed as 4 significant digits
    assert abs(got_time - time) <= tolerance * time, f"{kind}: predicted time {got_time}, replay gives {time}"
    fits = plan["predicted"]["static_bytes"] + peak <= plan["budget_bytes"]
    if kind == "deepspeed":
        said = json.loads(text)["ckplan"]["predicted"]["fits_budget"]
    else:
        said = re.search(r"^# [a-z ]+: (within|OVER) the plan's budget", text, re.M).group(1) == "within"
    assert said == fits, f"{kind}: says fits {said}, the replay gives {fits}"
    exact = schedule == plan["schedule"]
    print(json.dumps({"peak": peak, "time": time, "exact": exact, "fits": fits}))


def run_snippet(kind, snippet_path, plan_path):
    import copy
    import types

    import torch
    from torch import nn

    plan = json.load(open(plan_path))
    want = checkpointed_layers(plan)
    n_layers = max(k for k in stage_layers(plan) if k is not None) + 1

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.drop = nn.Dropout(0.25)
            self.calls = 0

        def forward(self, x, scale=1.0):  # a keyword, as HF layers take attention_mask
            self.calls += 1
            return x + self.drop(torch.tanh(self.fc(x))) * scale

    class Inner(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.layers = nn.ModuleList(Layer() for _ in range(n))

    class Model(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.model = Inner(n)
            self.config = types.SimpleNamespace(use_cache=True)
            self.input_hooks = 0

        def enable_input_require_grads(self):  # transformers' hook on the input embeddings
            self.input_hooks += 1

        def forward(self, x):
            for layer in self.model.layers:
                x = layer(x, scale=0.5)
            return (x * x).sum()

    def inner_layers(model):
        """The layers as written, through any wrapper apply_activation_checkpointing put in."""
        return [getattr(m, "_checkpoint_wrapped_module", m) for m in model.model.layers]

    def step(model):
        torch.manual_seed(7)
        x = torch.randn(4, 8, requires_grad=True)
        loss = model(x)
        forwards = [layer.calls for layer in inner_layers(model)]
        loss.backward()
        again = [layer.calls - f for layer, f in zip(inner_layers(model), forwards)]
        grads = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
        return loss.detach(), forwards, again, grads

    torch.manual_seed(0)
    plain = Model(n_layers)
    wrapped = copy.deepcopy(plain)
    exec(compile(open(snippet_path).read(), snippet_path, "exec"), {"model": wrapped})
    loss0, _, again0, grads0 = step(plain)
    loss1, forwards, again, grads = step(wrapped)
    recomputed = [k for k, n in enumerate(again) if n]
    assert forwards == [1] * n_layers, f"forward pass calls per layer: {forwards}"
    assert recomputed == want, f"{kind}: backward recomputed layers {recomputed}, the plan checkpoints {want}"
    assert all(n in (0, 1) for n in again), f"{kind}: recomputations per layer {again}"
    assert torch.equal(loss0, loss1), "loss differs"
    assert len(grads0) == len(grads) and all(torch.equal(a, b) for a, b in zip(grads0, grads)), \
        f"{kind}: gradients differ from the unwrapped module's"
    assert wrapped.input_hooks == 1, f"{kind}: enable_input_require_grads() called {wrapped.input_hooks} times, not once"
    if kind == "hf":
        assert wrapped.config.use_cache is False, "hf: use_cache left on"
    else:
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, CheckpointWrapper
        kinds = [isinstance(m, CheckpointWrapper) for m in wrapped.model.layers]
        assert [k for k, w in enumerate(kinds) if w] == want, f"fsdp: wrapped layers {kinds}"
        impls = {m.checkpoint_impl for m in wrapped.model.layers if isinstance(m, CheckpointWrapper)}
        assert impls <= {CheckpointImpl.NO_REENTRANT}, f"fsdp: checkpoint_impl {impls}, not non-reentrant"
    try:  # the snippet refuses a model with another number of layers
        exec(compile(open(snippet_path).read(), snippet_path, "exec"), {"model": Model(n_layers + 1)})
        raise AssertionError(f"{kind}: a model of {n_layers + 1} layers was not refused")
    except ValueError as e:
        assert "the plan is for" in str(e), e
    print(json.dumps({"checkpointed": want, "recomputed": recomputed}))


def main():
    if sys.argv[1] == "pick":
        pick(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:])
    elif sys.argv[1] == "layers":
        print(json.dumps(checkpointed_layers(json.load(open(sys.argv[2])))))
    elif sys.argv[1] == "run":
        run_snippet(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "figures":
        check_figures(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6])
    elif sys.argv[1] == "measure":
        print(measure(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
