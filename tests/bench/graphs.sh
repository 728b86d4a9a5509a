#!/usr/bin/env bash
# The milp planner on the seven Checkmate training graphs: prints a Markdown section with
# the command, each graph's least budget, and milp's time, wall time, status and proven gap
# at 0.9x and 0.7x the no-rematerialization peak and at that least budget
# (tests/bench/bench_graphs.c does the work; every figure there is replayed).
# usage: graphs.sh [BENCH_GRAPHS [GRAPH_DIR]]   (defaults: build/bench/bench_graphs,
# ../shared/graphs/checkmate; GRAPHS_TIME_LIMIT seconds a solve, default 120,
# GRAPHS_PROBE seconds a bisection probe, default 20)
set -euo pipefail
bench=${1:-build/bench/bench_graphs}
dir=${2:-../shared/graphs/checkmate}
limit=${GRAPHS_TIME_LIMIT:-120}
probe=${GRAPHS_PROBE:-20}
graphs=(vgg16-b256 vgg19-b256 mobilenet-b512 resnet50-b256 fcn8-b32 segnet-b32 unet-b32)
files=()
for g in "${graphs[@]}"; do files+=("$dir/$g.json"); done
echo "### milp on Checkmate's graphs"
echo
echo "\`$bench $limit $probe GRAPH.json...\` (COIN-OR CBC $(pkg-config --modversion cbc),"
echo "one thread, $limit s a solve, $probe s a bisection probe, wall clock, on $(nproc) cores"
echo "shared with whatever else runs). The time ratio is the replayed time over the"
echo "baseline's (every node once, in id order); \`gap\` is CBC's proven gap over Checkmate's"
echo "class of schedules (docs/planners.md, \"milp\")."
echo
start=$(date +%s)
"$bench" "$limit" "$probe" "${files[@]}"
echo
echo "Whole run: $(( $(date +%s) - start )) s."
