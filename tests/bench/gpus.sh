#!/usr/bin/env bash
# sweep --gpus (cli/gpus.c): the wall-clock time of planning every layout of 8 and of 16
# GPUs for Llama-3-8B at 8K tokens on H100s (tensor with sequence parallelism, pipelines
# whose ranks each bisect their chain budget, data parallelism at each ZeRO stage), best of
# three. Prints a Markdown section: the commands, the layouts planned and the times. With a
# second binary (e.g. one built from an older commit) its times are given beside the first's.
# usage: tests/bench/gpus.sh CKPLAN [CKPLAN_BEFORE]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
after=$(abs "$1")
before=${2:+$(abs "$2")}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" # sweep --gpus writes nothing, but keep it apart all the same
opts=(--seq 8192 --batch 1 --recipe bf16-master --device h100-80gb)

# best BIN GPUS: the best of three wall-clock times in seconds
best() {
    local t0 t1 b=""
    for _ in 1 2 3; do
        t0=$(date +%s.%N)
        "$1" sweep "$root/tests/data/hf/llama-3-8b" "${opts[@]}" --gpus "$2" >/dev/null 2>&1
        t1=$(date +%s.%N)
        b=$(python3 -c "import sys; t = $t1 - $t0; b = '$b'; print(min(t, float(b)) if b else t)")
    done
    printf '%.3f' "$b"
}
layouts() { "$1" sweep "$root/tests/data/hf/llama-3-8b" "${opts[@]}" --gpus "$2" --csv 2>/dev/null | tail -n +2 | wc -l; }

echo "## sweep --gpus: every layout of N GPUs"
echo
echo "\`ckplan sweep tests/data/hf/llama-3-8b ${opts[*]} --gpus N\`, best of three:"
echo
if [ -n "$before" ]; then
    echo "| N | layouts | seconds | before: layouts | before: seconds |"
    echo "|---|---|---|---|---|"
else
    echo "| N | layouts | seconds |"
    echo "|---|---|---|"
fi
for n in 8 16; do
    row="| $n | $(layouts "$after" $n) | $(best "$after" $n) |"
    [ -n "$before" ] && row="$row $(layouts "$before" $n) | $(best "$before" $n) |"
    echo "$row"
done
