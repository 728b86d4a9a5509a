#!/usr/bin/env bash
# Plans a model with every planner at the budget half-way between dp's minimum and the
# store-everything peak, runs each plan with --verify, and prints a markdown table of
# predicted against measured memory and time. usage: predicted_vs_measured.sh CKPLAN MODEL [COSTS]
set -euo pipefail
ckplan=$1 model=$2 costs=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
costs_opt=()
[ -n "$costs" ] && costs_opt=(--costs "$costs")
"$ckplan" plan "$model" --budget 1000T "${costs_opt[@]}" --json -o "$work/big.json" > /dev/null
read -r static base < <(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["predicted"]; print(p["static_bytes"], p["baseline_peak_bytes"])' "$work/big.json")
min=$("$ckplan" plan "$model" --budget "$static" "${costs_opt[@]}" -o "$work/x.json" 2>&1 >/dev/null |
      sed -n 's/.*its smallest plan needs [^(]*(\([0-9]*\) bytes).*/\1/p' || true)
budget=$(( (min + base) / 2 ))
for planner in dp revolve chen sqrt; do
    # a planner with no plan at this budget is left out of the table
    "$ckplan" plan "$model" --budget "$budget" --planner "$planner" "${costs_opt[@]}" \
        -o "$work/$planner.json" > /dev/null 2>&1 || continue
    "$ckplan" run "$work/$planner.json" --verify --steps 5 --runs "$work/runs.jsonl" --quiet || true
done
python3 - "$work/runs.jsonl" "$budget" <<'PY'
import json, sys
mib = lambda b: f"{b / 2**20:.2f}"
print(f"budget {int(sys.argv[2]) / 2**20:.1f} MiB (half-way between dp's minimum and the baseline)\n")
print("| planner | predicted act. peak MiB | measured act. peak MiB | measured / predicted | "
      "predicted overhead | measured overhead | gradients | RSS peak MiB (baseline / plan) |")
print("|---|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    p, m, v = r["predicted"], r["plan_run"], r["verification"]
    print(f"| {r['plan']['planner']} | {mib(p['activation_peak_bytes'])} | {mib(m['activation_peak_bytes'])} | "
          f"{v['peak_ratio']:.4f} | {100 * p['overhead']:+.1f}% | {100 * r['measured_overhead']:+.1f}% | "
          f"{'identical' if v['gradients_identical'] else 'DIFFERENT'} | "
          f"{mib(r['baseline']['rss_peak_bytes'])} / {mib(m['rss_peak_bytes'])} |")
PY
