# dp in exact bytes (--slots exact) and the plain loss: a chain whose loss holds more than
# its last activations, planned at budgets where computing the loss from the plain x_L is
# the fastest way; the plans replay independently (tests/cli/replay.py) within the budget.

python3 - "$work/heavy-loss.json" <<'PY'
import json, random, sys
rng = random.Random(5)
stages = []
for i in range(12):
    out = rng.randint(1, 9)
    stages.append({"fwd_time": rng.randint(1, 5), "bwd_time": rng.randint(1, 5), "out_bytes": out,
                   "saved_bytes": out + rng.randint(0, 9)})
json.dump({"format": "ckplan-chain/1", "name": "heavy-loss", "input_bytes": 3, "stages": stages,
           "loss": {"bwd_time": 1, "bwd_tmp_bytes": 30}}, open(sys.argv[1], "w"))
PY
run plan heavy-loss.json --budget 60 --slots exact -o exact-60.json
check "--slots exact plans" 0
check_that "--slots exact records its slots and 1-byte units" \
    test "$(json_get exact-60.json '["details"]["slots"]')/$(json_get exact-60.json '["details"]["memory_unit_bytes"]')" = "exact/1"
check_that "the exact plan replays as it says" replay exact-60.json heavy-loss.json
check_that "the exact plan fits the budget" test "$(json_get exact-60.json '["predicted"]["activation_peak_bytes"]')" -le 60
check_that "the loss reads the plain x_L (F_none of the last stage just before it)" python3 -c '
import json, sys
s = json.load(open("exact-60.json"))["schedule"]
k = [a["op"] for a in s].index("loss")
sys.exit(not (s[k - 1] == {"op": "F_none", "stage": 11} and {"op": "F_all", "stage": 11} in s[k:]))'
run plan heavy-loss.json --budget 60 --slots 7 -o coarse-60.json
check_that "coarse slots are never faster than exact bytes" python3 -c "import sys; sys.exit(not float('$(json_get coarse-60.json '["predicted"]["time"]')') >= float('$(json_get exact-60.json '["predicted"]["time"]')'))"
run plan heavy-loss.json --budget 1G --slots exactly
check "--slots takes a number or exact" 2 "--slots: expected a whole number"
python3 "$root/tests/bench/hetero_chain.py" 300 "$work/hetero-300.json" 40 > "$work/budget-300"
run plan hetero-300.json --budget "$(cat "$work/budget-300")" --slots exact -o never.json
check "--slots exact refuses a table over 1 GiB, saying what to do" 2 "exactly in bytes (--slots exact)" \
    "more than 1 GiB" "use --slots N"
check_that "a refused plan writes nothing" test ! -e never.json

# --threads: dp fills its tables on N threads, and the plan file is the same for every N
# (planner/dp_rows.h); it is refused outside 1 .. 64 and for graphs, which dp does not plan.
for n in 1 3 8; do
    run plan heavy-loss.json --budget 60 --threads $n -o threads-$n.json
    check "plan --threads $n" 0
done
check_that "the plan file is the same on 1, 3 and 8 threads" \
    eval 'cmp threads-1.json threads-3.json && cmp threads-1.json threads-8.json'
run plan "$root/models/gpt2-tiny.json" --budget 20M --threads 1 -o tiny-1.json
run plan "$root/models/gpt2-tiny.json" --budget 20M --threads 4 -o tiny-4.json
check_that "a model's plan is the same on 1 and 4 threads" cmp tiny-1.json tiny-4.json
run plan heavy-loss.json --budget 60 --threads 0
check "--threads 0 is refused" 2 "--threads: expected a whole number from 1 to 64, got '0'"
run plan heavy-loss.json --budget 60 --threads 65
check "--threads 65 is refused" 2 "from 1 to 64, got '65'"
run plan "${CKPLAN_GRAPHS:-$root/../shared/graphs/checkmate}/vgg16-b256.json" --budget 15G --threads 2
check "--threads does not apply to a graph" 2 "--threads does not apply to a Checkmate graph"
