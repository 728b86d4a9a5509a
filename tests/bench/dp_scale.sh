#!/usr/bin/env bash
# dp at scale: builds the heterogeneous chains of tests/bench/hetero_chain.py (those of
# planners_scale.sh) of 300, 550 and 1,000 stages in a temporary directory, plans each with
# `--planner dp --slots 500` at 40% and 50% of its store-everything peak (budgets that need
# recomputation), and prints a markdown section with the command and, per chain and
# budget, the wall and CPU seconds and the largest resident set (/usr/bin/time -v), or the
# exit status where ckplan refused.
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

echo "### dp at scale"
echo
echo "Command: \`/usr/bin/time -v $ckplan plan CHAIN --budget B --planner dp --slots 500 -o /dev/null\`,"
echo "B = 40% or 50% of the chain's store-everything peak; chains made by"
echo "tests/bench/hetero_chain.py; $(nproc) cores."
echo
echo "| stages | budget | wall s | CPU s | max RSS MB | result |"
echo "|---|---|---|---|---|---|"
for L in "${sizes[@]}"; do
  for percent in 40 50; do
    budget=$(python3 "$(dirname "$0")/hetero_chain.py" "$L" "$work/chain-$L.json" "$percent")
    rc=0
    timeout "$cap" /usr/bin/time -v "$ckplan" plan "$work/chain-$L.json" --budget "$budget" \
        --planner dp --slots 500 -o /dev/null > /dev/null 2> "$work/err" || rc=$?
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/err")
    user=$(sed -n 's/.*User time (seconds): //p' "$work/err")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/err")
    if [ "$rc" = 124 ]; then printf '| %s | %s%% | > %s | | | timed out |\n' "$L" "$percent" "$cap"; continue; fi
    secs=$(echo "$wall" | awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
    result=$([ "$rc" = 0 ] && echo planned || echo "exit $rc")
    printf '| %s | %s%% | %.2f | %s | %.0f | %s |\n' "$L" "$percent" "$secs" "${user:-?}" \
        "$(echo "${rss:-0} / 1024" | bc -l)" "$result"
  done
done
