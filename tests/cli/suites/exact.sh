# The figure the user reads is exact (issue 23 item 5): for every shipped model and every
# planner, what `plan` prints with --json and writes is what `run --verify` predicts and
# measures, to the byte; no plan is given for a budget its figure exceeds; and the smallest
# budget printed on exit 3 is met there and not one byte below (tests/cli/exact_check.py,
# from outside: plan's and run's outputs only).
for model in "$root"/models/*.json "$root"/models/hf/*.json; do
    opts=()
    case $model in */hf/*) opts=(--recipe fp32) ;; esac
    for p in dp revolve chen sqrt none; do
        check_that "exact: $(basename "$model") ${opts[*]}, $p: plan's figure is run's, within the budget, the smallest met" \
            python3 "$here/exact_check.py" "$bin" "$model" "$p" "${opts[@]}"
    done
done

# A chain file keeps its chain's replay (the contract of ../shared/spec/chain-model.md):
# dp at a budget plans within it and replays independently, figure for figure.
run plan "$data/chain10.json" --budget 30 --json -o exact-chain.json
check "exact: a chain file plans at its budget" 0
check_that "exact: ... and its figures are the spec's replay" replay exact-chain.json "$data/chain10.json"
