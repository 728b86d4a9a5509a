"""Median wall-clock seconds of one PyTorch training step of an emitted module.

usage: /usr/bin/python3 torch_step.py MODULE.py MODEL.json THREADS STEPS WARMUP

MODULE.py has the interface of `ckplan emit torch` (build(seed) -> (model, inputs);
model(*inputs) -> the scalar loss). A step is what ckplan's executor times for a step:
the gradients cleared, the forward and the loss, the backward, and the optimizer's update,
with the optimizer and hyperparameters that ckplan runs for the model file's
training.optimizer (sim/exec.c: Adam and AdamW lr 1e-3, AdamW weight decay 0.01, SGD and
momentum lr 1e-2, momentum 0.9). Prints the median of STEPS timed steps after WARMUP."""
import importlib.util
import json
import statistics
import sys
import time

import torch


def optimizer_for(model_file, params):
    name = json.load(open(model_file)).get("training", {}).get("optimizer", "adam")
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-2)
    if name == "momentum":
        return torch.optim.SGD(params, lr=1e-2, momentum=0.9)
    sys.exit(f"torch_step.py: {model_file}: optimizer {name} is not run by ckplan's executor")


def main():
    module_file, model_file = sys.argv[1], sys.argv[2]
    threads, steps, warmup = (int(a) for a in sys.argv[3:6])
    torch.set_num_threads(threads)
    spec = importlib.util.spec_from_file_location("emitted", module_file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model, inputs = mod.build(seed=0)
    model.train()
    opt = optimizer_for(model_file, [p for p in model.parameters() if p.requires_grad])
    times = []
    for k in range(warmup + steps):
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(*inputs)
        loss.backward()
        opt.step()
        if k >= warmup:
            times.append(time.perf_counter() - t)
    print(f"{statistics.median(times):.9f}")


main()
