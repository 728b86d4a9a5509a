#!/usr/bin/env bash
# One training step of each model (forward, loss, backward, optimizer update; the
# store-everything plan of the `none` planner) with ckplan's executor and with the same
# model in PyTorch, side by side, at 1 and 2 threads; prints a Markdown table of the
# median step times and their ratio.
#
# usage: step_vs_torch.sh CKPLAN ENTRY...
# ENTRY is a model file, or "LABEL MODEL OPTIONS..." (one argument): the model planned and
# emitted with those options (--recipe fp32, --seq 64, ...), named LABEL in the table.
#
# ckplan's time is the baseline's `step_seconds` of `ckplan run PLAN --steps N` (the
# median of its 2N+1 timed rounds, after a warm-up step), with OPENBLAS_NUM_THREADS and
# OMP_NUM_THREADS and --threads set to the thread count. PyTorch's is the median of N'
# timed steps after warm-up, run by tests/bench/torch_step.py with torch.set_num_threads,
# under the referee's interpreter, CKPLAN_PYTHON (.venv/bin/python: make deps). The
# PyTorch module of MODEL.json is CKPLAN_TORCH_MODULES/MODEL.py when that variable names a
# directory, else what `CKPLAN emit torch MODEL -o FILE.py` writes. The two alternate,
# REPEATS times each (a busy neighbour then slows both alike); each column is the median
# of those repeats.
#
# Environment: CKPLAN_TORCH_MODULES (above); STEP_VS_TORCH_THREADS (default "1 2");
# STEP_VS_TORCH_REPEATS (default 3); STEP_VS_TORCH_STEPS, ckplan's N (default 10: 21
# rounds), and PyTorch then times 2N+1 steps after 5 warm-up ones.
set -euo pipefail
ckplan=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
threads_list=${STEP_VS_TORCH_THREADS:-1 2}
repeats=${STEP_VS_TORCH_REPEATS:-3}
steps=${STEP_VS_TORCH_STEPS:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

median() { python3 -c 'import statistics,sys; print(statistics.median(float(a) for a in sys.argv[1:]))' "$@"; }

# The PyTorch module of label $1 (model $2, options after) into $work/$1.py.
torch_module() {
    local name=$1 model=$2; shift 2
    if [ -n "${CKPLAN_TORCH_MODULES:-}" ]; then
        cp "$CKPLAN_TORCH_MODULES/$name.py" "$work/$name.py"
    elif ! "$ckplan" emit torch "$model" "$@" -o "$work/$name.py" > "$work/emit.log" 2>&1; then
        echo "step_vs_torch.sh: '$ckplan emit torch $model $*' failed (set CKPLAN_TORCH_MODULES to a" \
             "directory of MODEL.py modules instead):" >&2
        cat "$work/emit.log" >&2
        exit 2
    fi
}

ckplan_step() { # model's plan, threads -> seconds
    OPENBLAS_NUM_THREADS=$2 OMP_NUM_THREADS=$2 "$ckplan" run "$1" --steps "$steps" --threads "$2" \
        --runs "$work/runs.jsonl" --quiet
    python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])["baseline"]["step_seconds"])' \
        "$work/runs.jsonl"
}

echo "| model | threads | ckplan ms | PyTorch ms | ckplan / PyTorch |"
echo "|---|---:|---:|---:|---:|"
for entry in "$@"; do
    read -r name model options <<< "$entry"
    [ -n "$model" ] || { model=$name; name=$(basename "$model" .json); }
    # shellcheck disable=SC2086 # options are words
    "$ckplan" plan "$model" $options --planner none --budget 1000T -o "$work/$name.plan.json" \
        > /dev/null 2>&1
    # shellcheck disable=SC2086
    torch_module "$name" "$model" $options
    for threads in $threads_list; do
        ck=() pt=()
        for _ in $(seq "$repeats"); do
            ck+=("$(ckplan_step "$work/$name.plan.json" "$threads")")
            pt+=("$(OMP_NUM_THREADS=$threads "${CKPLAN_PYTHON:?run it from make bench, or set CKPLAN_PYTHON}" "$here/torch_step.py" "$work/$name.py" \
                    "$threads" $((2 * steps + 1)) 5)")
        done
        c=$(median "${ck[@]}") p=$(median "${pt[@]}")
        python3 -c 'import sys; c, p = float(sys.argv[3]), float(sys.argv[4])
print(f"| {sys.argv[1]} | {sys.argv[2]} | {1e3 * c:.2f} | {1e3 * p:.2f} | {c / p:.2f} |")' \
            "$name" "$threads" "$c" "$p"
    done
done
