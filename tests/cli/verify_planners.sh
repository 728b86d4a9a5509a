# verify_planners NAME MODEL [--may-store-all] [PLAN_OPTION...], for the suites that add an
# op or a model feature (ops.sh, moe.sh, frozen.sh): every planner's plan of MODEL, half-way
# between dp's smallest plan and the baseline, passes `run --verify`; at least three
# planners plan there; their records show measured peaks and static memory equal to the
# predicted ones and the baseline's gradients bit for bit (tests/cli/check_runs.py), and a
# plan below the baseline unless --may-store-all (dp's smallest plan may be the baseline).
# Sourced by those suites; uses tests/cli/run's helpers.

# The chain planners, as `plan --help` lists them from the registry: a new planner is
# verified without a list here to update.
registry_planners() { "$bin" plan --help | sed -n '/^planners:/,/^$/p' | awk 'NR > 1 && NF {print $1}'; }

verify_planners() {
    local name=$1 model=$2 recomputes=--recomputes; shift 2
    [ "${1:-}" = --may-store-all ] && { recomputes=; shift; }
    run plan "$model" "$@" --budget 1000T --json -o "vp-$name-big.json"
    check "$name: plans" 0
    local static base min
    static=$(json_get "vp-$name-big.json" '["predicted"]["static_bytes"]')
    base=$(json_get "vp-$name-big.json" '["predicted"]["baseline_peak_bytes"]')
    run plan "$model" "$@" --budget "$static"
    min=$(printf '%s\n' "$err" | sed -n 's/.*its smallest plan needs [^(]*(\([0-9]*\) bytes).*/\1/p')
    check_that "$name: dp names its smallest plan" test -n "$min"
    local budget=$(( (min + base) / 2 )) planned=0
    rm -f "vp-$name.jsonl"
    for planner in $(registry_planners); do
        run plan "$model" "$@" --budget "$budget" --planner "$planner" -o "vp-$name-$planner.json"
        [ "$rc" = 0 ] || continue
        planned=$((planned + 1))
        run run "vp-$name-$planner.json" --verify --steps 1 --runs "vp-$name.jsonl" --quiet
        check "$name: $planner's plan passes --verify" 0
    done
    check_that "$name: at least three planners plan at the middle budget" test "$planned" -ge 3
    check_that "$name: measured peaks and static memory equal predicted ones, gradients identical${recomputes:+, something recomputed}" \
        python3 "$here/check_runs.py" "vp-$name.jsonl" "$planned" $recomputes
}
