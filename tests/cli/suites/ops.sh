# Models that use each op added since the op table became the one home of an op's facts
# (rope, cast, swiglu): every planner's plan, half-way between dp's smallest plan and the
# baseline, runs under --verify with the measured activation peak equal to the predicted
# one, to the byte, and the baseline's gradients bit for bit.

# verify_planners NAME MODEL: the cases above for MODEL.
verify_planners() {
    local name=$1 model=$2
    run plan "$model" --budget 1000T --json -o "ops-$name-big.json"
    check "$name: plans" 0
    local static base min
    static=$(json_get "ops-$name-big.json" '["predicted"]["static_bytes"]')
    base=$(json_get "ops-$name-big.json" '["predicted"]["baseline_peak_bytes"]')
    run plan "$model" --budget "$static"
    min=$(printf '%s\n' "$err" | sed -n 's/.*its smallest plan needs [^(]*(\([0-9]*\) bytes).*/\1/p')
    check_that "$name: dp names its smallest plan" test -n "$min"
    local budget=$(( (min + base) / 2 )) planned=0
    rm -f "ops-$name.jsonl"
    for planner in dp revolve chen sqrt; do
        run plan "$model" --budget "$budget" --planner "$planner" -o "ops-$name-$planner.json"
        [ "$rc" = 0 ] || continue
        planned=$((planned + 1))
        run run "ops-$name-$planner.json" --verify --steps 1 --runs "ops-$name.jsonl" --quiet
        check "$name: $planner's plan passes --verify" 0
    done
    check_that "$name: at least three planners plan at the middle budget" test "$planned" -ge 3
    check_that "$name: measured peaks equal predicted ones, gradients identical, something recomputed" \
        python3 - "ops-$name.jsonl" "$planned" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
assert len(records) == int(sys.argv[2]), len(records)
for r in records:
    p, m, b, v = r["predicted"], r["plan_run"], r["baseline"], r["verification"]
    assert v["passed"] and v["gradients_identical"] and v["loss_identical"], v
    assert m["activation_peak_bytes"] == p["activation_peak_bytes"], (m, p)
    assert b["activation_peak_bytes"] == p["baseline_activation_peak_bytes"], (b, p)
    assert p["activation_peak_bytes"] < p["baseline_activation_peak_bytes"], p
PY
}

verify_planners rope "$data/rope-tiny.json"
verify_planners swiglu "$data/swiglu-tiny.json"
verify_planners cast "$data/cast-tiny.json"

# cast: `to` is a float dtype; any op may run on what a cast made.
# ops_edit OUT PYTHON: cast-tiny.json as `d` after the statements PYTHON.
ops_edit() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(d, open(sys.argv[2], "w"))' "$data/cast-tiny.json" "$@"; }
ops_edit ops-cast-int.json "d['blocks']['layer']['nodes'][2]['to'] = 'int32'"
run plan ops-cast-int.json --budget 1G -o ops-cast-int-plan.json
check "cast: an integer \"to\" is refused, naming the file and JSON path" 2 \
    "ops-cast-int.json: blocks.layer.nodes[2].to: expected a float dtype (\"f32\", \"bf16\" or \"f16\"), got the string \"int32\""
ops_edit ops-cast-gelu.json "d['blocks']['layer']['nodes'][3] = {'name': 'back', 'op': 'gelu', 'inputs': ['low']}"
run plan ops-cast-gelu.json --budget 1G -o ops-cast-gelu-plan.json
check "cast: a gelu on bf16 is planned" 0
run run ops-cast-gelu-plan.json --verify --steps 1 --runs ops-cast-gelu.jsonl
check "cast: a gelu on bf16 between casts runs and verifies" 0 "verify: passed"
