#!/usr/bin/env bash
# The fast graph planner on the seven Checkmate training graphs: prints a Markdown section
# with the commands, each graph's smallest feasible budget (--min-budget) and, at 0.9x and
# 0.7x the no-rematerialization peak and at that smallest budget, the replayed cost over
# the baseline's and the wall time of `ckplan plan` (the whole command: loading, planning,
# replaying, writing). Every figure is read from the plan files, which are replays.
# usage: graphs_fast.sh [CKPLAN [GRAPH_DIR]]   (defaults: ./ckplan, ../shared/graphs/checkmate)
set -euo pipefail
bin=${1:-./ckplan}
dir=${2:-../shared/graphs/checkmate}
graphs=(vgg16-b256 vgg19-b256 mobilenet-b512 resnet50-b256 fcn8-b32 segnet-b32 unet-b32)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval("d" + sys.argv[2]))' "$@"; }
TIMEFORMAT='%R %U %S'
# timed COMMAND...: runs it quietly; sets took (wall seconds) and cpu (user + system); the
# command's status in ok.
timed() {
    local t
    t=$( { time "$@" >/dev/null 2>&1; } 2>&1 ) && ok=1 || ok=0
    [ "$ok" = 1 ] || t=$( { time "$@" >/dev/null 2>&1 || true; } 2>&1 )
    read -r took user sys <<<"$t"
    cpu=$(python3 -c "print(f'{$user + $sys:.2f}')")
}
echo "### fast on Checkmate's graphs"
echo
echo "\`$bin plan GRAPH.json --min-budget\`, then \`$bin plan GRAPH.json --budget B -o PLAN\` at"
echo "B = 0.9x and 0.7x the no-rematerialization peak and at the smallest budget (wall clock of"
echo "the whole command, on $(nproc) cores shared with whatever else runs, and its CPU time,"
echo "user + system, which the others' load changes less). Cost: the replayed"
echo "time over the baseline's (every node once, in id order); infeasible: below the smallest"
echo "budget."
echo
echo "| graph | nodes | baseline peak | smallest budget | cost 0.9x | cost 0.7x | cost at smallest | plan: wall, CPU (max of three) |"
echo "|---|---|---|---|---|---|---|---|"
for g in "${graphs[@]}"; do
    file=$dir/$g.json
    "$bin" plan "$file" --budget 8000T --planner none -o "$tmp/none.json" >/dev/null
    base=$(field "$tmp/none.json" '["predicted"]["baseline_peak_bytes"]')
    nodes=$(field "$tmp/none.json" '["nodes"]')
    min=$("$bin" plan "$file" --min-budget)
    row="| $g | $nodes | $base | $min ($(python3 -c "print(f'{$min / $base:.3f}x')")) |"
    worst=0 worst_cpu=0
    for at in 0.9 0.7 min; do
        budget=$min
        [ "$at" = min ] || budget=$(python3 -c "print(int($at * $base))")
        timed "$bin" plan "$file" --budget "$budget" -o "$tmp/plan.json"
        if [ "$ok" = 1 ]; then
            cell=$(field "$tmp/plan.json" '["predicted"]["time"] / d["predicted"]["baseline_time"]')
            cell=$(python3 -c "print(f'{$cell:.4f}')")
        else
            cell="infeasible"
        fi
        worst=$(python3 -c "print(max($worst, $took))")
        worst_cpu=$(python3 -c "print(max($worst_cpu, $cpu))")
        row="$row $cell |"
        rm -f "$tmp/plan.json"
    done
    echo "$row ${worst} s, ${worst_cpu} s |"
done
