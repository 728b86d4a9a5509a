# Names from input files are shown, never obeyed: plan's and run's summaries, and every
# error message, show a name's control characters escaped (report: report-input.sh).

raw_esc() { printf '%s' "$1" | LC_ALL=C grep -q $'\x1b'; }

# a chain whose name and stage names are escape sequences, at a budget that checkpoints
python3 - "$data/chain10.json" > esc-chain.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["name"] = "chain\x1b[2J"
for i, s in enumerate(c["stages"]):
    s["name"] = "st\x1b[31m%d" % i
json.dump(c, sys.stdout)
PY
run plan esc-chain.json --budget 30 -o esc-plan.json
check "plan: a chain's name with ESC is shown escaped" 0 'chain\x1b[2J (esc-chain.json)' 'st\x1b[31m0'
check_that "plan: no raw ESC on stdout or stderr" eval '! raw_esc "$out$err"'

# a model whose name is an escape sequence, run for one step
python3 - "$root/models/gpt2-tiny.json" > esc-model.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["name"] = "tiny\x1b]0;pwned\x07"
json.dump(m, sys.stdout)
PY
run plan esc-model.json --budget 1G -o esc-model-plan.json
check "plan: a model's name with OSC is shown escaped" 0 'tiny\x1b]0;pwned\x07 (esc-model.json)'
run run esc-model-plan.json --steps 1 --runs esc-runs.jsonl
check "run: a model's name with OSC is shown escaped" 0 'tiny\x1b]0;pwned\x07: planner dp'
check_that "run: no raw ESC on stdout or stderr" eval '! raw_esc "$out$err"'

# an error message quoting a name from the input
python3 - "$root/models/gpt2-tiny.json" > esc-bad-model.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["inputs"][0]["name"] = "tok\x1b[2J"
json.dump(m, sys.stdout)
PY
run plan esc-bad-model.json --budget 1G
check "plan: an error quoting a bad name shows it escaped" 2 'got "tok\x1b[2J"'
check_that "plan: that error has no raw ESC" eval '! raw_esc "$err"'

# sweep's messages about a point name the model file, whose name may hold an escape
esc_file=$'sweep\x1b[2J.json'
# (a model the executor refuses: a node other than the loss reads a held input)
printf '%s' '{"format": "ckplan-model/1", "dims": {"B": 2, "C": 4}, "inputs": [{"name": "x", "shape": ["B", "C"]}, {"name": "y", "shape": ["B", "C"]}], "nodes": [{"name": "a", "op": "add", "inputs": ["x", "y"]}, {"name": "b", "op": "relu", "inputs": ["a"]}, {"name": "loss", "op": "mse", "inputs": ["b", "y"]}]}' > "$esc_file"
run sweep "$esc_file" --budgets 1G --planners dp --run --steps 1 --runs esc-sweep.jsonl
check "sweep: a point's message shows the model file's name escaped" 2 'sweep of sweep\x1b[2J.json, dp at 1.00 GiB'
check_that "sweep: that message has no raw ESC" eval '! raw_esc "$err"'
