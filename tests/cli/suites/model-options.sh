# Model options from the command line (--set, --seq, --batch, --optimizer) and size
# expressions. The oracle for an option is the same model with the file edited: the chain
# ckplan derives must be the same, byte for byte.

# edited_copy NAME OUT PYTHON: writes models/gpt2-tiny.json changed by PYTHON (acting on m).
edited_copy() {
    python3 - "$root/models/gpt2-tiny.json" "$2" "$3" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(m, open(sys.argv[2], "w"), indent=1)
PY
}

tiny="$root/models/gpt2-tiny.json"
edited_copy tiny opts-t32.json 'm["dims"]["T"] = 32'
edited_copy tiny opts-b2l2.json 'm["dims"]["B"] = 2; m["dims"]["L"] = 2'
edited_copy tiny opts-sgd.json 'm["training"]["optimizer"] = "sgd"'
for case in "--seq 32|opts-t32.json" "--set T=32|opts-t32.json" "--batch 2 --set L=2|opts-b2l2.json" \
            "--set L=2 --set B=3 --set B=2|opts-b2l2.json"; do
    flags=${case%|*} file=${case#*|}
    # shellcheck disable=SC2086
    run chain "$tiny" $flags -o opts-chain-flag.json
    check "chain $flags" 0
    run chain "$file" -o opts-chain-file.json
    check_that "chain $flags equals the chain of the edited file" \
        python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); assert a==b' \
        opts-chain-flag.json opts-chain-file.json
done

# the plan records the options, run loads the model with them, and verify passes
run plan "$tiny" --seq 32 --set L=2 --optimizer sgd --budget 1000T -o opts-plan.json
check "plan with --seq, --set and --optimizer" 0
check_that "the plan records model.options" python3 - opts-plan.json <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))["model"]["options"]
assert o == {"set": {"T": 32, "L": 2}, "optimizer": "sgd"}, o
PY
run plan opts-sgd.json --set T=32 --set L=2 --budget 1000T -o opts-plan-file.json
check_that "the static memory equals the edited file's" python3 - opts-plan.json opts-plan-file.json <<'PY'
import json, sys
a, b = (json.load(open(f))["predicted"] for f in sys.argv[1:])
assert a == b, (a, b)
PY
run run opts-plan.json --verify --steps 1 --quiet
check "run --verify loads the model with the plan's options" 0
python3 - opts-plan.json opts-plan-l3.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); p["model"]["options"]["set"]["L"] = 3
json.dump(p, open(sys.argv[2], "w"))
PY
run run opts-plan-l3.json --verify --steps 1
check "a plan whose options make another model is refused" 2 "stages: the plan has"
python3 - opts-plan.json opts-plan-bad.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); p["model"]["options"]["set"]["T"] = 0
json.dump(p, open(sys.argv[2], "w"))
PY
run run opts-plan-bad.json
check "a plan's zero dim is refused with its JSON path" 2 "opts-plan-bad.json: model.options.set.T: expected a positive size"

# errors
run plan "$tiny" --set Q=4 --budget 1G
check "--set of an unknown dim lists the model's dims" 2 "--set Q: the model has no dim of that name (its dims: B, T, C, H, V, L)"
run plan "$tiny" --set T=0 --budget 1G
check "--set to zero" 2 "--set T: expected a whole number from 1 to"
run plan "$tiny" --set T --budget 1G
check "--set without a value" 2 "--set: expected NAME=VALUE"
run plan "$tiny" --seq 2x --budget 1G
check "--seq that is not a number" 2 "--seq: expected a whole number"
run plan "$tiny" --optimizer lion --budget 1G
check "an unknown --optimizer" 2 "--optimizer: expected"
run plan "$data/chain10.json" --seq 4 --budget 1G
check "model options on a chain file" 2 "apply to model files; a chain file's stages are fixed"

# costs measured with options are applied only with the same options, in any order
run profile "$tiny" --seq 32 --batch 2 --steps 1 -o opts-costs.json
check "profile with --seq and --batch" 0
run plan "$tiny" --costs opts-costs.json --budget 1000T -o opts-costs-plan.json
check "costs measured with other options are refused" 2 "model.options: measured with the model options 'B=2 T=32', planning with '(none)'"
run plan "$tiny" --batch 2 --seq 32 --costs opts-costs.json --budget 1000T -o opts-costs-plan.json
check "the same options in another order are the same model" 0

# size expressions: a model written with sums and quotients derives the chain of the one
# written with the numbers worked out
python3 - "$root/models/llama-tiny.json" opts-llama-expr.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
d = m["dims"]
assert d["QKV_HEADS"] == d["H"] + 2 * d["KV"] and d["D"] == d["C"] // d["H"]
d["D"] = "C/H"; d["QKV_HEADS"] = "H + 2*KV"
m["blocks"]["layer"]["nodes"][1]["out"] = "(H+2*KV)*D"
json.dump(m, open(sys.argv[2], "w"))
PY
run chain "$root/models/llama-tiny.json" -o opts-llama-chain.json
run chain opts-llama-expr.json -o opts-llama-expr-chain.json
check_that "expressions derive the same chain as their values" \
    python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); assert a==b' \
    opts-llama-chain.json opts-llama-expr-chain.json
run chain opts-llama-expr.json --set H=6 -o opts-x.json
check "an inexact division names the dim and the numbers" 2 "dims.D: a division leaves a remainder (128 / 6)"
