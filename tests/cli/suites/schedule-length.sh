# The limit on schedule length (CKPLAN_MAX_SCHEDULE_OPS): revolve with few snapshots on a
# long chain would make a schedule of order L^(1+1/s) operations; it is refused, with exit
# 2, before it is built. Uniform chains of 1-byte tensors: with a budget of 6 bytes revolve
# fits 2 snapshots on 200 stages, 2L + 1 + p(200, 2) = 2871 operations.
uniform_chain() {
    python3 - "$1" "$2" <<'PY'
import json, sys
L = int(sys.argv[1])
stages = [{"name": f"s{i}", "fwd_time": 1, "bwd_time": 1, "out_bytes": 1, "saved_bytes": 1}
          for i in range(L)]
json.dump({"format": "ckplan-chain/1", "name": f"uniform-{L}", "input_bytes": 1,
           "stages": stages}, open(sys.argv[2], "w"))
PY
}
uniform_chain 200 u200.json
uniform_chain 20000 u20k.json

run plan u200.json --budget 6 --planner revolve -o len-default.json
check "revolve within the default schedule-length limit" 0 "planner revolve"
check_that "its schedule has 2L + 1 + p(L, s) operations" test "$(json_get len-default.json '["schedule"].__len__()')" = 2871
check_that "its schedule replays to its predictions" replay len-default.json u200.json

CKPLAN_MAX_SCHEDULE_OPS=2871 run plan u200.json --budget 6 --planner revolve -o len-at.json
check "a schedule exactly at the limit is planned" 0 "planner revolve"
CKPLAN_MAX_SCHEDULE_OPS=2870 run plan u200.json --budget 6 --planner revolve -o len-over.json
check "a schedule one operation over the limit is refused, naming the limit" 2 \
    "2 snapshots, the most that fit in 6 bytes" "2871 operations" "limit of 2870" "CKPLAN_MAX_SCHEDULE_OPS"
check_that "a refused schedule writes no file" test ! -e len-over.json
for bad in 0 -5 abc ""; do
    CKPLAN_MAX_SCHEDULE_OPS=$bad run plan u200.json --budget 6 --planner revolve -o len-bad.json
    check "CKPLAN_MAX_SCHEDULE_OPS='$bad' leaves the default limit" 0 "planner revolve"
done

# 20,000 stages: at 5 bytes only one snapshot fits, p = L(L-1)/2, 2e8 operations.
run plan u20k.json --budget 5 --planner revolve -o len-long.json
check "a 200-million-operation revolve schedule is refused under the default limit" 2 \
    "200030001 operations" "limit of 1000000" "CKPLAN_MAX_SCHEDULE_OPS"
check_that "and no file is written" test ! -e len-long.json
# Below every peak: the minimum budget printed is one revolve can plan within the limit.
run plan u20k.json --budget 3 --planner revolve -o len-none.json
check "infeasible under the limit: the minimum is one planned within it" 3 "its smallest plan needs"
min=$(printf '%s' "$err" | sed -n 's/.*its smallest plan needs [^(]*(\([0-9]*\) bytes).*/\1/p')
run plan u20k.json --budget "$min" --planner revolve -o len-min.json
check "revolve plans at that minimum" 0 "planner revolve"
check_that "within the limit" test "$(json_get len-min.json '["schedule"].__len__()')" -le 1000000

# The limit holds for every plan; the other planners' schedules are checked once made.
CKPLAN_MAX_SCHEDULE_OPS=500 run plan u200.json --budget 40 --planner sqrt -o len-sqrt.json
check "a sqrt schedule over a lowered limit is refused" 2 "planner sqrt: its schedule" "limit of 500"
CKPLAN_MAX_SCHEDULE_OPS=400 run plan u200.json --budget 1G -o len-base.json
check "so is the store-everything schedule (401 operations)" 2 "store-everything schedule would have 401 operations"
check_that "neither writes a file" test ! -e len-sqrt.json -a ! -e len-base.json
