#!/usr/bin/env bash
# The Hugging Face referee's step peaks as Markdown (docs/benchmarks.md): runs
# tests/torch/run-hf and tabulates torch's measured peak beside ckplan's prediction per
# family, attention and case. usage: tests/bench/hf_referee.sh CKPLAN [TSV]
# With TSV (make check-hf's build/hf-referee.tsv), tabulates that run instead of running it.
set -u
ckplan=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ $# -ge 2 ]; then
    cp "$2" "$work/hf.tsv"
    echo "hf: from $2" > "$work/log"
else
    tests/torch/run-hf "$work/hf" "$ckplan" "$work/hf.tsv" > "$work/log" 2>&1
fi
echo "\`tests/torch/run-hf\`: $(tail -n 1 "$work/log" | sed 's/^hf: //'). The whole second"
echo "training step's peak (forward with the model's own loss, backward, AdamW, the default"
echo "zero_grad), in bytes, measured by the allocation tracker in transformers $("$CKPLAN_PYTHON" \
    -c 'import transformers, torch, peft; print(transformers.__version__ + ", PEFT " + peft.__version__ + ", PyTorch " + torch.__version__)'),"
echo "f32 on the CPU, batch 2 x 64 tokens, beside \`ckplan plan\`'s predicted peak for the same"
echo "case (none: store everything; every: every layer checkpointed, against --planner every;"
echo "dp: a dp plan at 60% of the way from its minimum to the baseline, applied"
echo "through \`ckplan emit hf\`; lora: PEFT LoRA rank 8 against \`--lora 8\`; accum2: two"
echo "micro-batches, against ckplan's single step)."
echo
python3 - "$work/hf.tsv" <<'PY'
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
cases = ["none", "every", "dp", "lora", "accum2"]
table = {}
for label, attention, case, torch_peak, ckplan_peak, ratio, _, _ in rows:
    table.setdefault((label, attention), {})[case] = (int(torch_peak), int(ckplan_peak))
print("| config | attention | " + " | ".join("%s: torch / ckplan" % c for c in cases) + " |")
print("|---|---|" + "---|" * len(cases))
for (label, attention), got in table.items():
    cells = []
    for c in cases:
        t, k = got.get(c, (0, 0))
        cells.append("%d / %s (%s)" % (t, k if k else "-", "%.3f" % (t / k) if k else "-"))
    print("| %s | %s | %s |" % (label, attention, " | ".join(cells)))
PY
