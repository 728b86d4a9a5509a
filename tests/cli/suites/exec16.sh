# 16-bit execution: the shipped bf16, amp and f16 models (and gpt2-tiny-bf16 in f16) plan
# and run with --verify under every planner, and the run record's byte figures are the
# plan's: static memory at each dtype's size, activation peaks to the byte.

# bytes_match PLAN: the last record of e16.jsonl (a run of PLAN) passed, with identical
# gradients, and its byte figures are PLAN's.
bytes_match() {
    python3 - "$1" e16.jsonl <<'EOF'
import json, sys
plan = json.load(open(sys.argv[1]))["predicted"]
r = json.loads(open(sys.argv[2]).read().splitlines()[-1])
pred, base, run, v = r["predicted"], r["baseline"], r["plan_run"], r["verification"]
assert v["passed"] and v["gradients_identical"] and v["max_abs_gradient_difference"] == 0, v
assert base["gradients_sha256"] == run["gradients_sha256"]
assert pred["static_bytes"] == plan["static_bytes"] == base["static_bytes"] == run["static_bytes"], (plan, r)
assert run["activation_peak_bytes"] == pred["activation_peak_bytes"] <= plan["activation_peak_bytes"], (plan, r)
assert base["activation_peak_bytes"] == pred["baseline_activation_peak_bytes"] <= plan["baseline_activation_peak_bytes"], (plan, r)
EOF
}

sed 's/bf16/f16/g' "$root/models/gpt2-tiny-bf16.json" > gpt2-tiny-f16.json
# name, model file, the static bytes by hand: parameters x (parameter + gradient + master
# + Adam's two f32 moments) bytes, plus the int32 tokens and targets (B*T*4 each).
while read -r name model per_param params; do
    want_static=$((params * per_param + 2 * 4 * 64 * 4))
    run plan "$model" --budget 1T -o "e16-$name-big.json"
    check "exec16 $name: plans" 0 "the baseline fits"
    static=$(json_get "e16-$name-big.json" '["predicted"]["static_bytes"]')
    check_that "exec16 $name: static memory is $per_param bytes a parameter plus the inputs" test "$static" = "$want_static"
    base=$(json_get "e16-$name-big.json" '["predicted"]["baseline_activation_peak_bytes"]')
    for planner in dp revolve chen sqrt; do
        run plan "$model" --budget "$static" --planner "$planner" -o never.json
        min=$(printf '%s' "$err" | sed -n 's/.*its smallest plan needs [^(]*(\([0-9]*\) bytes).*/\1/p')
        # every planner at its smallest budget (the most recomputation); dp half-way too
        for at in minimum half-way; do
            [ "$at" = half-way ] && [ "$planner" != dp ] && continue
            budget=$min
            [ "$at" = half-way ] && budget=$(( (min + static + base) / 2 ))
            p="e16-$name-$planner-$at.json"
            run plan "$model" --budget "$budget" --planner "$planner" -o "$p"
            check "exec16 $name: $planner plans at its $at budget" 0 "planner $planner"
            run run "$p" --verify --steps 1 --runs e16.jsonl --quiet
            check "exec16 $name: run --verify passes for $planner at its $at budget" 0
            check_that "exec16 $name/$planner/$at: the record's bytes are the plan's" bytes_match "$p"
        done
    done
done <<EOF
bf16 $root/models/gpt2-tiny-bf16.json 16 867072
amp $root/models/gpt2-tiny-amp.json 16 867072
f16 $root/models/llama-tiny-f16.json 12 836736
f16-master gpt2-tiny-f16.json 16 867072
EOF

# 16-bit activations halve what the f32 model saves, but for the f32 statistics and the
# one-byte dropout masks, which stay.
f32_base=$(json_get gpt2-tiny-block-big.json '["predicted"]["baseline_activation_peak_bytes"]')
b16_base=$(json_get e16-bf16-big.json '["predicted"]["baseline_activation_peak_bytes"]')
check_that "exec16: bf16 activations need between half and two thirds of f32's" python3 -c "
import sys; f, b = $f32_base, $b16_base; sys.exit(not (f / 2 < b < 2 * f / 3))"

# A kernel added without a thought for 16 bits runs in them: moe-tiny in bf16 with master
# weights, under every planner at its minimum budget.
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d["dtype"] = "bf16"
d["training"].update({"param_dtype": "bf16", "master_weights": True}); json.dump(d, open("moe-bf16.json", "w"))' "$data/moe-tiny.json"
run plan moe-bf16.json --budget 1T -o e16-moe-big.json
moe_static=$(json_get e16-moe-big.json '["predicted"]["static_bytes"]')
for planner in dp revolve chen sqrt; do
    run plan moe-bf16.json --budget "$moe_static" --planner "$planner" -o never.json
    min=$(printf '%s' "$err" | sed -n 's/.*its smallest plan needs [^(]*(\([0-9]*\) bytes).*/\1/p')
    run plan moe-bf16.json --budget "$min" --planner "$planner" -o "e16-moe-$planner.json"
    run run "e16-moe-$planner.json" --verify --steps 1 --runs e16.jsonl --quiet
    check "exec16 moe-bf16: run --verify passes for $planner at its minimum" 0
    check_that "exec16 moe-bf16/$planner: the record's bytes are the plan's" bytes_match "e16-moe-$planner.json"
done
