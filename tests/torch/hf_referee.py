"""Real Hugging Face transformers (and PEFT) as the referee of ckplan's figures for a config
(docs/pytorch.md, "The Hugging Face referee").

usage: LD_PRELOAD=alloc_track.so $CKPLAN_PYTHON hf_referee.py CKPLAN CONFIG WORKDIR RESULTS
       [--attention eager|sdpa] [--seq T] [--batch B] [--device cpu|cuda] [--dtype f32|bf16]

CONFIG is a config.json of a family `ckplan import` supports. The model is built from it
with random weights (AutoModelForCausalLM.from_config: nothing is loaded from a hub), in
f32 on the CPU, use_cache off, dropout as the config has it, and trained as users train it:
forward with labels (the model's own loss), backward, AdamW's step (Trainer's default,
fused), then PyTorch's default zero_grad() (gradients set to None). The allocation tracker
(alloc_track.c) takes the whole second step's peak, less what the process held before the
model was built: parameters, AdamW's state, the gradients autograd makes, activations and
every temporary; the first step makes AdamW's state. ckplan plans with --impl hf-cpu: hf as
PyTorch runs it on the CPU (its dropout masks), fp32.

--device cuda runs the same on a GPU (no LD_PRELOAD): the peak is PyTorch's caching
allocator's max_memory_allocated, whose blocks are rounded up to 512 bytes, and ckplan plans
with --impl hf (CUDA's byte dropout masks and sdpa kernels). cuBLAS's workspaces (one per
thread and stream, 32 MiB each on Hopper) are made by a warm-up step of the model before
any base is read, so that they count as the process's, not a case's. The model is made on
the GPU (under torch.device), not moved there. Where two identical steps give different
gradients (cuDNN's attention backward in 16 bits), the checkpointed step's may differ from
the plain one's by at most 4 times as much.

--dtype bf16 trains the model in bfloat16 throughout (parameters, gradients, AdamW's state),
against ckplan's --recipe bf16.

Each case is run as users run it and set beside what ckplan predicts for it:
  none      store everything                     ckplan plan --planner none
  every     model.gradient_checkpointing_enable(use_reentrant=False), every layer
                                                 ckplan plan --planner every
  foreach, for-loop  store everything with torch.optim's foreach or for-loop AdamW
                                                 ckplan plan --optimizer-step ...
  dp        a dp plan at 60% of the way from its minimum to the baseline, applied to the
            real model by the snippet `ckplan emit hf` writes   ckplan plan --planner dp
  lora      PEFT LoRA at rank 8 on the modules ckplan's --lora adapts, the embedding's output
            made to require grad (enable_input_require_grads(), as ckplan assumes)
                                                 ckplan plan --lora 8
  lora-every  the same with every layer checkpointed, as gradient_checkpointing_enable()
            before get_peft_model (which install that hook)  ckplan plan --lora 8 --planner every
  lora-dp   the same with a dp plan at 60%, applied by `ckplan emit hf`'s snippet (which
            installs the hook too)   ckplan plan --lora 8 --planner dp
  accum2    two micro-batches accumulated before the step   ckplan plan --grad-accum 2

Checks (each "ok ..." or "FAIL ..."):
  peak: each case's measured peak within 2% of ckplan's predicted peak;
  gradients: with checkpointing (every, dp) the gradients equal, bit for bit, those of the
    same model with the same seed and no checkpointing, dropout on;
  emit: the snippet checkpoints exactly the layers the plan names (counted by forward
    calls in the backward).
RESULTS gets one TSV line per case: label, attention, case, torch peak bytes, ckplan peak
bytes, the ratio, the bytes held before the step by torch and ckplan's static bytes.
"""

import argparse
import ctypes
import gc
import json
import os
import re
import subprocess
import sys
import warnings

import torch

# transformers 5 renames gradient checkpointing "activation checkpointing"; the old names,
# which users' code and the issue's recipe call, still work.
warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*deprecated")


class HostTracker:
    """alloc_track.c's counters, LD_PRELOADed: every byte malloc hands out."""

    def __init__(self):
        self.lib = ctypes.CDLL(None)
        for name in ("ck_track_now", "ck_track_peak"):
            getattr(self.lib, name).restype = ctypes.c_size_t

    def now(self):
        return self.lib.ck_track_now()

    def reset_peak(self):
        self.lib.ck_track_reset_peak()

    def peak(self):
        return self.lib.ck_track_peak()


class CudaTracker:
    """PyTorch's caching allocator on the current GPU: the bytes of live blocks."""

    def __init__(self):
        self.workspaces = 0

    def warm_up(self):
        """What a process makes once and keeps (cuBLAS's workspaces, of the main thread and
        of autograd's, which runs the recomputed products), made by one step of the model
        itself, every layer checkpointed, before any case reads its base: the first case's
        otherwise (seen: 1 MiB more held from the first every-layer case on, in the families
        whose projections have biases, which a checkpointed nn.Linear alone did not make)."""
        before = self.now()
        model, _ = build_model(seed=0)
        backward(checkpoint_every_layer(model, None), batches(1, seed=1))
        del model
        gc.collect()
        self.workspaces = self.now() - before

    def now(self):
        torch.cuda.synchronize()
        return torch.cuda.memory_allocated()

    def reset_peak(self):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()

    def peak(self):
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated()

# What ckplan's --lora adapts, as PEFT's target module names of each family's code
# (ckplan's help: q, k, v, o and the MLP's projections).
LORA_TARGETS = {
    "gpt2": ["c_attn", "c_proj", "c_fc"],
    "opt": ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"],
    "phi3": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"],
}
LORA_DEFAULT = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def ckplan(*args):
    r = subprocess.run([ARGS.ckplan, *args], capture_output=True, text=True)
    return r


def plan(*extra):
    """ckplan's plan of CONFIG with the workload's options; None when ckplan refuses it."""
    out = os.path.join(ARGS.workdir, "plan-%d.json" % len(os.listdir(ARGS.workdir)))
    r = ckplan("plan", ARGS.config, "--recipe", ARGS.recipe, "--impl", ARGS.impl, "--attention", ARGS.attention,
               "--seq", str(ARGS.seq), "--batch", str(ARGS.batch), "--json", "-o", out, *extra)
    if r.returncode not in (0, 3):
        return None, r.stderr.strip()
    return json.load(open(out)), out


def build_model(seed):
    """The model, and what the process held before it: tensors PyTorch and transformers
    allocate for themselves (18 KB at import here), which are not the step's."""
    from transformers import AutoConfig, AutoModelForCausalLM
    gc.collect()
    base = TRACK.now()

    raw = json.load(open(ARGS.config))
    raw = {k: v for k, v in raw.items() if k not in ("architectures",)}
    model_type = raw.pop("model_type")
    config = AutoConfig.for_model(model_type, **raw)
    if config.pad_token_id is not None and config.pad_token_id >= config.vocab_size:
        config.pad_token_id = None  # a family default (Phi-3's 32000) past a tiny vocabulary
    config.use_cache = False
    torch.manual_seed(seed)
    with torch.device(ARGS.device):
        model = AutoModelForCausalLM.from_config(config, attn_implementation=ARGS.attention,
                                                 dtype=ARGS.torch_dtype)
    model.train()
    model.ckplan_base = base
    return model, model_type


def batches(n, seed):
    g = torch.Generator().manual_seed(seed)
    vocab = json.load(open(ARGS.config))["vocab_size"]
    return [torch.randint(0, vocab, (ARGS.batch, ARGS.seq), generator=g).to(ARGS.device)
            for _ in range(n)]


def backward(model, micro):
    for ids in micro:
        loss = model(input_ids=ids, labels=ids).loss / len(micro)
        loss.backward()


def step_peak(model, micro_batches=1, step="fused"):
    """The second step's peak and what was held just before it, beyond what the process
    held before the model was built. Models of earlier cases that reference cycles keep
    alive (a checkpoint wrapper's closure holds its layer) are collected first. AdamW is
    Trainer's default (adamw_torch_fused), or torch.optim's foreach or for-loop step."""
    gc.collect()
    how = {"fused": {"fused": True}, "foreach": {"foreach": True}, "for-loop": {"foreach": False}}[step]
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3, **how)
    for step in range(2):
        micro = batches(micro_batches, seed=100 + step)
        torch.manual_seed(5 + step)
        if step == 1:
            before = TRACK.now()
            TRACK.reset_peak()
        backward(model, micro)
        opt.step()
        opt.zero_grad()
    base = model.ckplan_base  # PEFT's wrapper passes attributes through to the model
    return TRACK.peak() - base, before - base


def gradients(model):
    """The gradients of one step, from none."""
    for p in model.parameters():
        p.grad = None
    torch.manual_seed(11)
    backward(model, batches(1, seed=7))
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]


def largest_difference(want, got):
    """The largest difference of two lists of gradients, in each tensor's largest value."""
    return max(float((a - b).abs().max() / b.abs().max().clamp_min(1e-30)) for a, b in zip(want, got))


def reference_gradients(model):
    """The gradients of the model without checkpointing, and how far two identical steps of
    it differ: nothing on the CPU; on CUDA, in 16 bits, the attention kernels' backward
    (cuDNN's on an H200) adds its parts with atomics in an order that varies from run to
    run, deterministic algorithms or not (measured: 1.8% of a tensor's largest value)."""
    first = gradients(model)
    if ARGS.device != "cuda":
        return first, 0.0
    return first, largest_difference(first, gradients(model))


def same_gradients(reference, got):
    """Whether the gradients equal the reference's (reference_gradients) bit for bit, or,
    where two identical steps differ, by no more than 4 times as much: a recomputation that
    drew other dropout masks or read other inputs differs by the gradients' own size. A
    detail says by how much they differ."""
    want, noise = reference
    if all(torch.equal(a, b) for a, b in zip(want, got)):
        return True, "bit for bit"
    worst = largest_difference(want, got)
    if noise > 0:
        return worst <= 4 * noise, ("largest difference %.3g of the tensor's largest value, two identical "
                                    "steps without it %.3g (at most 4 times that)" % (worst, noise))
    return False, "not bit for bit: largest difference %.3g of the tensor's largest value" % worst


def report(case, ok, detail):
    word = "ok" if ok else "FAIL"
    print("%s %s %s %s: %s" % (word, ARGS.label, ARGS.attention, case, detail), flush=True)
    FAILED.append(0 if ok else 1)


PEAK_BAR = 0.02


def row(case, torch_peak, before, doc):
    predicted = doc["predicted"]["peak_bytes"] if doc else 0
    ratio = torch_peak / predicted if predicted else float("nan")
    static = doc["predicted"]["static_bytes"] if doc else 0
    RESULTS.write("%s\t%s\t%s\t%d\t%d\t%.4f\t%d\t%d\n" % (ARGS.label, ARGS.attention, case,
                                                       torch_peak, predicted, ratio, before, static))
    within = abs(ratio - 1) <= PEAK_BAR
    detail = "torch %d, ckplan %d (%.3fx)" % (torch_peak, predicted, ratio)
    report(case + " peak", within, detail + (" within 2%" if within else ", beyond 2%"))


def layer_list(model):
    """The decoder layers of a plain transformers causal LM, written apart from the lookup
    `emit hf` prints, so that the referee does not check that lookup against itself."""
    for path in ("model.layers", "transformer.h", "model.decoder.layers"):
        obj = model
        try:
            for part in path.split("."):
                obj = getattr(obj, part)
            return obj
        except AttributeError:
            continue
    raise AttributeError("no decoder layers found")


def count_forwards(model):
    """Wraps each layer's forward to count its calls; returns the counters."""
    calls = []
    for i, layer in enumerate(layer_list(model)):
        calls.append(0)
        original = layer.forward

        def counted(*a, _i=i, _f=original, **k):
            calls[_i] += 1
            return _f(*a, **k)

        layer.forward = counted
    return calls


def measured(case, doc, prepare=None, micro_batches=1, step="fused"):
    """One case's step measured on a fresh model (prepare, when given, changes it and
    returns the model to train), in a row beside ckplan's figures. The model is gone when
    this returns, before the next is built."""
    model, model_type = build_model(seed=0)
    if prepare:
        model = prepare(model, model_type)
    if model is None:
        return
    peak, before = step_peak(model, micro_batches, step)
    row(case, peak, before, doc)
    if ARGS.device == "cuda":
        print("reserved %s %s %s: %d bytes at most, %d allocated" % (
            ARGS.label, ARGS.attention, case, torch.cuda.max_memory_reserved(), peak), flush=True)


def checkpoint_every_layer(model, _):
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def case_plain_and_every():
    measured("none", plan("--planner", "none", "--budget", "1T")[0])
    measured("every", plan("--planner", "every", "--budget", "1T")[0], checkpoint_every_layer)
    for step in ("foreach", "for-loop"):
        measured(step, plan("--planner", "none", "--budget", "1T", "--optimizer-step", step)[0], step=step)
    plain, _ = build_model(seed=0)
    ckpt, _ = build_model(seed=0)
    ckpt.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    same, detail = same_gradients(reference_gradients(plain), gradients(ckpt))
    report("every gradients", same, "every layer checkpointed equals storing everything " + detail)


def smallest_budget(static, *extra):
    """dp's smallest plan, from the message of a plan that cannot fit (exit 3): a budget of
    the static memory alone holds no activations."""
    r = ckplan("plan", ARGS.config, "--recipe", ARGS.recipe, "--impl", ARGS.impl, "--attention", ARGS.attention,
               "--seq", str(ARGS.seq), "--batch", str(ARGS.batch), "--budget", str(static), *extra)
    m = re.search(r"smallest plan needs [^(]*\((\d+) bytes\)", r.stderr)
    if r.returncode != 3 or not m:
        sys.exit("hf_referee: no smallest plan in: " + r.stderr[-400:])
    return int(m.group(1))


def dp_plan(case, *extra):
    """A dp plan 60% of the way from its smallest to storing everything, and a function that
    applies it to a model through the snippet `ckplan emit hf` writes (None, reported, when
    ckplan or the snippet fails)."""
    none_doc, _ = plan("--planner", "none", "--budget", "1T", *extra)
    predicted = none_doc["predicted"]
    low, high = smallest_budget(predicted["static_bytes"], *extra), predicted["peak_bytes"]
    budget = low + (high - low) * 6 // 10
    doc, path = plan("--planner", "dp", "--budget", str(budget), *extra)
    snippet = ckplan("emit", "hf", path)
    if snippet.returncode != 0:
        report(case + " emit", False, "ckplan emit hf failed: " + snippet.stderr.strip()[:300])
        return doc, path, None

    def apply_snippet(model, _):
        try:
            exec(compile(snippet.stdout, "emit-hf", "exec"), {"model": model})
        except Exception as e:  # noqa: BLE001 - the snippet's own refusal is the finding
            report(case + " emit", False, "the snippet fails on transformers' model: %s: %s" % (type(e).__name__, e))
            return None
        return model

    return doc, path, apply_snippet


def case_dp():
    doc, path, apply_snippet = dp_plan("dp")
    if not apply_snippet:
        return
    want = json.loads(subprocess.run([sys.executable, os.path.join(HERE, "..", "cli", "emit_check.py"),
                                      "layers", path], capture_output=True, text=True).stdout)
    measured("dp", doc, apply_snippet)
    plain, _ = build_model(seed=0)
    applied, _ = build_model(seed=0)
    calls = count_forwards(applied)  # under the snippet's wrapper: recomputation counts too
    apply_snippet(applied, None)
    grads = gradients(applied)
    again = [i for i, n in enumerate(calls) if n > 1]
    report("dp layers", again == want, "recomputed layers %s, the plan's %s" % (again, want))
    same, detail = same_gradients(reference_gradients(plain), grads)
    report("dp gradients", same, "the plan applied equals storing everything " + detail)


def case_lora():
    import peft

    def adapt(model, model_type):
        config = peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0,
                                 target_modules=LORA_TARGETS.get(model_type, LORA_DEFAULT))
        return peft.get_peft_model(model, config)

    def adapt_hooked(model, model_type):
        """ckplan assumes the frozen embedding's output requires grad, as
        gradient_checkpointing_enable() makes it (and get_peft_model after it): without
        checkpointing, installed by hand. Plain PEFT holds a little less (docs/pytorch.md)."""
        model = adapt(model, model_type)
        model.enable_input_require_grads()
        return model

    measured("lora", plan("--planner", "none", "--budget", "1T", "--lora", "8")[0], adapt_hooked)
    measured("lora-every", plan("--planner", "every", "--budget", "1T", "--lora", "8")[0],
             lambda model, model_type: adapt(checkpoint_every_layer(model, model_type), model_type))
    doc, _, apply_snippet = dp_plan("lora-dp", "--lora", "8")
    if apply_snippet:
        measured("lora-dp", doc, lambda model, model_type: apply_snippet(adapt(model, model_type), model_type))


def case_accum():
    measured("accum2", plan("--planner", "none", "--budget", "1T", "--grad-accum", "2")[0], micro_batches=2)


def main():
    global ARGS, RESULTS, FAILED, HERE, TRACK
    p = argparse.ArgumentParser()
    p.add_argument("ckplan")
    p.add_argument("config")
    p.add_argument("workdir")
    p.add_argument("results")
    p.add_argument("--label", default=None)
    p.add_argument("--attention", default="eager", choices=["eager", "sdpa"])
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    ARGS = p.parse_args()
    ARGS.impl = "hf" if ARGS.device == "cuda" else "hf-cpu"
    ARGS.recipe, ARGS.torch_dtype = {"f32": ("fp32", torch.float32),
                                     "bf16": ("bf16", torch.bfloat16)}[ARGS.dtype]
    ARGS.label = ARGS.label or os.path.basename(ARGS.config).replace(".json", "")
    HERE = os.path.dirname(os.path.abspath(__file__))
    os.makedirs(ARGS.workdir, exist_ok=True)
    torch.set_num_threads(1)
    TRACK = CudaTracker() if ARGS.device == "cuda" else HostTracker()
    if ARGS.device == "cuda":
        TRACK.warm_up()
        print("cuda: %s, %d bytes made by the warm-up step (cuBLAS's workspaces), PyTorch %s" % (
            torch.cuda.get_device_name(), TRACK.workspaces, torch.__version__), flush=True)
    FAILED = []
    with open(ARGS.results, "a") as RESULTS:
        case_plain_and_every()
        case_dp()
        case_lora()
        case_accum()
    sys.exit(1 if any(FAILED) else 0)


if __name__ == "__main__":
    main()
