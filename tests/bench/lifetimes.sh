#!/usr/bin/env bash
# Activation peaks of models under the executor's lifetimes: the store-everything
# baseline and dp's smallest plan, each measured by `ckplan run`, and the rises of the
# first transformer block's operations as its derived chain gives them (a saving forward
# rises x̄ + fwd_tmp, a backward y_i + bwd_tmp). Prints a Markdown table.
# usage: lifetimes.sh CKPLAN MODEL...
set -euo pipefail
ckplan=$1; shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "| model | baseline peak (measured) | dp's smallest plan (measured) | block F_all rise (chain) | block B rise (chain) |"
echo "|---|---|---|---|---|"
for model in "$@"; do
    name=$(basename "$model" .json)
    "$ckplan" plan "$model" --planner none --budget 1000T -o "$work/base.json" > /dev/null
    static=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["predicted"]["static_bytes"])' "$work/base.json")
    min=$("$ckplan" plan "$model" --budget "$static" -o "$work/x.json" 2>&1 >/dev/null |
          sed -n 's/.*its smallest plan needs [^(]*(\([0-9]*\) bytes).*/\1/p' || true)
    "$ckplan" plan "$model" --planner dp --budget "$min" -o "$work/min.json" > /dev/null
    for p in base min; do
        "$ckplan" run "$work/$p.json" --steps 1 --runs "$work/$name.$p.jsonl" --quiet
    done
    "$ckplan" chain "$model" > "$work/chain.json"
    python3 - "$work" "$name" <<'PY'
import json, sys
work, name = sys.argv[1], sys.argv[2]
peak = lambda p: json.loads(open(f"{work}/{name}.{p}.jsonl").readline())["plan_run"]["activation_peak_bytes"]
stages = json.load(open(f"{work}/chain.json"))["stages"]
i = next(k for k, s in enumerate(stages) if s["name"].startswith("h.0"))
block, before = stages[i], stages[i - 1]
print(f"| {name} | {peak('base'):,} | {peak('min'):,} | {block['saved_bytes'] + block['fwd_tmp_bytes']:,} "
      f"| {before['out_bytes'] + block['bwd_tmp_bytes']:,} |")
PY
done
