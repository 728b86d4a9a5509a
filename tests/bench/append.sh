#!/usr/bin/env bash
# Appending records to a runs file (cli/files.c, ck_files_append_line): the time of a
# sweep of 10,000 points into a new runs file, of 10 points appended to a runs file of
# about 133 MB, and of four sweeps of 2,500 points at once into one file (with the records
# kept). Prints a Markdown section: the commands and their wall-clock times. With a second
# binary (e.g. one built from an older commit) its times are given beside the first's.
# usage: tests/bench/append.sh CKPLAN [CKPLAN_BEFORE]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
after=$(abs "$1")
before=${2:+$(abs "$2")}
chain=$root/tests/cli/data/chain10.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# The 133 MB runs file: whole records, made once with the first binary.
"$after" sweep "$chain" --budgets 100:1G:1000 --planners dp --runs seed.jsonl >/dev/null
python3 - <<'PY'
seed = open("seed.jsonl", "rb").read()
with open("big.jsonl", "wb") as f:
    while f.tell() < 133_000_000:
        f.write(seed)
PY
big_mb=$(( $(stat -c %s big.jsonl) / 1000000 ))

# seconds BIN CASE: the wall-clock time of one case, in seconds; "lost N" when records
# were lost (the concurrent case counts them).
seconds() {
    local bin=$1 case=$2 t0 t1 note=""
    rm -f runs.jsonl
    cp big.jsonl big-copy.jsonl
    t0=$(date +%s.%N)
    case $case in
        sweep) "$bin" sweep "$chain" --budgets 100:1G:10000 --planners dp --runs runs.jsonl >/dev/null ;;
        big) "$bin" sweep "$chain" --budgets 100:1G:10 --planners dp --runs big-copy.jsonl >/dev/null ;;
        concurrent)
            for _ in 1 2 3 4; do
                "$bin" sweep "$chain" --budgets 100:1G:2500 --planners dp --runs runs.jsonl >/dev/null &
            done
            wait ;;
    esac
    t1=$(date +%s.%N)
    if [ "$case" = concurrent ]; then
        local n; n=$(wc -l < runs.jsonl)
        [ "$n" = 10000 ] || note=", $((10000 - n)) of 10000 records lost"
    fi
    awk -v a="$t0" -v b="$t1" -v note="$note" 'BEGIN { printf "%.2f s%s", b - a, note }'
}

cases=(sweep big concurrent)
commands=(
    "ckplan sweep chain10.json --budgets 100:1G:10000 --planners dp --runs runs.jsonl"
    "ckplan sweep chain10.json --budgets 100:1G:10 --planners dp --runs big.jsonl"
    "4 at once: ckplan sweep chain10.json --budgets 100:1G:2500 --planners dp --runs runs.jsonl"
)
notes=("a new runs file" "big.jsonl holds $big_mb MB before" "a new runs file shared by the four")
echo "### Appending to a runs file"
echo
echo "Appending records to a runs file (\`tests/bench/append.sh\`): wall-clock time of each"
echo "command on $(nproc) cores; chain10.json is tests/cli/data/chain10.json."
echo
if [ -n "$before" ]; then
    echo "| command | | before | after |"
    echo "|---|---|---|---|"
else
    echo "| command | | time |"
    echo "|---|---|---|"
fi
for i in "${!cases[@]}"; do
    row="| \`${commands[$i]}\` | ${notes[$i]}"
    [ -n "$before" ] && row="$row | $(seconds "$before" "${cases[$i]}")"
    echo "$row | $(seconds "$after" "${cases[$i]}") |"
done
