"""Median wall-clock seconds of one PyTorch training step of an emitted module.

usage: $CKPLAN_PYTHON torch_step.py MODULE.py THREADS STEPS WARMUP

MODULE.py is what `ckplan emit torch` writes (build(seed) -> (model, inputs);
model(*inputs) -> the scalar loss; make_optimizer(model): the optimizer and
hyperparameters ckplan's executor runs for the model). A step is what ckplan's executor
times for a step: the gradients cleared, the forward and the loss, the backward, and the
optimizer's update. Prints the median of STEPS timed steps after WARMUP."""
import importlib.util
import statistics
import sys
import time

import torch


def main():
    module_file = sys.argv[1]
    threads, steps, warmup = (int(a) for a in sys.argv[2:5])
    torch.set_num_threads(threads)
    spec = importlib.util.spec_from_file_location("emitted", module_file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model, inputs = mod.build(seed=0)
    model.train()
    opt = mod.make_optimizer(model)
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
