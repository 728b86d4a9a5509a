# Appending records to a runs file (cli/files.c, ck_files_append_line): concurrent
# processes lose none, every record is a whole line, and a write that fails part-way is
# taken back, so the file only ever gains whole lines.

mkdir -p appends && cd appends || return

# runs_ok FILE N [even]: FILE holds exactly N lines, each a whole ckplan-run/1 record; with
# "even", every budget appears in as many records as there were sweeps.
runs_ok() {
    python3 - "$@" <<'EOF'
import collections, json, sys
path, want, even = sys.argv[1], int(sys.argv[2]), sys.argv[3:] == ["even"]
data = open(path, "rb").read()
assert data.endswith(b"\n"), "ends in a partial line"
lines = data.decode().split("\n")[:-1]
assert len(lines) == want, f"{len(lines)} lines, wanted {want}"
records = [json.loads(line) for line in lines]
assert all(r["format"] == "ckplan-run/1" for r in records)
per_budget = collections.Counter(r["plan"]["budget_bytes"] for r in records)
assert not even or len(set(per_budget.values())) == 1, f"budgets unevenly recorded: {per_budget.most_common(3)}"
EOF
}

# Four sweeps at once into one runs file, as users run one per core: 4 x 150 points.
pids=()
for i in 1 2 3 4; do
    "$bin" sweep "$data/chain10.json" --budgets 100:1G:150 --planners dp --runs shared.jsonl \
        >"sweep$i.out" 2>"sweep$i.err" &
    pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
out=""; err=$(cat sweep*.err)
check "four concurrent sweeps into one runs file all succeed" 0
check_that "four concurrent sweeps keep all 600 records, each a whole line" runs_ok shared.jsonl 600 even

# The same into a file that exists and was cut short: its last line stays apart.
printf '{"format": "ckplan-run/1", "cut sh' > cut.jsonl
for i in 1 2 3; do
    "$bin" sweep "$data/chain10.json" --budgets 100:1G:50 --planners revolve --runs cut.jsonl >/dev/null 2>&1 &
done
wait
check_that "concurrent sweeps after a line cut short keep it on a line of its own" \
    test "$(grep -c '^{"format": "ckplan-run/1", "cut sh$' cut.jsonl)" = 1
sed -i '1d' cut.jsonl
check_that "... and add their 150 records whole after it" runs_ok cut.jsonl 150 even

# The lock is flock(2)'s, which util-linux's flock takes too: a writer holding it half-way
# through a record makes sweep wait for the rest before appending, and report wait before
# reading, so neither sees the record half-written.
if command -v flock >/dev/null; then
    "$bin" sweep "$data/chain10.json" --budgets 100 --planners dp --runs locked.jsonl >/dev/null 2>&1
    record=$(cat locked.jsonl)
    flock -x locked.jsonl bash -c 'printf %s "${1:0:40}" >> locked.jsonl; touch half-written; sleep 1
                                   printf "%s\n" "${1:40}" >> locked.jsonl' writer "$record" &
    tries=0
    while [ ! -e half-written ] && [ $tries -lt 200 ]; do sleep 0.05; tries=$((tries + 1)); done
    run report --runs locked.jsonl --csv
    check "report waits for a record being written under the lock" 0
    check_that "... then reads it whole: two records" test "$(printf '%s\n' "$out" | grep -c ',dp,')" = 2
    run sweep "$data/chain10.json" --budgets 100:1G:20 --planners dp --runs locked.jsonl
    wait
    check "sweep waits for a record being written under the lock" 0
    check_that "... and appends its own records after it, whole" runs_ok locked.jsonl 22
fi

# A runs file that is not a regular file (a pipe, through /dev/stdout) gets the records
# alone, one a line: no newline is put before them, and nothing is truncated.
"$bin" sweep "$data/chain10.json" --budgets 100,1G --planners dp --runs /dev/stdout 2>/dev/null | cat > piped.out
check_that "records appended to a pipe are whole lines, one each, nothing between them" \
    test "$(grep -c '^{"format":"ckplan-run/1"' piped.out) $(grep -c '^$' piped.out)" = "2 0"

# A write that fails part-way: the file size limit (ulimit -f, SIGXFSZ ignored) makes the
# kernel write the first part of a record and refuse the rest, as a disk filling up does.
# The runs file is padded to 100 bytes below the limit, so that the first record crosses it.
limit_kib=16
python3 -c '
import sys
head, tail = "{\"format\": \"ckplan-run/1\", \"status\": \"old\", \"pad\": \"", "\"}\n"
size = int(sys.argv[1]) * 1024 - 100
sys.stdout.write(head + "x" * (size - len(head) - len(tail)) + tail)' "$limit_kib" > full.jsonl
cp full.jsonl full.before
rc=$( (trap '' XFSZ; ulimit -f "$limit_kib"; "$bin" sweep "$data/chain10.json" --budgets 100,300,1G \
    --planners dp --runs full.jsonl >out 2>err; echo $?) ); out=$(cat out); err=$(cat err)
check "a record cut short by a full disk is an error" 1 "full.jsonl: cannot write" "File too large" "the file is as it was"
check_that "... and the part written is taken back: the runs file is as it was" cmp full.jsonl full.before
# The same with SIGXFSZ at its default action, as a shell leaves it: ckplan ignores it
# itself, so the write fails instead of killing it (exit 153, half a record left); and plan
# -o past the limit removes its temporary file and leaves the old plan.
cp full.before full.jsonl
rc=$( (trap - XFSZ; ulimit -f "$limit_kib"; "$bin" sweep "$data/chain10.json" --budgets 100,300,1G \
    --planners dp --runs full.jsonl >out 2>err; echo $?) ); out=$(cat out); err=$(cat err)
check "SIGXFSZ at its default: a record past the size limit is an error, not a kill" 1 \
    "full.jsonl: cannot write" "File too large" "the file is as it was"
check_that "... the runs file is as it was" cmp full.jsonl full.before
mkdir xfsz && printf 'old plan\n' > xfsz/plan.json
rc=$( (trap - XFSZ; ulimit -f 1; "$bin" plan "$root/models/gpt2-tiny.json" --budget 22M \
    -o xfsz/plan.json >out 2>err; echo $?) ); out=$(cat out); err=$(cat err)
check "SIGXFSZ at its default: plan -o past the size limit is an error, not a kill" 1 \
    "xfsz/plan.json: cannot write" "File too large" "unchanged"
check_that "... the old plan stays and no temporary file is left" \
    test "$(ls -A xfsz)" = plan.json -a "$(cat xfsz/plan.json)" = "old plan"

cd "$work" || return
