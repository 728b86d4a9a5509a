# Loading at scale: the stage limit and how to raise it; a model over the limit is refused
# without first doing work that grows faster than the model (the speed itself is measured
# by tests/bench/loading.sh, not here).
big_model() { python3 "$root/tests/bench/big_model.py" "$@"; }

# A model of 100,001 relu stages, one over the default limit. It took minutes to refuse
# when loading was quadratic: `timeout` makes a return of that fail here instead of hang.
run_in_time() { out=$(timeout 120 "$bin" "$@" 2>"$work/err"); rc=$?; err=$(cat "$work/err"); }
big_model chain 100001 over-limit.json
for cmd in "chain over-limit.json -o never.chain.json" "plan over-limit.json --budget 1T -o never.json"; do
    # shellcheck disable=SC2086  # the words of $cmd are the arguments
    run_in_time $cmd
    check "${cmd%% *}: a model over the stage limit is refused, naming the limit and its variable" 2 \
        "over-limit.json: 100001 stages is more than the limit of 100000 stages" \
        "(set CKPLAN_MAX_STAGES to raise it)"
done
check_that "nothing is written for a refused model" test ! -e never.json -a ! -e never.chain.json

# CKPLAN_MAX_STAGES sets the limit for derived chains and chain files alike.
big_model chain 12 twelve.json
CKPLAN_MAX_STAGES=11 run chain twelve.json -o twelve.chain.json
check "CKPLAN_MAX_STAGES lowers the limit of a derived chain" 2 \
    "twelve.json: 12 stages is more than the limit of 11 stages (set CKPLAN_MAX_STAGES to raise it)"
CKPLAN_MAX_STAGES=12 run chain twelve.json -o twelve.chain.json
check "a chain at the limit is derived" 0
CKPLAN_MAX_STAGES=11 run plan twelve.chain.json --budget 1T -o twelve-plan.json
check "CKPLAN_MAX_STAGES applies to chain files, at their stages" 2 \
    "twelve.chain.json: stages: 12 stages is more than the limit of 11 stages (set CKPLAN_MAX_STAGES"
# Anything but a positive whole number leaves the default in force, with a warning: " 5"
# and "+5" would refuse the 12 stages if read as 5 (strtoul reads them so), and "-1" would
# lift the nesting limit of 64 if read as ULONG_MAX.
for value in 0 -3 twelve "" " 5" "+5" "5x" 0x5; do
    CKPLAN_MAX_STAGES=$value run plan twelve.chain.json --budget 1T -o twelve-plan.json
    check "CKPLAN_MAX_STAGES='$value' is not a limit: the default applies, with a warning" 0 \
        "12 stages" "warning: CKPLAN_MAX_STAGES=\"$value\" is not a positive whole number"
done
python3 -c "print('['*200 + ']'*200)" > deep.json
for value in -1 " 300" "+300" 300abc; do
    CKPLAN_MAX_JSON_DEPTH=$value run plan deep.json --budget 1G
    check "CKPLAN_MAX_JSON_DEPTH='$value' is not a limit: the default of 64 applies" 2 \
        "nested deeper than the limit of 64 levels" "warning: CKPLAN_MAX_JSON_DEPTH=\"$value\""
done

# What plan writes under a limit, run reads under it: a plan's stage count is held to the
# same limit as the chain it came from.
CKPLAN_MAX_STAGES=12 run plan twelve.chain.json --budget 1T -o twelve-plan.json
check "a plan of 12 stages is made at the limit of 12" 0
CKPLAN_MAX_STAGES=12 CKPLAN_RUN_MEMORY=1 run run twelve-plan.json --steps 1 --runs twelve.jsonl
check "run reads that plan under the same limit (and stops at the memory it may use)" 2 \
    "more than the 1 B"
CKPLAN_MAX_STAGES=11 run run twelve-plan.json --steps 1 --runs twelve.jsonl
check "run refuses the plan under a lower limit, naming it and its variable" 2 \
    "twelve-plan.json: stages: 12 stages is more than the limit of 11 stages (set CKPLAN_MAX_STAGES"
