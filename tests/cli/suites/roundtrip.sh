# Round trips (issue 9, item 5): every number ckplan accepts is one it can write and read
# back. Each family of tests/cli/roundtrip.py takes its inputs up to and past the limits
# (sizes below 2^53, stage times at most 1e100): what ckplan accepts, the plans, chains,
# costs and runs records it writes are read back by run, plan, chain and report; what it
# refuses is refused where it enters, naming the limit.
for family in budgets rates dims chains minimums times costs seeds; do
    check_that "round trip: $family up to and past the limits (tests/cli/roundtrip.py $family)" \
        python3 "$here/roundtrip.py" "$family" "$bin" "$root"
done
run plan "$root/models/gpt2-tiny.json" --budget 9000T
check "a budget of 2^53 bytes or more is refused, naming the limit" 2 \
    "invalid size '9000T' (too large: sizes must stay below 2^53 bytes (8 PiB) so that JSON readers keep them exact)"
run plan "$root/models/gpt2-tiny.json" --budget 22M --gemm-flops 1e-300 -o never.plan.json
check "a cost model that makes infinite times is refused, naming the limit" 2 \
    "of stage embed..drop_embed is" "more than the limit of 1e+100 s" "--gemm-flops"
check_that "and writes no plan" test ! -e never.plan.json
# input 1 + saved + y_0 1: the store-everything step needs saved + 2 bytes
printf '{"format": "ckplan-chain/1", "input_bytes": 1, "stages": [{"fwd_time": 1, "bwd_time": 1, "out_bytes": 0, "saved_bytes": 9007199254740989}]}' > exact-edge.json
check_that "a chain needing 2^53 - 1 bytes is accepted, its sizes written in full (not 9.00719925474099e+15)" \
    bash -c '"$1" chain exact-edge.json -o exact-edge.out.json && grep -q "\"saved_bytes\":[[:space:]]*9007199254740989," exact-edge.out.json' _ "$bin"
sed 's/9007199254740989/9007199254740990/' exact-edge.json > past-edge.json
run plan past-edge.json --budget 1G
check "one byte more (2^53) is refused when the chain is loaded" 2 \
    "past-edge.json: the store-everything step needs 8.00 PiB (9007199254740992 bytes" "below 2^53 bytes (8 PiB)"
