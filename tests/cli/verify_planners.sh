# verify_planners NAME MODEL, for the suites that add an op (ops.sh, moe.sh): every
# planner's plan of MODEL, half-way between dp's smallest plan and the baseline, runs under
# --verify with the measured activation peak equal to the predicted one, to the byte, and the
# baseline's gradients bit for bit. Sourced by those suites; uses tests/cli/run's helpers.
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
