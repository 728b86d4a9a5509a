# report reads a runs file with the checks of every other reader (planner/json.c), and
# never prints a name's terminal controls raw: the table and the messages show them
# escaped, while --json and --csv keep every character (valid JSON, quoted CSV).

# raw_controls TEXT: TEXT holds ESC, another C0 control other than LF, or a C1 control
# (--json is checked for ESC alone: cJSON indents with tabs, and keeps C1 characters raw)
raw_controls() { printf '%s' "$1" | LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]\|\xc2[\x80-\x9f]'; }
has_esc() { printf '%s' "$1" | LC_ALL=C grep -q $'\x1b'; }
valid_utf8() { python3 -c 'import sys; sys.stdin.buffer.read().decode("utf-8")' < "$1"; }

# the model name: ESC sequences that would recolour and clear the screen, a C1 CSI, a tab
record() { # record NAME_JSON_ESCAPED STATUS
    printf '{"format": "ckplan-run/1", "status": "%s", "time": "2026-11-29T21:08:31Z", "plan": {"planner": "sqrt", "budget_bytes": 16}, "model": {"path": "m.json", "sha256": "00", "name": "%s", "stages": 3}, "minimum_budget_bytes": 20}\n' "$2" "$1"
}
esc_name='evil\u001b[31m\u001b[2J\u009bX\tend'
{
    record 'plain' infeasible
    record "$esc_name" infeasible
    record 'x' 'ran\u001b[2J'                       # a bad status quoted in the message
    printf '%s\n' '{"format": "ckplan-run/1", "format": "ckplan-run/1"}'   # a duplicate key
    printf '{"format": "ckplan-run/1", "model": {"name": "bad\xff"}}\n'     # not UTF-8
    record 'after' infeasible
} > controls.jsonl

run report --runs controls.jsonl
check "report: bad lines are skipped, the others still shown (exit 2)" 2 "plain" "after" \
    "controls.jsonl:3: status:" "controls.jsonl:4: format: field given twice" \
    "controls.jsonl:5: not valid JSON (column 50: bytes that are not UTF-8)" "3 of 6 records"
check_that "report: the table shows a name's controls escaped" grep -qF 'evil\x1b[31m\x1b[2J' "$work/out"
check_that "report: the table shows a C1 control escaped" grep -qF '\u009bX\x09end' "$work/out"
check_that "report: no raw control character on stdout" eval '! raw_controls "$out"'
check_that "report: no raw control character on stderr" eval '! raw_controls "$err"'

run report --runs controls.jsonl --json
check "report --json: exit 2 for the bad lines, valid rows printed" 2 '"model":	"after"'
check_that "report --json: valid UTF-8 JSON" valid_utf8 "$work/out"
check_that "report --json: the name is kept, every character" python3 -c '
import json, sys
rows = json.load(open(sys.argv[1]))
assert [r["model"] for r in rows] == ["plain", "evil\x1b[31m\x1b[2J\u009bX\tend", "after"], rows
assert [r["line"] for r in rows] == [1, 2, 6], rows' "$work/out"
check_that "report --json: no raw ESC on stdout or stderr (JSON escapes it)" eval '! has_esc "$out$err"'

run report --runs controls.jsonl --csv
check "report --csv: exit 2 for the bad lines" 2 "plain"
check_that "report --csv: valid UTF-8" valid_utf8 "$work/out"
check_that "report --csv: the name is kept as it is, in a quoted field" python3 -c '
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="", encoding="utf-8")))
assert [r["model"] for r in rows] == ["plain", "evil\x1b[31m\x1b[2J\u009bX\tend", "after"], rows
assert "\"evil\x1b" in open(sys.argv[1], encoding="utf-8").read()' "$work/out"
check_that "report --csv: no raw control character on stderr" eval '! raw_controls "$err"'

# with only the good lines, the table is the answer and exit 0
sed -n '1p; 2p; 6p' controls.jsonl > good.jsonl
run report --runs good.jsonl --svg controls-charts
check "report --svg of names with controls" 0 "plain" 'evil\x1b[31m' "after"
check_that "report --svg: the chart lines show no raw control character" eval '! raw_controls "$out$err"'

# the options a record keeps (--recipe's name, --set's dim names) are input too
opt_record() { # opt_record OPTIONS_JSON
    printf '{"format": "ckplan-run/1", "status": "planned", "time": "2026-11-29T21:08:31Z", "plan": {"planner": "dp", "budget_bytes": 16}, "model": {"path": "m.json", "sha256": "00", "name": "m", "stages": 3, "options": %s}, "predicted": {"activation_peak_bytes": 8, "baseline_activation_peak_bytes": 9, "static_bytes": 1, "time": 2, "baseline_time": 1, "overhead": 1}}\n' "$1"
}
{
    opt_record '{"set": {"T\u001b[2J": 4}, "recipe": "r\u001b[31m\u009b", "dp": 2, "zero": 3}'
    opt_record '{"pp": 2, "microbatches": 4, "virtual_stages": 1}'
} > options.jsonl
run report --runs options.jsonl --svg options-charts
check "report: options with controls are shown escaped, the layout beside them" 0 \
    'T\x1b[2J=4 recipe=r\x1b[31m\u009b dp=2 zero=3' "pp=2 microbatches=4 virtual_stages=1" \
    'options "pp=2 microbatches=4 virtual_stages=1"'
check_that "report: no raw control character from options on stdout or stderr" eval '! raw_controls "$out$err"'
check_that "report --svg: one chart a model and options" test "$(ls options-charts | wc -l)" -eq 2
run report --runs options.jsonl --json
check_that "report --json: the options are kept, every character" python3 -c '
import json, sys
rows = json.load(open(sys.argv[1]))
assert [r["options"] for r in rows] == ["T\x1b[2J=4 recipe=r\x1b[31m\u009b dp=2 zero=3",
                                        "pp=2 microbatches=4 virtual_stages=1"], rows' "$work/out"

# names and paths from the command line, in messages
run report --runs $'no\x1b[2Jsuch.jsonl'
check "report: a missing runs file whose name has ESC" 2 'no\x1b[2Jsuch.jsonl: cannot open'
check_that "report: that message has no raw ESC" eval '! raw_controls "$err"'
run $'\x1b[2Jplan'
check "an unknown command with ESC is shown escaped" 2 "'\\x1b[2Jplan' is not a command"
check_that "and has no raw ESC" eval '! raw_controls "$err"'

# a NUL written as \u0000 would cut the name short in every reader: refused
record 'gpt\u00002' infeasible > nul.jsonl
run report --runs nul.jsonl --json
check "report: \\u0000 in a name is refused, not cut short" 2 "nul.jsonl:1: not valid JSON (column" "(\\u0000) inside a string"
check_that "report: ... and no cut-short name is printed" eval '! printf "%s" "$out" | grep -q "\"gpt\""'

# a key given twice is found anywhere, by its JSON path, in small and in large objects;
# many different keys are not mistaken for repeats
record 'deep' infeasible | sed 's/}$/, "extra": [{"a": 1}, {"a": 1, "b": 2, "a": 3}]}/' > deep-dup.jsonl
run report --runs deep-dup.jsonl
check "report: a key given twice inside an array is named by its path" 2 "deep-dup.jsonl:1: extra[1].a: field given twice"
python3 -c 'import sys; print(sys.argv[1][:-1] + "".join(", \"k%d\": %d" % (i, i) for i in range(40)) + "}")' \
    "$(record 'many' infeasible)" > many-keys.jsonl
run report --runs many-keys.jsonl
check "report: a record with 40 more keys, all different, is read" 0 "many"

# The runs file is read once, so a pipe works: its records are shown, and a plan file sent
# through one is still told apart (looking at it first must not consume the pipe).
{ record 'piped-one' infeasible; record 'piped-two' infeasible; } > piped.jsonl
run report --runs <(cat piped.jsonl)
check "report: a runs file through a pipe is read whole" 0 "piped-one" "piped-two"
run plan "$data/chain10.json" --budget 40 -o piped-plan.json
run report --runs <(cat piped-plan.json)
check "report: a plan file through a pipe is told apart" 2 "is a plan file (ckplan-plan/1)"
