"""What transformers' eager attention holds in its backward beyond what it keeps: the
measurement behind attention.eager_grads (planner/op.c, docs/pytorch.md).

usage: LD_PRELOAD=alloc_track.so .venv/bin/python tests/torch/eager_backward.py [--device cpu|cuda] [T ...]

For each T (default 64 256 512) and dtype (f32, bf16), transformers' eager_attention_forward
runs on q [1, 32, T, 64] and k, v with 4 kv heads (Llama's grouped heads, repeat_kv), an
additive mask, no dropout, and its output's backward is measured: the most bytes live above
what was live when the backward started (the kept tensors, the output's gradient), in bytes
per score (B H T T). On the CPU the allocation tracker (alloc_track.c, LD_PRELOADed) counts;
on CUDA PyTorch's max_memory_allocated. Each case runs twice, the first to warm up.
"""

import argparse
import os
import sys

import torch
from transformers.models.llama.modeling_llama import eager_attention_forward

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_referee import CudaTracker, HostTracker  # noqa: E402 - the referee's counters, once

B, H, KV, D = 1, 32, 4, 64


class Heads(torch.nn.Module):
    num_key_value_groups = H // KV


def backward_peak(track, device, t, dtype):
    """The backward's peak above its start, in bytes."""
    module = Heads().train()
    q = torch.randn(B, H, t, D, dtype=dtype, device=device, requires_grad=True)
    k, v = (torch.randn(B, KV, t, D, dtype=dtype, device=device, requires_grad=True) for _ in range(2))
    mask = torch.zeros(B, 1, t, t, dtype=dtype, device=device)
    out, _ = eager_attention_forward(module, q, k, v, mask, scaling=D ** -0.5, dropout=0.0)
    del _
    grad = torch.ones_like(out)
    start = track.now()
    track.reset_peak()
    out.backward(grad)
    return track.peak() - start


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("lengths", nargs="*", type=int, default=[64, 256, 512])
    args = p.parse_args()
    torch.set_num_threads(1)
    track = CudaTracker() if args.device == "cuda" else HostTracker()
    for t in args.lengths:
        for dtype in (torch.float32, torch.bfloat16):
            scores = B * H * t * t
            packed = B * t * (H + 2 * KV) * D * (torch.finfo(dtype).bits // 8)
            peak = [backward_peak(track, args.device, t, dtype) for _ in range(2)][-1]
            print("T %5d %-8s backward %6.2f bytes a score above its start; q, k and v's "
                  "gradients %d bytes" % (t, str(dtype).replace("torch.", ""), peak / scores, packed))


if __name__ == "__main__":
    main()
