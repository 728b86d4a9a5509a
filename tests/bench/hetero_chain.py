#!/usr/bin/env python3
"""Writes a heterogeneous chain (ckplan-chain/1) of L stages, sizes of 1 to 8 MiB (saved =
out plus 0 to 8 MiB), temporaries of 0 to 2 MiB, times of 1.00 to 3.00, seeded by L, and
prints PERCENT % of its store-everything peak (chain-model.md, section 2), rounded down.
usage: hetero_chain.py L PATH PERCENT"""
import json
import random
import sys

L, path, percent = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
rng, mib = random.Random(L), 1 << 20
stages = []
for i in range(L):
    out = rng.randint(1, 8) * mib
    stages.append({"name": f"s{i}", "fwd_time": round(rng.uniform(1, 3), 2),
                   "bwd_time": round(rng.uniform(1, 3), 2), "out_bytes": out,
                   "saved_bytes": out + rng.randint(0, 8) * mib,
                   "fwd_tmp_bytes": rng.randint(0, 2) * mib, "bwd_tmp_bytes": rng.randint(0, 2) * mib})
chain = {"format": "ckplan-chain/1", "name": f"scale-{L}", "input_bytes": mib, "stages": stages}
with open(path, "w") as f:
    json.dump(chain, f)
held = peak = mib
for s in stages:
    held += s["saved_bytes"]
    peak = max(peak, held + s["fwd_tmp_bytes"])
peak = max(peak, held + stages[-1]["out_bytes"])
outs = [mib] + [s["out_bytes"] for s in stages]
for i in reversed(range(L)):
    peak = max(peak, held + outs[i] + stages[i]["bwd_tmp_bytes"])
    held += outs[i] - stages[i]["saved_bytes"] - outs[i + 1]
print(peak * percent // 100)
