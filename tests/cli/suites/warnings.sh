# --device and the seed page's pitfalls as warnings (issue 11, items 7 and 8): each figure
# against a hand computation from the model's dims.
models="$root/models"

# --- devices ---------------------------------------------------------------------------
run plan "$models/llama-tiny.json" --device h100-80gb -o dev-h100.json
# 80 GiB less (1 GiB + 5% of 80 GiB = 4 GiB): 85899345920 - 1073741824 - 4294967296
check "--device h100-80gb: its memory less the reserve is the budget" 0 \
    "budget 75.0 GiB (80530636800 bytes)" "budget from --device h100-80gb" "less a reserve of 5.00 GiB"
check_that "the plan records the device and its budget" test \
    "$(json_get dev-h100.json '["details"]["device"], d["budget_bytes"]')" = "h100-80gb 80530636800"
check_that "its rates are the device's dense bf16 FLOP/s and bandwidth" test \
    "$(json_get dev-h100.json '["details"]["cost_model"]["gemm_flops"], d["details"]["cost_model"]["mem_bandwidth"]')" \
    = "989400000000000 3350000000000"
run plan "$models/llama-tiny.json" --device rtx4090 -o dev-4090.json
# 24 GiB = 25769803776; 5% = 1288490188.8, rounded up; less 1 GiB
check "--device rtx4090: the reserve's percentage is rounded up" 0 "(23407571763 bytes)"
run plan "$models/llama-tiny.json" --gemm-flops 1e12 --device a100-80gb --budget 1G -o dev-a100.json
check "--budget and --gemm-flops win over the device, whatever the order" 0 \
    "budget 1.00 GiB (1073741824 bytes)" "budget from --budget; device a100-80gb"
check_that "the explicit rate is kept, the device's bandwidth taken" test \
    "$(json_get dev-a100.json '["details"]["cost_model"]["gemm_flops"], d["details"]["cost_model"]["mem_bandwidth"]')" \
    = "1000000000000 2039000000000"
run run dev-a100.json --steps 1 --runs dev-runs.jsonl
check "run reads a plan with details.device back" 0 "llama-tiny"
run plan "$models/llama-tiny.json" --device h100
check "an unknown device lists the known ones" 2 "--device: no device 'h100'; known devices: h100-80gb, h200, a100-40gb, a100-80gb, l40s, rtx4090, mi300x"
run plan --help
check "plan --help lists the devices" 0 "h100-80gb" "h200" "a100-40gb" "a100-80gb" "l40s" "rtx4090" "mi300x"
run sweep "$models/llama-tiny.json" --device l40s --planners dp --runs dev-sweep.jsonl
check "sweep without --budgets takes the device's budget" 0 "1 points"
check_that "at 48 GiB less (1 GiB + 5% rounded up)" test \
    "$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["plan"]["budget_bytes"])' dev-sweep.jsonl)" = 47888885350

# --- kv_cache --------------------------------------------------------------------------
sed 's/"name": "llama-tiny",/"name": "llama-tiny", "use_cache": true,/' "$models/llama-tiny.json" > kv.json
run plan kv.json --budget 1G --batch 3 --seq 32 -o kv.plan.json
# 2 x 4 layers x batch 3 x seq 32 x 2 kv heads x head size 16 x 4 bytes (f32) = 98304
check "kv_cache: the cache's bytes at this batch and sequence, on stderr" 0 \
    "warning: kv_cache:" "98304 bytes = 2 x 4 layers x batch 3 x seq 32 x 2 kv heads x head size 16 x 4 bytes" "use_cache = False"
check_that "and in the plan" test "$(json_get kv.plan.json '["warnings"][0]["code"], d["warnings"][0]["bytes"]')" = "kv_cache 98304"
run plan "$models/llama-tiny.json" --budget 1G -o nokv.plan.json
check "no kv_cache warning without use_cache" 0
check_that "and no warnings in its plan" test "$(json_get nokv.plan.json '.get("warnings")')" = None

# --- attention_scores ------------------------------------------------------------------
run plan "$models/gpt2-tiny.json" --budget 1G --seq 512 -o att.plan.json
# non-flash with dropout: probabilities f32 + mask u8 + dropped f32 kept, f32 scores as
# workspace: 13 x B 4 x H 4 x T 512 x T 512 = 54525952; flash: lse 4 x 4 x 512 x 4 + a row
# of 512 x 8 bytes backward = 36864
check "attention_scores: one layer's scores and the flash figure" 0 \
    "warning: attention_scores: attention 'h.0.attn' has no flash kernel" "(54525952 bytes:" "(36864 bytes)" "No plan can go below it"
check_that "and in the plan" test "$(json_get att.plan.json '["warnings"][0]["code"], d["warnings"][0]["bytes"]')" = "attention_scores 54525952"
run plan "$models/gpt2-tiny.json" --budget 1G -o short.plan.json
check_that "at T=64 the scores are below the rest of the stage: no warning" test "$(json_get short.plan.json '.get("warnings")')" = None

# --- static_over_budget ----------------------------------------------------------------
run plan "$models/gpt2-tiny.json" --budget 4M -o static.plan.json
# 867072 parameters (f32 weights, gradients, Adam 8 bytes) + 2048 bytes of token ids and targets
check "static_over_budget: the bytes, and ZeRO or offload per GPU" 3 \
    "warning: static_over_budget: budget 4.00 MiB is below the static memory of 13.2 MiB (13875200 bytes" \
    "ZeRO-1" "ZeRO-2" "ZeRO-3" "offload" "over 8 GPUs"
check_that "no plan is written" test ! -e static.plan.json

# --- inference -------------------------------------------------------------------------
cat > mlp.json <<'JSON'
{"format": "ckplan-model/1", "name": "mlp", "dims": {"B": 2, "T": 4, "C": 8},
 "inputs": [{"name": "x", "shape": ["B", "T", "C"]}, {"name": "y", "shape": ["B", "T", "C"]}],
 "nodes": [{"name": "fc", "op": "linear", "out": "2*C", "inputs": ["x"]},
           {"name": "act", "op": "relu", "inputs": ["fc"]},
           {"name": "fc2", "op": "linear", "out": "C", "inputs": ["act"]},
           {"name": "loss", "op": "mse", "inputs": ["fc2", "y"]}]}
JSON
# weights (8x16 + 16 + 16x8 + 8) x 4 = 1120; the forward's peak is relu's input and output,
# 2 x (2 x 4 x 16 x 4) = 1024, and x (2 x 4 x 8 x 4 = 256): relu does not save fc's output,
# so no stage ends there, and the stage fc..act frees its input x at its end; no
# attention, no KV cache: 2400
run plan mlp.json --inference --budget 2400 --json -o inf.plan.json
check "inference: weights, KV cache and forward peak, fits at exactly their sum" 0 \
    '"weights_bytes":	1120' '"kv_cache_bytes":	0' '"forward_peak_bytes":	1280' '"total_bytes":	2400' "checkpointing saves nothing"
check_that "--inference writes no plan" test ! -e inf.plan.json
run plan mlp.json --inference --budget 2399
check "inference one byte over the budget exits 3" 3 "needs 2.34 KiB (2400 bytes), more than the budget"
run plan kv.json --inference --budget 1G --batch 3 --seq 32 --json
check "inference reports the KV cache whatever use_cache says" 0 '"kv_cache_bytes":	98304'
run plan "$data/chain10.json" --inference --budget 1G
check "inference needs a model file" 2 "--inference needs a model file"
# Under ZeRO-3 the forward gathers each unit whole as training's does (issue 24): the
# rank's shard of the weights plus the buffers of a unit and the next. mlp.json is one unit
# of 280 f32 parameters (each tensor's share divides: 32 + 4 + 32 + 2 of them): 280 + 1120
# + the same forward peak, 1280.
run plan mlp.json --inference --budget 1G --dp 4 --zero 3 --json
check "inference under ZeRO-3: the shard and the whole unit gathered" 0 \
    '"weights_bytes":	280' '"gather_buffers_bytes":	1120' '"total_bytes":	2680' "ZeRO-3 all-gather buffers"
run plan mlp.json --inference --budget 1G --dp 4 --zero 2 --json
check "inference under ZeRO-2 gathers nothing" 0 '"weights_bytes":	1120' '"gather_buffers_bytes":	0'
# Llama-3-8B at --dp 8 --zero 3, from its config in closed form: bf16, the embeddings V*C,
# a layer 2C^2 + 2C*KV*D + 3C*F + 2C, the head C + V*C; the largest neighbours are the
# embeddings and the first layer; every tensor divides by 8.
"$bin" plan "$root/tests/data/hf/llama-3-8b" --inference --budget 1T --dp 8 --zero 3 --json \
    > inf-llama.json 2>/dev/null
check_that "inference of Llama-3-8B under ZeRO-3 at --dp 8: weights and buffers in closed form" \
    python3 - "$root/tests/data/hf/llama-3-8b/config.json" inf-llama.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); f = json.load(open(sys.argv[2]))
C, V, L, F = c["hidden_size"], c["vocab_size"], c["num_hidden_layers"], c["intermediate_size"]
H, KV = c["num_attention_heads"], c["num_key_value_heads"]; D = C // H
embed, layer, head = V * C, 2 * C * C + 2 * C * KV * D + 3 * C * F + 2 * C, C + V * C
params = embed + L * layer + head
want = {"weights_bytes": 2 * params // 8, "gather_buffers_bytes": 2 * max(embed + layer, layer + head, 2 * layer)}
got = {k: f[k] for k in want}
assert got == want, (got, want)
assert f["total_bytes"] == sum(f[k] for k in ("weights_bytes", "gather_buffers_bytes", "kv_cache_bytes", "forward_peak_bytes")), f
PY
