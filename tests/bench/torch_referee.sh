#!/usr/bin/env bash
# The PyTorch referee's figures as Markdown (docs/benchmarks.md): runs tests/torch/run and
# tabulates what it measured. usage: tests/bench/torch_referee.sh CKPLAN
set -u
ckplan=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tests/torch/run "$work/torch" "$ckplan" "$work/torch.tsv" > "$work/log" 2>&1
echo "\`tests/torch/run\`: $(tail -n 1 "$work/log" | sed 's/^torch: //'). Per model and planner:"
echo "the stages whose saved bytes (PyTorch's saved-tensor hooks) equal ckplan's chain, the"
echo "step's activation peak measured in PyTorch (allocator tracker) and predicted and"
echo "measured by ckplan (\`ckplan run\`), and whether the gradients with the plan equal"
echo "PyTorch's without one, bit for bit."
echo
python3 - "$work/torch.tsv" <<'PY'
import sys
rows, order, plain = {}, [], {}
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if f[2] == "info":
        plain[f[0]] = int(f[5])
        continue
    key = (f[0], f[1])
    if key not in rows:
        rows[key] = {"saved": [0, 0], "grad": "", "peak": None}
        order.append(key)
    r = rows[key]
    if f[2] == "saved":
        r["saved"][0] += f[3] == "ok"
        r["saved"][1] += 1
    elif f[2] == "gradients":
        r["grad"] = "equal" if f[3] == "ok" else "DIFFER"
    else:
        r["peak"] = (int(f[5]), int(f[6]), int(f[7]), f[3])
print("| model | planner | stages saving as ckplan says | PyTorch peak | ckplan predicted | ckplan measured | difference | gradients |")
print("|---|---|---|---:|---:|---:|---:|---|")
for key in order:
    r = rows[key]
    torch_peak, predicted, measured, ok = r["peak"] or (0, 0, 0, "?")
    diff = (torch_peak / predicted - 1) * 100 if predicted else 0
    print("| %s | %s | %d of %d | %s | %s | %s | %+.2f%%%s | %s |" % (
        key[0], key[1], r["saved"][0], r["saved"][1], format(torch_peak, ","),
        format(predicted, ","), format(measured, ","), diff, "" if ok == "ok" else " (%s)" % ok,
        r["grad"]))
print()
print("Plain autograd (the module without a plan), for comparison with the none planner's")
print("row: it frees the logits after log_softmax where the chain model's x̄_L holds them")
print("to B, and a tied head's gradient waits for the embedding's (docs/pytorch.md).")
print()
print("| model | plain autograd peak |")
print("|---|---:|")
for label, peak in plain.items():
    print("| %s | %s |" % (label, format(peak, ",")))
PY
