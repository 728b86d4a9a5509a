# Stage variants (selective recompute): chain files declare them, dp chooses them with its
# checkpoints, plan files name them on F_all ("variant"), and run binds and runs them: the
# independent replay (replay.py) agrees with every figure, `run --verify` passes on chain
# files and on the bundled models with attention, and bad variants are refused by path.

# Stage 1 keeps 9 bytes; its variant "lean" keeps 3 and pays 4 more in its backward.
cat > var-chain.json <<'JSON'
{"format": "ckplan-chain/1", "name": "var-3", "input_bytes": 1,
 "stages": [
  {"name": "s0", "fwd_time": 1, "bwd_time": 1, "out_bytes": 2, "saved_bytes": 4},
  {"name": "s1", "fwd_time": 5, "bwd_time": 2, "out_bytes": 2, "saved_bytes": 9,
   "variants": [{"name": "lean", "saved_bytes": 3, "bwd_time": 6, "bwd_tmp_bytes": 1}]},
  {"name": "s2", "fwd_time": 1, "bwd_time": 1, "out_bytes": 1, "saved_bytes": 2}],
 "loss": {"bwd_time": 0}}
JSON
# pyj FILE EXPR: EXPR over the JSON document d of FILE.
pyj() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
run plan var-chain.json --budget 1G -o var-all.json
# At 16 bytes (the baseline needs 19) dp keeps x̄_1 lean (13 bytes, time 15); block-only
# checkpointing needs a second forward of stage 1 (time 17).
big=17
run plan var-chain.json --budget $((big - 1)) --variants -o var-plan.json
check "variants: dp plans below the store-everything peak" 0
check_that "variants: the plan names the variant on F_all 1" test "$(pyj var-plan.json '[o.get("variant") for o in d["schedule"] if o["op"] == "F_all" and o["stage"] == 1]')" = "['lean']"
check_that "variants: the independent replay agrees with the plan's figures" replay var-plan.json var-chain.json
run plan var-chain.json --budget $((big - 1)) -o var-block.json
check "variants: without --variants dp plans with checkpoints only" 0
check_that "variants: without --variants no variant is named" test "$(pyj var-block.json '[o for o in d["schedule"] if "variant" in o]')" = "[]"
check_that "variants: the variant plan is faster than the block-only one here" python3 -c 'import json,sys; a,b=(json.load(open(f))["predicted"]["time"] for f in sys.argv[1:]); sys.exit(not a < b)' var-plan.json var-block.json
run run var-plan.json --verify --steps 1 --runs var.jsonl
check "variants: a chain plan with a variant runs and verifies" 0 "verify: passed"

# What ckplan writes it reads back: the chain file of a chain with variants plans the same.
run chain var-chain.json -o var-again.json
check "variants: ckplan chain writes a chain file with variants" 0
run plan var-again.json --budget $((big - 1)) --variants -o var-plan2.json
check_that "variants: the written chain file keeps its variants" test "$(pyj var-plan2.json 'd["schedule"]')" = "$(pyj var-plan.json 'd["schedule"]')"

# A plan naming a variant the stage lacks, or a variant on another operation, is refused.
python3 -c 'import json; d=json.load(open("var-plan.json")); [o.update(variant="fat") for o in d["schedule"] if o.get("variant")]; json.dump(d, open("var-bad.json", "w"))'
run run var-bad.json --verify --steps 1 --runs var.jsonl
check "variants: an unknown variant is an input error naming the operation" 2 "var-bad.json" ".variant: stage 1 has no variant \"fat\" (it has all, lean)"
python3 -c 'import json; d=json.load(open("var-all.json")); d["schedule"][-1]["variant"] = "lean"; json.dump(d, open("var-onb.json", "w"))'
run run var-onb.json --steps 1 --runs var.jsonl
check "variants: a variant on B is an input error" 2 "var-onb.json" ".variant: only an F_all runs a variant, this is B"
python3 -c 'import json; d=json.load(open("var-all.json")); [o.update(variant="all") for o in d["schedule"] if o["op"] == "F_all"]; json.dump(d, open("var-named-all.json", "w"))'
run run var-named-all.json --verify --steps 1 --runs var.jsonl
check "variants: \"variant\": \"all\" is the same as no variant" 0 "verify: passed"

# Bad variants in chain files, each refused with its JSON path.
stage='"name": "s0", "fwd_time": 1, "bwd_time": 1, "out_bytes": 2, "saved_bytes": 4'
wrap() { printf '{"format": "ckplan-chain/1", "input_bytes": 1, "stages": [{%s, "variants": %s}]}' "$stage" "$1"; }
bad_chain "variant named all" "$(wrap '[{"name": "all", "saved_bytes": 2, "bwd_time": 1}]')" "stages[0].variants[0].name: expected a name other than"
bad_chain "variant names repeated" "$(wrap '[{"name": "a", "saved_bytes": 2, "bwd_time": 1}, {"name": "a", "saved_bytes": 3, "bwd_time": 1}]')" "stages[0].variants[1].name"
bad_chain "variant keeping less than the output" "$(wrap '[{"name": "a", "saved_bytes": 1, "bwd_time": 1}]')" "stages[0].variants[0].saved_bytes: expected at least the stage's out_bytes (2), got 1"
bad_chain "variant with an unknown field" "$(wrap '[{"name": "a", "saved_bytes": 2, "bwd_time": 1, "fwd_time": 1}]')" "stages[0].variants[0]" "fwd_time"
bad_chain "variant without bwd_time" "$(wrap '[{"name": "a", "saved_bytes": 2}]')" "stages[0].variants[0]" "bwd_time"
bad_chain "variants not an array" "$(wrap '{}')" "stages[0].variants"
bad_chain "too many variants" "$(wrap "[$(for k in 1 2 3 4 5 6 7 8; do printf '{"name": "v%s", "saved_bytes": 2, "bwd_time": 1},' $k; done | sed 's/,$//')]")" "stages[0].variants: expected at most 7 variants"

# Models with attention: their chains list matmul, attn and none; dp at its smallest budget
# chooses variants, and the plan runs byte-exact with the baseline's gradients.
for model in gpt2-tiny llama-tiny gpt2-tiny-bf16; do
    run chain "$root/models/$model.json" -o "$model-chain.json"
    check_that "variants: $model's layers have matmul, attn and none" test "$(pyj "$model-chain.json" '[[v["name"] for v in s.get("variants", [])] for s in d["stages"] if s["name"].startswith("h.")][0]')" = "['matmul', 'attn', 'none']"
    run plan "$root/models/$model.json" --budget 1G -o "$model-big.json"
    static=$(json_get "$model-big.json" '["predicted"]["static_bytes"]')
    run plan "$root/models/$model.json" --budget $((static + 1)) --variants
    least=$(printf '%s' "$err" | sed -n 's/.*its smallest plan needs [^(]*(\([0-9]*\) bytes).*/\1/p')
    run plan "$root/models/$model.json" --budget "$least" --variants -o "$model-var.json"
    check "variants: $model plans at dp's smallest budget, the summary naming its variants" 0 "(F_all keeps less, B recomputes the rest):"
    run plan "$root/models/$model.json" --budget $((static + 1))
    least_block=$(printf '%s' "$err" | sed -n 's/.*its smallest plan needs [^(]*(\([0-9]*\) bytes).*/\1/p')
    # Exact figures (the compiled program's): on these models F_all's own transient is
    # what made "all" look larger than the variants, so block-only reaches as low.
    check_that "variants: $model block-only dp reaches no lower than variant dp ($least_block, $least)" test "$least_block" -ge "$least"
    run run "$model-var.json" --verify --steps 1 --runs var.jsonl
    check "variants: $model's variant plan verifies byte-exact" 0 "gradients identical bit for bit" "verify: passed"
    check_that "variants: $model's plan replays independently on its chain file, within its bound" replay --bound "$model-var.json" "$model-chain.json"
done
run emit hf gpt2-tiny-var.json -o emitted.py
check "variants: emit refuses a plan with variants, naming the operation" 2 "gpt2-tiny-var.json: schedule[" "variant: emit writes checkpointing of whole layers"
run emit torch "$root/models/gpt2-tiny.json" --plan gpt2-tiny-var.json -o emitted.py
check "variants: emit torch refuses a plan with variants too" 2 "gpt2-tiny-var.json: schedule[" "variant: emit writes checkpointing of whole layers"

# Variants with the plain loss and --slots exact: a heavy loss that only fits computed from
# the plain x_L, with the last stage's F_all after it and earlier stages' F_all lean. Without
# --variants no schedule fits in 32 bytes; with them dp plans the loss from the plain x_L and
# runs variants in the F_all after it, and the plan replays and verifies.
cat > var-loss.json <<'JSON'
{"format": "ckplan-chain/1", "name": "var-loss", "input_bytes": 2,
 "stages": [
  {"name": "s0", "fwd_time": 4, "bwd_time": 1, "out_bytes": 4, "saved_bytes": 12,
   "variants": [{"name": "lean", "saved_bytes": 4, "bwd_time": 5, "bwd_tmp_bytes": 2}]},
  {"name": "s1", "fwd_time": 3, "bwd_time": 4, "out_bytes": 4, "saved_bytes": 9,
   "variants": [{"name": "lean", "saved_bytes": 4, "bwd_time": 7, "bwd_tmp_bytes": 0}]},
  {"name": "s2", "fwd_time": 3, "bwd_time": 2, "out_bytes": 5, "saved_bytes": 8},
  {"name": "s3", "fwd_time": 3, "bwd_time": 2, "out_bytes": 5, "saved_bytes": 13,
   "variants": [{"name": "lean", "saved_bytes": 5, "bwd_time": 5, "bwd_tmp_bytes": 2}]}],
 "loss": {"bwd_time": 1, "bwd_tmp_bytes": 20}}
JSON
run plan var-loss.json --budget 32 --slots exact
check "variants: without --variants the heavy loss does not fit in 32 bytes" 3 "too small for planner dp"
run plan var-loss.json --budget 32 --slots exact --variants -o var-loss-plan.json
check "variants: --variants --slots exact plans the heavy loss in 32 bytes" 0
check_that "variants: the loss reads the plain x_L and F_all after it run variants" python3 -c '
import json, sys
s = json.load(open("var-loss-plan.json"))["schedule"]
k = [a["op"] for a in s].index("loss")
sys.exit(not (s[k - 1]["op"] == "F_none" and any(a.get("variant") == "lean" for a in s[k:] if a["op"] == "F_all")))'
check_that "variants: the plain-loss plan with variants replays independently" replay var-loss-plan.json var-loss.json
run run var-loss-plan.json --verify --steps 1 --runs var.jsonl
check "variants: the plain-loss plan with variants verifies" 0 "verify: passed"
run plan "$root/models/gpt2-tiny.json" --granularity node --variants --budget 1G -o never.json
check "variants: --variants does not apply to node granularity" 2 "--variants does not apply to --granularity node"
