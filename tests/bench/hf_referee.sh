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
echo "f32 on the CPU, batch 2 x 64 tokens, less what the process held before the model, beside"
echo "\`ckplan plan --impl hf-cpu\`'s predicted peak for the same case (none: store everything,"
echo "Trainer's fused AdamW; every: every layer checkpointed, against --planner every; foreach,"
echo "for-loop: torch.optim's other AdamW steps, against --optimizer-step; dp: a dp plan at 60%"
echo "of the way from its minimum to the baseline, applied through \`ckplan emit hf\`; lora: PEFT"
echo "LoRA rank 8 against \`--lora 8\`, the embedding's output made to require grad as ckplan assumes;"
echo "lora-every: the same with every layer checkpointed, against \`--lora 8 --planner every\`; lora-dp:"
echo "a dp plan of the LoRA model at 60%, applied through \`ckplan emit hf\`; accum2: two micro-batches"
echo "against \`--grad-accum 2\`)."
echo "Each cell is torch's peak over ckplan's, held to 2%."
echo
python3 - "$work/hf.tsv" <<'PY'
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
cases = ["none", "every", "foreach", "for-loop", "dp", "lora", "lora-every", "lora-dp", "accum2"]
table = {}
for label, attention, case, torch_peak, ckplan_peak, ratio, _, _ in rows:
    table.setdefault((label, attention), {})[case] = (int(torch_peak), int(ckplan_peak))
print("| config | attention | " + " | ".join(cases) + " |")
print("|---|---|" + "---|" * len(cases))
for (label, attention), got in table.items():
    cells = []
    for c in cases:
        t, k = got.get(c, (0, 0))
        cells.append("%s" % ("%.3f" % (t / k)) if k else "-")
    print("| %s | %s | %s |" % (label, attention, " | ".join(cells)))
print()
print("The same peaks in bytes, torch / ckplan:")
print()
print("| config | attention | " + " | ".join(cases) + " |")
print("|---|---|" + "---|" * len(cases))
for (label, attention), got in table.items():
    cells = ["%d / %d" % got[c] if c in got else "-" for c in cases]
    print("| %s | %s | %s |" % (label, attention, " | ".join(cells)))
PY
