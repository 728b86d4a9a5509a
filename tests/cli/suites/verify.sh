# ckplan run and its plan file: every figure is checked against the replay of the plan's
# schedule (never taken from the file), the model and costs files the plan names are found
# relative to the plan, and sweep's messages name the model and the point.

tiny=$root/models/gpt2-tiny.json
# edit IN OUT PYTHON: OUT is plan IN as JSON `d` after the statements PYTHON.
edit() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(d, open(sys.argv[2], "w"))' "$@"; }
last() { python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().splitlines()[-1]); exec("print(r" + sys.argv[2] + ")")' "$@"; }
diffs() { last "$1" '["verification"]["plan_file_differences"]'; }
g15() { python3 -c 'import sys; print("%.15g" % float(sys.argv[1]))' "$1"; } # as ckplan prints a time

run plan "$tiny" --budget 22M -o v.json
peak=$(json_get v.json '["predicted"]["peak_bytes"]')
run run v.json --verify --steps 1 --runs v.jsonl
check "verify: an untouched plan passes, its figures matching the replay" 0 "verify: the plan file's figures match the replay of its schedule" "verify: passed"
check_that "verify: the record says the plan file matches" test "$(last v.jsonl '["verification"]["plan_file_matches"], r["verification"]["plan_file_differences"]')" = "True []"

# Every figure of the file, edited up and down, fails --verify naming it with both numbers.
for edit_ in "predicted.peak_bytes:+1" "predicted.peak_bytes:-1" "predicted.activation_peak_bytes:+1048576" \
             "predicted.activation_peak_bytes:-1" "predicted.static_bytes:+8" "predicted.baseline_peak_bytes:-1" \
             "predicted.baseline_activation_peak_bytes:+1" "predicted.time:+0.001" "predicted.time:-0.001" \
             "predicted.baseline_time:+1" "predicted.overhead:-0.05"; do
    field=${edit_%%:*}; key=${field#predicted.}; delta=${edit_#*:}
    edit v.json edited.json "d['predicted']['$key'] += type(d['predicted']['$key'])($delta)"
    was=$(json_get v.json "['predicted']['$key']"); now=$(json_get edited.json "['predicted']['$key']")
    run run edited.json --verify --steps 1 --runs v.jsonl --quiet
    check "verify: $field edited by $delta fails, naming it" 1 "verification failed: the plan file's figures differ from the replay" \
        "$field: the plan file says $(g15 "$now")" "the replay gives $(g15 "$was")"
    check_that "verify: $field edited: the record says so" test "$(last v.jsonl '["verification"]["passed"], [d["field"] for d in r["verification"]["plan_file_differences"]]')" = "False ['$field']"
done

edit v.json low-budget.json "d['budget_bytes'] = $peak - 1"
run run low-budget.json --verify --steps 1 --runs v.jsonl --quiet
check "verify: budget_bytes below the replayed peak fails" 1 "budget_bytes: the plan file says $((peak - 1)) " "below the replayed peak_bytes of $peak "
check_that "verify: the record holds both numbers" test "$(diffs v.jsonl)" = "[{'field': 'budget_bytes', 'plan_file': $((peak - 1)), 'replayed': $peak}]"
check_that "verify: the record's predictions are the replayed ones" test "$(last v.jsonl '["predicted"]["activation_peak_bytes"]')" = "$(json_get v.json '["predicted"]["activation_peak_bytes"]')"
edit v.json one-byte.json "d['budget_bytes'] = 1; d['predicted']['peak_bytes'] = 1; d['predicted']['activation_peak_bytes'] = 1"
run run one-byte.json --verify --steps 1 --runs v.jsonl --quiet
check "verify: a plan edited to budget_bytes 1, its peaks with it, fails" 1 "budget_bytes: the plan file says 1 (1 B)" "predicted.peak_bytes: the plan file says 1 (1 B)" "predicted.activation_peak_bytes: the plan file says 1 (1 B)"
check_that "verify: the tracked peak is compared with the replayed peak, not the file's" test "$(last v.jsonl '["verification"]["peak_within_prediction"]')" = True

# A schedule edited into another valid one (store everything) replays to other figures.
edit v.json other-schedule.json "L = d['stages']; d['schedule'] = [{'op': 'F_all', 'stage': i} for i in range(L)] + [{'op': 'loss'}] + [{'op': 'B', 'stage': i} for i in reversed(range(L))]"
run run other-schedule.json --verify --steps 1 --runs v.jsonl --quiet
check "verify: an edited schedule no longer matches the predictions" 1 "budget_bytes: the plan file says" "predicted.activation_peak_bytes: the plan file says" "predicted.time: the plan file says"

# Plain run: the same differences are warned about, the run uses the replayed figures, the
# record says verification failed (not performed), and the exit status is 0.
run run low-budget.json --steps 1 --runs v.jsonl --quiet
check "run: without --verify an edited plan is run with a warning naming the field" 0 "warning: low-budget.json: the plan file's figures differ from the replay" "warning: low-budget.json: budget_bytes: the plan file says $((peak - 1))"
check_that "run: the record says the plan file differs" test "$(last v.jsonl '["verification"]["performed"], r["verification"]["passed"], r["verification"]["plan_file_matches"]')" = "False False False"

# The memory guard uses the replayed figures: a file claiming 4 PiB still runs, and one
# claiming 1 byte is still refused where the replay does not fit.
edit v.json claims-huge.json "d['predicted']['baseline_activation_peak_bytes'] = 2**52"
run run claims-huge.json --steps 1 --runs v.jsonl --quiet
check "run: the memory guard ignores a baseline peak the file inflated" 0 "predicted.baseline_activation_peak_bytes: the plan file says 4503599627370496"
edit v.json claims-tiny.json "d['predicted']['activation_peak_bytes'] = 1; d['predicted']['baseline_activation_peak_bytes'] = 1"
need=$(python3 -c 'import json; p=json.load(open("v.json"))["predicted"]; print("%.1f MiB" % (p["baseline_peak_bytes"] / 2**20))')
CKPLAN_RUN_MEMORY=20M run run claims-tiny.json --steps 1 --runs v.jsonl
check "run: the memory guard uses the replayed peaks, not the file's" 2 "claims-tiny.json: running the baseline next to the plan needs $need, more than the 20.0 MiB CKPLAN_RUN_MEMORY allows"
lines=$(wc -l < v.jsonl)
CKPLAN_RUN_MEMORY=0 run run v.json --steps 1 --runs v.jsonl
check "run: CKPLAN_RUN_MEMORY=0 is a usage error" 2 "CKPLAN_RUN_MEMORY: the memory a run may use must be positive"
CKPLAN_RUN_MEMORY=0 run sweep "$tiny" --budgets 22M --planners dp --run --steps 1 --runs v.jsonl
check "sweep --run: CKPLAN_RUN_MEMORY=0 is a usage error" 2 "CKPLAN_RUN_MEMORY: the memory a run may use must be positive"
check_that "CKPLAN_RUN_MEMORY=0: nothing recorded" test "$(wc -l < v.jsonl)" = "$lines"

# Times are replayed under the rates or the costs file the plan was made with.
run plan "$tiny" --budget 22M --gemm-flops 5e10 --mem-bandwidth 1e10 -o rates.json
check_that "plan records its roofline rates" test "$(json_get rates.json '["details"]["cost_model"]')" = "{'gemm_flops': 50000000000, 'mem_bandwidth': 10000000000}"
run run rates.json --verify --steps 1 --runs v.jsonl --quiet
check "verify: a plan made with other rates passes, replayed under them" 0
edit rates.json other-rates.json "d['details']['cost_model']['gemm_flops'] = 1e11"
run run other-rates.json --verify --steps 1 --runs v.jsonl --quiet
check "verify: rates edited in the file change the replayed times" 1 "predicted.time: the plan file says" "predicted.baseline_time"
edit rates.json zero-rate.json "d['details']['cost_model']['mem_bandwidth'] = 0"
run run zero-rate.json --steps 1 --runs v.jsonl
check "run: a zero rate in the file is refused" 2 "zero-rate.json: details.cost_model.mem_bandwidth: expected a positive number"
mkdir -p costed
run profile "$tiny" --steps 1 -o costed/measured.json
(cd costed && "$bin" plan "$tiny" --budget 22M --costs measured.json -o plan.json >/dev/null)
run run costed/plan.json --verify --steps 1 --runs v.jsonl --quiet
check "verify: a plan made with --costs is replayed with the costs file beside it" 0
python3 -c 'import json; c=json.load(open("costed/measured.json")); c["chain"]["stages"][2]["fwd_time"] += 1; json.dump(c, open("costed/measured.json", "w"))'
run run costed/plan.json --verify --steps 1 --runs v.jsonl --quiet
check "verify: a costs file edited since planning changes the replayed times" 1 "predicted.time: the plan file says"
rm costed/measured.json
run run costed/plan.json --steps 1 --runs v.jsonl --quiet
check "run: a costs file the plan names and that is gone is an input error" 2 "costed/plan.json: details.costs: costed/measured.json: cannot open"

# A chain file's plan: its own time unit.
run plan "$data/chain10.json" --budget 30 --planner chen -o c10.json
edit c10.json c10-time.json "d['predicted']['time'] = 69"
run run c10-time.json --verify --steps 1 --runs v.jsonl --quiet
check "verify: a chain plan's edited time fails" 1 "predicted.time: the plan file says 69, the replay gives 68"

# model.sha256: any case; anything but 64 hex digits is an input error.
edit v.json upper.json "d['model']['sha256'] = d['model']['sha256'].upper()"
run run upper.json --verify --steps 1 --runs v.jsonl --quiet
check "verify: a model.sha256 in upper case matches" 0
edit v.json short-sha.json "d['model']['sha256'] = d['model']['sha256'][:63]"
run run short-sha.json --steps 1 --runs v.jsonl
check "run: a model.sha256 of 63 digits is refused" 2 "short-sha.json: model.sha256: expected 64 hexadecimal digits"

# model.path is relative to the plan file; a file of that name here does not interfere.
mkdir -p elsewhere
cp "$tiny" elsewhere/m.json
(cd elsewhere && "$bin" plan m.json --budget 22M -o p.json >/dev/null)
{ cat "$tiny"; echo " "; } > m.json
run run elsewhere/p.json --verify --steps 1 --runs v.jsonl --quiet
check "run: model.path is looked for beside the plan before the current directory" 0
check_that "run: the record names the model file beside the plan" test "$(last v.jsonl '["model"]["path"]')" = elsewhere/m.json
echo " " >> elsewhere/m.json
run run elsewhere/p.json --steps 1 --runs v.jsonl
check "run: a changed model names the file it compared" 2 "elsewhere/p.json: the model file elsewhere/m.json changed since the plan was made"
mkdir -p plans
run plan m.json --budget 22M -o plans/from-here.json
run run plans/from-here.json --verify --steps 1 --runs v.jsonl --quiet
check "run: a path written from the planning directory is still found from there" 0
check_that "run: ... and is the one compared" test "$(last v.jsonl '["model"]["path"]')" = m.json

# sweep: messages name the model and the point, never "(sweep, in memory)".
cat > sweep-held.json <<'EOF'
{"format": "ckplan-model/1", "name": "held", "dims": {"B": 2, "C": 4},
 "inputs": [{"name": "x", "shape": ["B", "C"]}, {"name": "y", "shape": ["B", "C"]}],
 "nodes": [{"name": "a", "op": "add", "inputs": ["x", "y"]}, {"name": "b", "op": "relu", "inputs": ["a"]},
           {"name": "loss", "op": "mse", "inputs": ["b", "y"]}]}
EOF
run sweep sweep-held.json --budgets 1G --planners dp --run --steps 1 --runs v.jsonl
check "sweep: a point that cannot run names the model and the point" 2 "sweep of sweep-held.json, dp at 1.00 GiB: sweep-held.json: node a reads input y: the executor lets only the loss read inputs other than the first"
check_that "sweep: no message says (sweep, in memory)" test -z "$(printf '%s' "$err" | grep -F '(sweep, in memory)')"
