# Data-parallel layouts (--dp, --zero, --fsdp): static memory per rank on Llama-3-8B with
# the ZeRO stages in their order, the layout and the buffers in the plan and --json, plans
# read back (run refuses what it cannot execute and runs what shards nothing), the aliases
# and the layouts that shard nothing.

llama="$root/tests/data/hf/llama-3-8b"
for z in 0 1 2 3; do
    run plan "$llama" --seq 8192 --batch 1 --recipe bf16-master --dp 8 --zero $z --device h100-80gb \
        -o "zero-llama-$z.json"
done
check "llama-3-8b --dp 8 --zero 3 on h100-80gb plans" 0 \
    "layout: 8 data-parallel ranks, ZeRO-3: optimizer state, master weights, gradients and parameters sharded" \
    "    gather " "    scatter " "plan written to zero-llama-3.json"
check_that "static per rank: ZeRO-1 > 2 > 3, each the sum of its named parts" \
    python3 - zero-llama-1.json zero-llama-2.json zero-llama-3.json <<'PY'
import json, sys
plans = [json.load(open(f)) for f in sys.argv[1:]]
s = [p["predicted"]["static_bytes"] for p in plans]
assert s[0] > s[1] > s[2], s
for p in plans:
    parts = p["predicted"]["static"]
    assert sum(parts.values()) == p["predicted"]["static_bytes"], parts
    assert p["predicted"]["peak_bytes"] <= p["budget_bytes"]
z1, z2, z3 = (p["predicted"]["static"] for p in plans)
assert z1["gather_buffers"] == z1["reduce_scatter_buffers"] == 0
assert z2["gather_buffers"] == 0 < z2["reduce_scatter_buffers"]
assert z3["gather_buffers"] > 0 and z3["parameters"] * 8 >= 2 * 8030261248
assert plans[2]["model"]["options"]["dp"] == 8 and plans[2]["model"]["options"]["zero"] == 3
PY
check_that "ZeRO-0 over 8 ranks keeps it all: no plan at 75 GiB a GPU" test ! -e zero-llama-0.json

run plan "$llama" --seq 8192 --batch 1 --recipe bf16-master --dp 8 --zero 3 --device h100-80gb --json
check "--json carries the layout and the buffers" 0 '"zero":' '"gather_buffers"' '"reduce_scatter_buffers"'

run run zero-llama-3.json --steps 1
check "run refuses a plan whose layout shards" 2 "zero-llama-3.json: model.options: the plan is one rank's of --dp 8 --zero 3" \
    "run it with --ranks 8"

# --fsdp's strategies are ZeRO-3 and 2; --zero over one rank shards nothing
tiny="$root/models/gpt2-tiny.json"
run plan "$tiny" --budget 1000T --fsdp full-shard --dp 4 -o zero-fsdp.json
run plan "$tiny" --budget 1000T --zero 3 --dp 4 -o zero-3.json
check_that "--fsdp full-shard is --zero 3" test "$(json_get zero-fsdp.json '["predicted"]["static"]')" = \
    "$(json_get zero-3.json '["predicted"]["static"]')"
run plan "$tiny" --budget 1000T -o zero-none.json
run plan "$tiny" --budget 1000T --zero 3 -o zero-one-rank.json
check "--zero 3 alone is one rank" 0 "layout: 1 data-parallel rank, ZeRO-3: nothing sharded"
check_that "--zero 3 over one rank has the static memory of no layout" \
    test "$(json_get zero-one-rank.json '["predicted"]["static"]')" = "$(json_get zero-none.json '["predicted"]["static"]')"

# a layout that shards nothing runs: one rank's step, checked
run plan "$tiny" --budget 1000T --dp 4 --zero 0 -o zero-dp4.json
run run zero-dp4.json --steps 1 --verify --runs zero-runs.jsonl
check "run executes --dp 4 --zero 0 (nothing sharded) and verifies it" 0
