#!/usr/bin/env bash
# The milp planner on the seven Checkmate training graphs: prints a Markdown section with
# the command and milp's time, wall time, status and proven gap at 0.9x and 0.7x the
# no-rematerialization peak and at the least budget any schedule can have
# (tests/bench/bench_graphs.c does the work; every figure there is replayed), then how often
# Checkmate's class misses the optimum of all schedules on small random graphs
# (tests/bench/graph_class.c, built next to BENCH_GRAPHS).
# usage: graphs.sh [BENCH_GRAPHS [GRAPH_DIR]]   (defaults: build/bench/bench_graphs,
# ../shared/graphs/checkmate; GRAPHS_TIME_LIMIT seconds a solve, default 60)
set -euo pipefail
bench=${1:-build/bench/bench_graphs}
dir=${2:-../shared/graphs/checkmate}
limit=${GRAPHS_TIME_LIMIT:-60}
graphs=(vgg16-b256 vgg19-b256 mobilenet-b512 resnet50-b256 fcn8-b32 segnet-b32 unet-b32)
files=()
for g in "${graphs[@]}"; do files+=("$dir/$g.json"); done
echo "### milp on Checkmate's graphs"
echo
echo "\`$bench $limit GRAPH.json...\` (COIN-OR CBC $(pkg-config --modversion cbc), one"
echo "thread, a time limit of $limit s a solve on the wall clock, each solve killed at 1.5 times"
echo "that plus 10 s, on $(nproc) cores shared with whatever else runs: load average"
echo "$(cut -d' ' -f1 /proc/loadavg) at the start). The time ratio is the replayed time over the"
echo "baseline's (every node once, in id order); \`gap\` is CBC's proven gap over Checkmate's"
echo "class of schedules (docs/planners.md, \"milp\"). The third budget of each graph is the"
echo "largest node with its inputs, the least budget any schedule can have."
echo
start=$(date +%s)
"$bench" "$limit" "${files[@]}"
echo
echo "Whole run: $(( $(date +%s) - start )) s."
echo
echo "### Checkmate's class against all schedules"
echo
echo "\`$(dirname "$bench")/graph_class 3000 7\`:"
echo
"$(dirname "$bench")/graph_class" 3000 7
