"""What transformers' own modeling code keeps for backward, stage by stage (issue 23).

usage: .venv/bin/python tests/torch/hf_saved.py [--ckplan ./ckplan] [--json OUT]
       [--batch B] [--seq T] [--attention eager,sdpa] [--impl hf] [--lora R] [CONFIG ...]

For each Hugging Face config (default: models/hf/*.json) and attention implementation, the
model is built with random weights (AutoModelForCausalLM.from_config, f32 or --dtype, CPU, training
mode, use_cache off) and one forward with its loss (labels = the input ids) runs under
torch.autograd.graph.saved_tensors_hooks. Every tensor autograd saves is attributed to the
stage whose forward was running (the embeddings, each decoder layer, the final norm, the
head, the loss) and counted by storage, as tests/torch/referee.py counts ckplan's own
modules: each storage once, not the parameters, not the input ids or labels, not the
stage's input, and the stage's output counted. The graph is then walked from the loss to
name the backward functions that hold each storage. The embedding stage is whatever runs
before the first layer (ckplan's dropout or scale after the embedding may be stages of
their own: compare their sum).

F.dropout is replaced by native_dropout, the kernel CUDA runs, which keeps a 1-byte mask
(CPU's F.dropout keeps an f32 one; --cpu-dropout measures that). Dropout inside SDPA is
ATen's own: on CPU, SDPA with dropout runs its math path (the probabilities and an f32
mask), where CUDA runs a flash or memory-efficient kernel.

With --lora R, PEFT's LoRA at rank R adapts the modules ckplan's --lora adapts (those of
tests/torch/hf_referee.py), as peft.get_peft_model does, adapters and all in its default
dtypes. With --ckplan, `ckplan chain` of the same config (--recipe fp32, the same attention, batch
and sequence, and --impl when given) is printed beside it, stage by stage.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import torch
import transformers


def storage(t):
    s = t.untyped_storage()
    return s.data_ptr(), s.nbytes()


class Recorder:
    """Attributes saved tensors to the stage running when autograd saves them."""

    def __init__(self, model):
        self.scope = "embed"
        self.kept = {}      # scope -> {storage ptr: (bytes, shape, dtype)}
        self.saved_in = {}  # storage ptr -> the scopes that save it
        self.bounds = {}    # scope -> (input storage ptr, output storage ptr)
        self.params = {storage(p)[0] for p in model.parameters()}
        self.ignored = set()
        self.sizes = {}     # storage ptr -> bytes, of the stages' inputs and outputs

    def note(self, t):
        if not torch.is_tensor(t):
            return None
        ptr, nbytes = storage(t)
        self.sizes[ptr] = nbytes
        return ptr

    def pack(self, t):
        ptr, nbytes = storage(t)
        if ptr not in self.params and ptr not in self.ignored:
            self.kept.setdefault(self.scope, {})[ptr] = (nbytes, tuple(t.shape), str(t.dtype))
            self.saved_in.setdefault(ptr, set()).add(self.scope)
        return t

    def enter(self, name):
        def hook(module, args, kwargs):
            x = args[0] if args else kwargs.get("hidden_states", kwargs.get("input"))
            self.scope = name
            self.bounds[name] = [self.note(x), None]
        return hook

    def leave(self, name, after):
        def hook(module, args, kwargs, out):
            y = out[0] if isinstance(out, tuple) else out
            self.bounds[name][1] = self.note(y)
            self.scope = after
        return hook


def stages_of(model):
    """(name, module, scope after it) for the decoder layers and the head; the embeddings
    are what runs before the first layer, the final norm what runs between the last layer
    and the head."""
    body = model.base_model
    layers = body.layers if hasattr(body, "layers") else getattr(body, "h", None)
    if layers is None:
        layers = body.decoder.layers  # OPT
    out = [("h.%d" % i, layer, "norm_f") for i, layer in enumerate(layers)]
    out.append(("lm_head", model.lm_head, "loss"))
    return out


def saved_by_function(loss):
    """storage ptr -> the names of the backward functions that save it."""
    names, seen, todo = {}, set(), [loss.grad_fn]
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        for attr in dir(fn):
            if not attr.startswith("_saved_"):
                continue
            try:
                v = getattr(fn, attr)
            except RuntimeError:
                continue
            for t in v if isinstance(v, (tuple, list)) else [v]:
                if torch.is_tensor(t):
                    names.setdefault(storage(t)[0], set()).add(fn.name())
        todo.extend(f for f, _ in fn.next_functions)
    return names


def cuda_dropout(x, p=0.5, training=True, inplace=False):
    """F.dropout as CUDA runs it: the fused native_dropout, which keeps a 1-byte mask. On
    CPU, F.dropout multiplies by an f32 mask and keeps that (4 bytes an element)."""
    if not training or p == 0:
        return x
    return torch.native_dropout(x, p, True)[0]


def measure(config_path, attention, batch, seq, dtype, lora=0):
    cfg = json.load(open(config_path))
    cfg["use_cache"] = False
    cfg.setdefault("pad_token_id", None)  # Phi-3's default, 32000, is past a tiny vocabulary
    config = transformers.AutoConfig.for_model(**cfg)
    config._attn_implementation = attention
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attention,
                                                          dtype=dtype)
    model.train()
    if lora:
        import peft
        from hf_referee import LORA_DEFAULT, LORA_TARGETS
        targets = LORA_TARGETS.get(cfg["model_type"], LORA_DEFAULT)
        # in place: model's modules become PEFT's, and model runs them
        peft.get_peft_model(model, peft.LoraConfig(r=lora, lora_alpha=2 * lora, lora_dropout=0.0,
                                                   target_modules=targets))
    ids = torch.randint(cfg["vocab_size"], (batch, seq))
    rec = Recorder(model)
    rec.ignored.add(storage(ids)[0])
    handles = []
    for name, module, after in stages_of(model):
        handles.append(module.register_forward_pre_hook(rec.enter(name), with_kwargs=True))
        handles.append(module.register_forward_hook(rec.leave(name, after), with_kwargs=True))
    def embed_output(module, args, kwargs):
        rec.bounds.setdefault("embed", [None, rec.note(args[0] if args else kwargs["hidden_states"])])

    first = stages_of(model)[0][1]
    handles.insert(0, first.register_forward_pre_hook(embed_output, with_kwargs=True))
    with torch.autograd.graph.saved_tensors_hooks(rec.pack, lambda t: t):
        out = model(input_ids=ids, labels=ids)
    for h in handles:
        h.remove()
    fns = saved_by_function(out.loss)
    names = [n for n, _, _ in stages_of(model)]
    last = names[-2]
    rec.bounds["norm_f"] = [rec.bounds[last][1], rec.bounds["lm_head"][0]]
    rec.bounds["loss"] = [rec.bounds["lm_head"][1], None]
    result = []
    for scope in ["embed"] + names[:-1] + ["norm_f", "lm_head", "loss"]:
        kept = dict(rec.kept.get(scope, {}))
        first_in, last_out = rec.bounds.get(scope, [None, None])
        kept.pop(first_in, None)
        tensors = [{"bytes": b, "shape": list(s), "dtype": d, "saved_by": sorted(fns.get(p, ())),
                    "shared": len(rec.saved_in[p]) > 1} for p, (b, s, d) in kept.items()]
        total = sum(b for b, _, _ in kept.values())
        if last_out is not None and last_out not in kept:
            total += rec.sizes[last_out]
            tensors.append({"bytes": rec.sizes[last_out], "shape": [],
                            "dtype": "", "saved_by": ["(stage output)"], "shared": False})
        result.append({"stage": scope, "saved_bytes": total, "tensors": tensors})
    return result


def ckplan_chain(ckplan, config_path, attention, batch, seq, impl, recipe, lora=0):
    with tempfile.TemporaryDirectory() as work:
        chain = os.path.join(work, "chain.json")
        args = [ckplan, "chain", config_path, "--recipe", recipe, "--attention", attention,
                "--batch", str(batch), "--seq", str(seq), "-o", chain]
        if impl:
            args += ["--impl", impl]
        if lora:
            args += ["--lora", str(lora)]
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            return None, r.stderr.strip()
        return {s["name"]: s["saved_bytes"] for s in json.load(open(chain))["stages"]}, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="*")
    ap.add_argument("--ckplan")
    ap.add_argument("--impl")
    ap.add_argument("--json")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--attention", default="eager,sdpa")
    ap.add_argument("--dtype", default="float32", help="float32 or bfloat16 (then ckplan's "
                    "recipe is bf16)")
    ap.add_argument("--brief", action="store_true", help="totals only")
    ap.add_argument("--lora", type=int, default=0, help="PEFT LoRA at this rank (ckplan's --lora)")
    ap.add_argument("--cpu-dropout", action="store_true",
                    help="keep CPU's F.dropout (f32 masks) instead of CUDA's native_dropout")
    a = ap.parse_args()
    if not a.cpu_dropout:
        torch.nn.functional.dropout = cuda_dropout
    torch.set_num_threads(1)
    configs = a.configs or sorted(glob.glob("models/hf/*.json"))
    everything = {}
    worst = 0
    for path in configs:
        for attention in a.attention.split(","):
            try:
                stages = measure(path, attention, a.batch, a.seq, getattr(torch, a.dtype), a.lora)
            except ValueError as e:  # gemma2 has no sdpa path (its soft-capping)
                print("== %s, attention %s: not run by transformers (%s)" % (path, attention,
                                                                            str(e).split(".")[0]))
                continue
            everything["%s %s" % (path, attention)] = stages
            recipe = "bf16" if a.dtype == "bfloat16" else "fp32"
            theirs, why = (ckplan_chain(a.ckplan, path, attention, a.batch, a.seq, a.impl, recipe, a.lora)
                           if a.ckplan else (None, None))
            print("== %s, attention %s, %s, batch %d, seq %d" % (path, attention, a.dtype, a.batch,
                                                                 a.seq))
            if why:
                print("   ckplan: %s" % why)
            for s in stages:
                mine = theirs.get(s["stage"]) if theirs else None
                diff = "" if mine is None else "  ckplan %d (%+d)" % (mine, mine - s["saved_bytes"])
                if mine is not None and s["stage"] != "loss":
                    worst = max(worst, abs(mine - s["saved_bytes"]))
                print("  %-8s %9d%s" % (s["stage"], s["saved_bytes"], diff))
                if a.brief:
                    continue
                for t in sorted(s["tensors"], key=lambda t: -t["bytes"]):
                    print("      %8d %-16s %-14s %s%s" % (
                        t["bytes"], "x".join(map(str, t["shape"])), t["dtype"].replace("torch.", ""),
                        ",".join(t["saved_by"]), " (saved by other stages too)" if t["shared"] else ""))
    if a.json:
        json.dump(everything, open(a.json, "w"), indent=1)
    if a.ckplan:
        print("largest difference of a stage's saved bytes (loss aside): %d" % worst)


if __name__ == "__main__":
    sys.exit(main())
