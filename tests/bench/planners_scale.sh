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

# A chain of L stages (tests/bench/hetero_chain.py); prints the budget, 40% of the
# store-everything peak.
make_chain() {
    python3 "$(dirname "$0")/hetero_chain.py" "$1" "$2" 40
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
