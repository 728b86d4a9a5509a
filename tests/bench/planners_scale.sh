#!/usr/bin/env bash
# How the planners scale with the number of stages: builds heterogeneous chains of 1,000,
# 8,000 and 100,000 stages (ckplan-chain/1) in a temporary directory, plans each at 40% of
# its store-everything peak with every planner, and prints a markdown section with the
# command and one row per chain (wall seconds; "exit N" where ckplan refused).
# usage: planners_scale.sh [CKPLAN] [STAGES...]   (CKPLAN defaults to ./ckplan; each run is
# capped at PLANNERS_SCALE_TIMEOUT seconds, default 200, shown as "> N s")
set -euo pipefail
ckplan=${1:-./ckplan}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000 8000 100000)
cap=${PLANNERS_SCALE_TIMEOUT:-200}
planners=(revolve chen dp sqrt)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A chain of L stages with sizes of 1 to 8 MiB (saved = out plus 0 to 8 MiB) and times of
# 1.00 to 3.00, seeded by L; prints the budget, 40% of the store-everything peak.
make_chain() {
    python3 - "$1" "$2" <<'PY'
import json, random, sys
L, path = int(sys.argv[1]), sys.argv[2]
rng, mib = random.Random(L), 1 << 20
stages = []
for i in range(L):
    out = rng.randint(1, 8) * mib
    stages.append({"name": f"s{i}", "fwd_time": round(rng.uniform(1, 3), 2),
                   "bwd_time": round(rng.uniform(1, 3), 2), "out_bytes": out,
                   "saved_bytes": out + rng.randint(0, 8) * mib,
                   "fwd_tmp_bytes": rng.randint(0, 2) * mib, "bwd_tmp_bytes": rng.randint(0, 2) * mib})
chain = {"format": "ckplan-chain/1", "name": f"scale-{L}", "input_bytes": mib, "stages": stages}
json.dump(chain, open(path, "w"))
# the store-everything schedule's replayed peak (chain-model.md, section 2)
held = peak = mib
for s in stages:
    held += s["saved_bytes"]
    peak = max(peak, held + s["fwd_tmp_bytes"])
peak = max(peak, held + stages[-1]["out_bytes"])
outs = [mib] + [s["out_bytes"] for s in stages]
for i in reversed(range(L)):
    peak = max(peak, held + outs[i] + stages[i]["bwd_tmp_bytes"])
    held += outs[i] - stages[i]["saved_bytes"] - outs[i + 1]
print(peak * 2 // 5)
PY
}

echo "### Planner scaling with the number of stages"
echo
echo "Command: \`timeout $cap $ckplan plan CHAIN --budget B --planner P -o /dev/null\`, B = 40% of"
echo "the chain's store-everything peak; heterogeneous chains made by tests/bench/planners_scale.sh;"
echo "wall seconds on $(nproc) cores."
echo
printf '| stages |'; printf ' %s |' "${planners[@]}"; echo
printf '|---|'; printf -- '---|%.0s' "${planners[@]}"; echo
for L in "${sizes[@]}"; do
    budget=$(make_chain "$L" "$work/chain-$L.json")
    printf '| %s |' "$L"
    for p in "${planners[@]}"; do
        start=$(date +%s.%N)
        rc=0
        timeout "$cap" "$ckplan" plan "$work/chain-$L.json" --budget "$budget" --planner "$p" \
            -o /dev/null > /dev/null 2> "$work/err" || rc=$?
        secs=$(echo "$(date +%s.%N) - $start" | bc)
        if [ "$rc" = 124 ]; then printf ' > %s s |' "$cap"
        elif [ "$rc" = 0 ]; then printf ' %.2f |' "$secs"
        else printf ' exit %s (%.2f s) |' "$rc" "$secs"; fi
    done
    echo
done
