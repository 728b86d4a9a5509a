# Training recipes and optimizers from the command line: the static memory by part in the
# plan and the summary against hand counts, the parameter count by part, the options
# recorded in the plan and used again by run, which optimizers run executes, and the
# plan's model.parameters and predicted.static checked by run.

gpt2s="$root/models/gpt2-small.json"
# GPT-2 small, docs/model-format.md section 5: V*C + T*C + L*(12C^2 + 13C) + 2C
rc_params=$(( 50257 * 768 + 1024 * 768 + 12 * (12 * 768 * 768 + 13 * 768) + 2 * 768 ))

# recipe_bytes RECIPE PARAM GRAD MASTER STATE: gpt2-small with Adam under RECIPE keeps, per
# parameter, PARAM + GRAD + MASTER + 2 * STATE bytes (hand counts), in named parts.
recipe_bytes() {
    local recipe=$1 param=$2 grad=$3 master=$4 state=$5
    run plan "$gpt2s" --recipe "$recipe" --optimizer adam --budget 1000T -o "rc-$recipe.json"
    check "recipe $recipe: plans, with the parts of the static memory shown" 0 \
        "training: recipe $recipe, optimizer adam" "    master    " "    inputs    "
    check_that "recipe $recipe: model.parameters and predicted.static by hand" \
        python3 - "rc-$recipe.json" "$rc_params" "$param" "$grad" "$master" "$state" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
n, param, grad, master, state = map(int, sys.argv[2:])
s, pred = d["predicted"]["static"], d["predicted"]
assert d["model"]["parameters"] == n, d["model"]
assert d["model"]["options"]["recipe"] == sys.argv[1][3:-5], d["model"]
assert s["parameters"] == n * param and s["gradients"] == n * grad, s
assert s["master_weights"] == n * master and s["optimizer_state"] == n * 2 * state, s
assert sum(s.values()) == pred["static_bytes"], (s, pred)
PY
}
recipe_bytes fp32 4 4 0 4          # 16 bytes a parameter
recipe_bytes amp-bf16 4 4 0 4      # 16, the activations bf16
recipe_bytes bf16-master 2 2 4 4   # 16, as Megatron and DeepSpeed
recipe_bytes bf16 2 2 0 2          # 8
check_that "amp-bf16 saves about half the activations of fp32 (masks and statistics stay)" python3 -c '
import json
f, a = (json.load(open("rc-%s.json" % r))["predicted"] for r in ("fp32", "amp-bf16"))
fa, aa = f["baseline_activation_peak_bytes"], a["baseline_activation_peak_bytes"]
assert 0.5 * fa < aa < 0.6 * fa, (f, a)'

run plan "$gpt2s" --budget 1000T -o rc-gpt2.json
check "the summary gives the parameter count by part" 0 \
    "parameters: 124,439,808 = embeddings 39,383,808 + 12 layers x 7,087,872 + head 1,536"
check_that "the count is the formula's" test "$rc_params" = 124439808

# Adafactor and 8-bit Adam are planned by the shapes of the parameters; run refuses them.
for opt in adafactor adam8bit; do
    run plan "$root/models/gpt2-tiny.json" --optimizer "$opt" --budget 1000T -o "rc-$opt.json"
    check "$opt: planned" 0 "optimizer $opt" "$opt state"
    run run "rc-$opt.json" --steps 1 --runs rc-refused.jsonl
    check "$opt: run refuses it by name" 2 "optimizer $opt is planned but not executed"
done
check_that "adafactor and adam8bit keep less state than adam's 8 bytes a parameter" python3 -c '
import json
for o in ("adafactor", "adam8bit"):
    d = json.load(open("rc-%s.json" % o))
    assert d["predicted"]["static"]["optimizer_state"] < 8 * d["model"]["parameters"], d["predicted"]'

# AdamW runs, with its decoupled weight decay: after the warm-up step's update, its losses
# are not Adam's.
for opt in adam adamw; do
    run plan "$root/models/gpt2-tiny.json" --recipe fp32 --optimizer "$opt" --budget 22M -o "rc-run-$opt.json"
    check "$opt with recipe fp32: planned below the baseline" 0
    run run "rc-run-$opt.json" --verify --steps 2 --runs "rc-run-$opt.jsonl" --quiet
    check "$opt: run reloads the recipe and optimizer, and verifies" 0
done
check_that "adamw's losses differ from adam's; static memory as predicted" python3 -c '
import json
a, w = (json.loads(open("rc-run-%s.jsonl" % o).readline()) for o in ("adam", "adamw"))
for k in range(2):
    assert a["plan_run"]["losses"][k] != w["plan_run"]["losses"][k], (a["plan_run"], w["plan_run"])
for r in (a, w):
    assert r["plan_run"]["static_bytes"] == r["predicted"]["static_bytes"], r'

# run checks model.parameters against the model; without --verify, it warns and runs.
python3 -c 'import json,sys; d=json.load(open("rc-run-adamw.json")); d["model"]["parameters"] += 1; json.dump(d, open("rc-edited.json", "w"))'
run run rc-edited.json --steps 1 --runs rc-edited.jsonl --quiet
check "an edited model.parameters is warned about, with both counts" 0 \
    "model.parameters: the plan file says 867073, the model has 867072"

# Names that are not recipes or optimizers, from the command line.
run plan "$gpt2s" --recipe fp16 --budget 1G -o rc-bad.json
check "an unknown --recipe is refused, listing the recipes" 2 \
    "gpt2-small.json: --recipe: expected one of fp32, amp-bf16, bf16-master, bf16, got \"fp16\""
run plan "$gpt2s" --optimizer lion --budget 1G -o rc-bad.json
check "an unknown --optimizer is refused, listing the optimizers" 2 \
    "--optimizer: expected one of none, sgd, momentum, adam, adamw, adafactor, adam8bit, got \"lion\""
check_that "no plan is written for them" test ! -e rc-bad.json

# A chain file has no parameters: neither field is written.
run plan "$data/chain10.json" --budget 30 -o rc-chain.json
check "a chain file plans" 0 "a chain file has none"
check_that "a chain file's plan has no model.parameters nor predicted.static" python3 -c '
import json; d = json.load(open("rc-chain.json"))
assert "parameters" not in d["model"] and "static" not in d["predicted"], d'
