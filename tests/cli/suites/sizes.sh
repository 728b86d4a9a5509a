# Sizes as people write them (--budget, --budgets): the decimal is read exactly, the value
# must be a whole number of bytes whatever its unit, and below 2^53 (issue 9, item 12).
check_that "--budget in every unit agrees with exact rational arithmetic (tests/cli/check_sizes.py)" \
    python3 "$here/check_sizes.py" "$bin" "$data/chain10.json"
run plan "$data/chain10.json" --budget 1.5b
check "1.5b is refused as 1.5 is, not floored to a byte" 2 "invalid size '1.5b' (not a whole number of bytes)"
run plan "$data/chain10.json" --budget 1.0 --planner none -o sizes-one.json
check "1.0 is a whole byte" 3 "budget 1 B (1 bytes)"
run sweep "$data/chain10.json" --budgets 100,0.3K --planners dp --runs sizes-runs.jsonl
check "sweep's budgets are read the same way" 2 "invalid size '0.3K' (not a whole number of bytes)"
check_that "a refused budget list appends nothing" test ! -e sizes-runs.jsonl
