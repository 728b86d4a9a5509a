#!/usr/bin/env bash
# dp at scale: builds heterogeneous chains (ckplan-chain/1) of 300, 550 and 1,000 stages in
# a temporary directory, plans each with `--planner dp --slots 500` at 40% of its
# store-everything peak (a budget that needs recomputation), and prints a markdown section
# with the command and, per chain, the wall seconds and the largest resident set
# (/usr/bin/time -v), or the exit status where ckplan refused.
# usage: dp_scale.sh [CKPLAN] [STAGES...]   (CKPLAN defaults to ./ckplan; each run is capped
# at DP_SCALE_TIMEOUT seconds, default 300)
set -euo pipefail
ckplan=${1:-./ckplan}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(300 550 1000)
cap=${DP_SCALE_TIMEOUT:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The chains of tests/bench/planners_scale.sh (sizes of 1 to 8 MiB, saved = out plus 0 to
# 8 MiB, temporaries of 0 to 2 MiB, times of 1.00 to 3.00, seeded by L); prints the budget,
# 40% of the store-everything peak.
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

echo "### dp at scale"
echo
echo "Command: \`/usr/bin/time -v $ckplan plan CHAIN --budget B --planner dp --slots 500 -o /dev/null\`,"
echo "B = 40% of the chain's store-everything peak; heterogeneous chains made by"
echo "tests/bench/dp_scale.sh; $(nproc) cores."
echo
echo "| stages | wall s | max RSS MB | result |"
echo "|---|---|---|---|"
for L in "${sizes[@]}"; do
    budget=$(make_chain "$L" "$work/chain-$L.json")
    rc=0
    timeout "$cap" /usr/bin/time -v "$ckplan" plan "$work/chain-$L.json" --budget "$budget" \
        --planner dp --slots 500 -o /dev/null > /dev/null 2> "$work/err" || rc=$?
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/err")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/err")
    if [ "$rc" = 124 ]; then printf '| %s | > %s | | timed out |\n' "$L" "$cap"; continue; fi
    secs=$(echo "$wall" | awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
    result=$([ "$rc" = 0 ] && echo planned || echo "exit $rc")
    printf '| %s | %.2f | %.0f | %s |\n' "$L" "$secs" "$(echo "${rss:-0} / 1024" | bc -l)" "$result"
done
