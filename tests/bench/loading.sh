#!/usr/bin/env bash
# How long ckplan takes to load large models, and to refuse one over the stage limit.
# Builds the models with tests/bench/big_model.py in a temporary directory, times
# `ckplan chain` and `ckplan plan` on each (once: wall clock and CPU time) and prints a Markdown
# section. usage: loading.sh CKPLAN
set -uo pipefail
ckplan=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

# name kind n [indent]: one model per line of the table
models=(
    "chain10k chain 10000"
    "chain40k chain 40000"
    "inputs40k inputs 40000"
    "blocks40k blocks 40000"
    "tied10k tied 10000"
    "over-limit chain 150000 1"
)

# timed CMD...: runs ckplan once; sets $rc, $took (seconds of wall clock / of CPU, user and
# system: the second is what the machine's other load does not inflate) and $said (the
# first line of stderr).
timed() {
    read -r rc took < <(python3 - "$ckplan" "$@" 2>"$work/err" <<'PY'
import os, subprocess, sys, time
start = time.monotonic()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
wall = time.monotonic() - start
print(os.waitstatus_to_exitcode(status), f"{wall:.2f} / {usage.ru_utime + usage.ru_stime:.2f}")
PY
)
    said=$(head -n 1 "$work/err")
}

echo "### Loading large models"
echo
echo "\`tests/bench/loading.sh $1\`: each model comes from \`tests/bench/big_model.py KIND N\`"
echo "(\`chain\`: N relu nodes in a row; \`inputs\`: N extra inputs, each added by its own"
echo "node; \`blocks\`: N one-node blocks, each instantiated once; \`tied\`: N embeddings,"
echo "each with a head tied to it, 4N nodes). \`over-limit\` has 150,000 stages, more than the"
echo "limit of 100,000: it must be refused (exit 2). Seconds of wall clock / of CPU time (user +"
echo "system), one run each."
echo
echo "| model | file | \`chain M -o chain.json\` | \`plan M --budget 1T -o plan.json\` | exit | message |"
echo "|---|---|---|---|---|---|"
for line in "${models[@]}"; do
    read -r name kind n indent <<<"$line"
    python3 "$here/big_model.py" "$kind" "$n" "$name.json" ${indent:+--indent "$indent"}
    size=$(python3 -c 'import os,sys; print(f"{os.path.getsize(sys.argv[1]) / 2**20:.1f} MiB")' "$name.json")
    timed chain "$name.json" -o chain.json
    chain_s=$took chain_rc=$rc
    timed plan "$name.json" --budget 1T -o plan.json
    [ "$rc" = "$chain_rc" ] || rc="$chain_rc / $rc"
    echo "| $name ($kind $n) | $size | $chain_s | $took | $rc | ${said:+\`$said\`} |"
done
