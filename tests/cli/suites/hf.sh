# Hugging Face configs (planner/hf, docs/model-format.md section 8): every tiny config of
# models/hf plans under every planner (sdpa and eager, with and without --lora), its f32
# import runs with --verify (measured peaks equal to the predicted ones, to the byte);
# `ckplan import` writes a file that plans as the config does; bad configs are refused.

. "$here/verify_planners.sh"

# hf_f32 CONFIG OUT ARGS...: CONFIG imported with ARGS, its dtypes made f32 (without master
# weights), so that the f32 executor runs it.
hf_f32() {
    local config=$1 out=$2; shift 2
    "$bin" import "$config" "$@" -o "$out.bf16.json" &&
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["dtype"]="f32"; d["training"]={"optimizer":"adam","param_dtype":"f32"}; json.dump(d, open(sys.argv[2], "w"))' "$out.bf16.json" "$out"
}

# hf_plans NAME MODEL ARGS...: every planner plans MODEL with ARGS half-way between dp's
# smallest plan and the baseline; at least three of them must. (The bf16 configs: the
# executor runs f32 models, so their f32 imports are the ones run, by verify_planners.)
hf_plans() {
    local name=$1 model=$2; shift 2
    run plan "$model" "$@" --budget 1000T --json -o "hf-$name-big.json"
    check "hf $name: plans" 0
    [ "$rc" = 0 ] || return
    local base min planned=0
    base=$(json_get "hf-$name-big.json" '["predicted"]["baseline_peak_bytes"]')
    run plan "$model" "$@" --budget "$(json_get "hf-$name-big.json" '["predicted"]["static_bytes"]')"
    min=$(printf '%s\n' "$err" | sed -n 's/.*its smallest plan needs [^(]*(\([0-9]*\) bytes).*/\1/p')
    for planner in $(registry_planners); do
        run plan "$model" "$@" --budget "$(( (min + base) / 2 ))" --planner "$planner" -o "hf-$name-$planner.json"
        [ "$rc" = 0 ] && planned=$((planned + 1))
    done
    check_that "hf $name: at least three planners plan at the middle budget" test "$planned" -ge 3
}

for config in "$root"/models/hf/*.json; do
    family=$(basename "$config" -tiny.json)
    hf_plans "$family" "$config"
    hf_plans "$family-eager" "$config" --attention eager
    hf_plans "$family-lora" "$config" --lora 4
    hf_f32 "$config" "hf-$family-f32.json" --seq 16 &&
        verify_planners "hf $family-f32" "hf-$family-f32.json" --may-store-all
    hf_f32 "$config" "hf-$family-f32-lora.json" --seq 16 --lora 4 --attention eager &&
        verify_planners "hf $family-f32-lora-eager" "hf-$family-f32-lora.json" --may-store-all
done

# import: the file it writes plans to the same figures and schedule as the config with the
# same options (its path and sha256 aside).
llama=$root/tests/data/hf/llama-3-8b
run import "$llama" --seq 512 --batch 2 --set L=3 --lora 8 --attention eager -o hf-imported.json
check "hf: import writes the model" 0
run plan hf-imported.json --budget 40G --json -o hf-plan-imported.json
check "hf: the imported model plans" 0
run plan "$llama" --seq 512 --batch 2 --set L=3 --lora 8 --attention eager --budget 40G --json -o hf-plan-config.json
check "hf: the config plans with the same options" 0
check_that "hf: planning the imported file gives the config's figures and schedule" python3 -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for k in ("predicted", "stages", "schedule", "budget_bytes"):
    assert a[k] == b[k], k' hf-plan-imported.json hf-plan-config.json
# OPT's MLP runs on the hidden states reshaped to rows, as GPT-2's Conv1D views them: their
# linears and adapters say so (flat), which makes their input gradients tensors of their
# own; Llama's MLP does not.
run import "$root/models/hf/opt-tiny.json" --lora 2 -o hf-opt-imported.json
check "hf: import writes OPT" 0
run import "$root/models/hf/gpt2-tiny.json" --lora 2 -o hf-gpt2-imported.json
check "hf: import writes GPT-2" 0
check_that "hf: OPT's and GPT-2's MLP linears and adapters take rows, their attention's and Llama's do not" python3 -c '
import json, sys
def flat(path):
    d = json.load(open(path))
    return {n["name"]: n.get("flat", False) for b in d.get("blocks", {}).values() for n in b["nodes"]}
opt, gpt2, llama = flat("hf-opt-imported.json"), flat("hf-gpt2-imported.json"), flat("hf-imported.json")
want = {"fc1", "fc1_lora", "fc2", "fc2_lora"}
assert {k for k, v in opt.items() if v} == want, opt
assert {k for k, v in gpt2.items() if v} == want, gpt2
assert not any(llama.values()), llama'
# --inference holds what transformers' forward makes once for its layers: the eager mask,
# the position ids and the rotary tables live through every layer's forward, so at the peak
# inside the first layer the forward holds exactly their bytes more than the same model
# with them switched off on its nodes (an attribute on a node wins over the profile).
run import "$root/models/hf/llama-tiny.json" --attention eager --seq 256 --recipe fp32 -o hf-steps.json
check "hf: import llama-tiny for the step tensors" 0
check_that "hf: the nodes' step tensors can be switched off in the file" python3 -c '
import json
d = json.load(open("hf-steps.json"))
for n in d["blocks"]["layer"]["nodes"]:
    if n["op"] == "attention":
        n["step_args"] = False
    if n["op"] == "rope":
        n["step_tables"] = False
json.dump(d, open("hf-nosteps.json", "w"))'
"$bin" plan hf-steps.json --inference --budget 1G --json > hf-steps.inf.json 2>/dev/null
"$bin" plan hf-nosteps.json --inference --budget 1G --json > hf-nosteps.inf.json 2>/dev/null
check_that "hf: the inference forward peak holds the mask, position ids and tables, to the byte" python3 -c '
import json
a, b = (json.load(open(p)) for p in ("hf-steps.inf.json", "hf-nosteps.inf.json"))
dims = json.load(open("hf-steps.json"))["dims"]
B, T, D = dims["B"], dims["T"], dims["C"] // dims["H"]
want = B * T * T * 4 + T * 8 + 2 * T * D * 4  # f32 (fp32): mask [B, 1, T, T], int64 ids, cos and sin
assert a["forward_peak_stage"] == b["forward_peak_stage"] == "h.0", (a["forward_peak_stage"], b["forward_peak_stage"])
assert a["forward_peak_bytes"] - b["forward_peak_bytes"] == want, (a["forward_peak_bytes"], b["forward_peak_bytes"], want)'
# Under LoRA the embedding's output is taken to require grad (enable_input_require_grads(),
# which gradient_checkpointing_enable() installs): plan says so, in text and JSON, and only
# under hf's profile and a frozen table; a file with the node's leaf off plans below.
"$bin" plan "$root/models/hf/gpt2-tiny.json" --lora 8 --budget 1T --json > hf-leaf.plan.json 2>/dev/null
"$bin" plan "$root/models/hf/gpt2-tiny.json" --lora 8 --budget 1T > hf-leaf.txt 2>/dev/null
check_that "hf: plan --lora's summary names the hook it assumes" grep -q "enable_input_require_grads()" hf-leaf.txt
"$bin" plan "$root/models/hf/gpt2-tiny.json" --lora 8 --impl fused --budget 1T --json > hf-leaf-fused.json 2>/dev/null
"$bin" plan "$root/models/hf/gpt2-tiny.json" --budget 1T --json > hf-leaf-none.json 2>/dev/null
check_that "hf: assumed.input_require_grads: true under hf, false under fused, absent when the table trains" python3 -c '
import json
a, f, n = (json.load(open(p))["predicted"]["assumed"] for p in ("hf-leaf.plan.json", "hf-leaf-fused.json", "hf-leaf-none.json"))
assert a["input_require_grads"] is True and f["input_require_grads"] is False, (a, f)
assert "input_require_grads" not in n, n'
"$bin" plan "$root/models/hf/gpt2-tiny.json" --lora 8 --impl fused --budget 1T > hf-leaf-fused.txt 2>/dev/null
check_that "hf: without the hook, plan says nothing of it" test "$(grep -c enable_input_require_grads hf-leaf-fused.txt)" = 0
# Phi3Model has no embedding dropout, GPT-2 has one: embd_pdrop is read for GPT-2 alone.
python3 -c '
import json, sys
for name in ("phi3", "gpt2"):
    d = json.load(open(sys.argv[1] + "/models/hf/%s-tiny.json" % name))
    d["embd_pdrop"] = 0.5
    json.dump(d, open("hf-%s-embd.json" % name, "w"))' "$root"
run import hf-phi3-embd.json -o hf-phi3-embd.model.json
check "hf: import phi3 with embd_pdrop" 0
run import hf-gpt2-embd.json -o hf-gpt2-embd.model.json
check "hf: import gpt2 with embd_pdrop" 0
check_that "hf: embd_pdrop adds an embedding dropout to GPT-2, none to Phi-3" python3 -c '
import json
drops = {name: [n.get("p") for n in json.load(open("hf-%s-embd.model.json" % name))["nodes"] if n["name"] == "drop_embed"]
         for name in ("phi3", "gpt2")}
assert drops == {"phi3": [], "gpt2": [0.5]}, drops'
run import "$llama" --set NOPE=3 -o hf-never.json
check "hf: import refuses a set naming no dim" 2 "config.json" "NOPE"
check_that "hf: a refused import writes nothing" test ! -e hf-never.json
run import "$root/models/llama-tiny.json" -o hf-never.json
check "hf: import takes Hugging Face configs only" 2 "llama-tiny.json: expected a Hugging Face config.json"
run import --help
check "hf: import --help lists the families" 0 "gpt2, opt, llama, mistral, mixtral, qwen2, qwen3, phi3, gemma, gemma2" "--lora R"

# Directories, sizes from the command line, kernels.
run plan "$llama" --seq 8192 --batch 1 --budget 80G
# 15.0 GiB of bf16 parameters, 59.8 GiB of f32 moments, 29.9 GiB of f32 master weights; the
# 15.0 GiB of gradients are made by the backward (PyTorch 2), counted with the activations
check "hf: Llama-3-8B full fine-tuning does not fit 80G: its static memory says why" 3 "static memory of 105 GiB" \
    "gradients 0 B (made in the backward: 15.0 GiB, counted with the activations)"
run plan "$llama" --seq 8192 --batch 1 --lora 16 --budget 80G -o hf-l3-lora.json
# rank R=16, C=4096, F=14336, q/k/v widths 4096/1024/1024: packed qkv 3R*C + 6144*R = 294,912,
# o R*C + C*R = 131,072, gate and up R*C + F*R and down R*F + C*R = 294,912 each: 1,310,720 a
# layer, 41,943,040 in 32; their gradients are bf16, 2 bytes each
check "hf: Llama-3-8B with LoRA at 8K fits 80G" 0 "; 41,943,040 trainable, the rest frozen"
check_that "hf: LoRA's gradients are the adapters' only" \
    test "$(json_get hf-l3-lora.json '["predicted"]["assumed"]["gradients_made_bytes"]')" = $((41943040 * 2))
# PEFT's adapters on 16-bit activations (lora.upcast, docs/profiles.md): each adapted
# projection keeps its own copy of its input, f32 beside bf16 weights, autocast's bf16 under
# f32 ones, none where f32 masters mean the framework casts the adapters with the rest.
lora_copies() { # RECIPE TEXT JSON_VALUE
    run plan "$llama" --seq 8192 --batch 1 --lora 16 --recipe "$1" --budget 1000G -o "hf-l3-lora-$1.json"
    check "hf: LoRA under --recipe $1 says what the adapters keep" 0 "$2"
    check_that "hf: LoRA under --recipe $1: predicted.assumed.lora_input_copies is $3" \
        test "$(json_get "hf-l3-lora-$1.json" '["predicted"]["assumed"]["lora_input_copies"]')" = "$3"
}
lora_copies bf16 "PEFT's LoRA adapters in f32 (autocast_adapter_dtype): each adapted projection keeps its own f32 copy of its input" f32
lora_copies amp-bf16 "keeps its own bf16 copy of its input (autocast's, for lora_A)" bf16
lora_copies bf16-master "LoRA adapters cast to bf16 with the rest (DeepSpeed's and FSDP's mixed precision)" none
check_that "hf: the f32 copies of PEFT alone hold more than the framework's cast adapters" python3 -c '
import json, sys
f32, cast = (json.load(open(p))["predicted"]["baseline_activation_peak_bytes"] for p in sys.argv[1:])
# 32 layers of f32 copies, q, k, v, o, gate and up of [8192, 4096] and down of [8192, 14336],
# kept instead of the bf16 inputs the cast adapters keep (norm1, attention, norm2, act)
assert f32 - cast >= 32 * (8192 * 4096 * (6 * 4 - 3 * 2) + 8192 * 14336 * (4 - 2)), (f32, cast)' \
    hf-l3-lora-bf16.json hf-l3-lora-bf16-master.json
run plan "$llama" --seq 8192 --batch 1 --lora 16 --recipe bf16 --impl fused --budget 1000G -o hf-l3-lora-fused.json
check_that "hf: --impl fused keeps no copies and says nothing of them" \
    python3 -c 'import json,sys; assert "lora_input_copies" not in json.load(open(sys.argv[1]))["predicted"]["assumed"]' hf-l3-lora-fused.json

run plan "$root/models/hf/gpt2-tiny.json" --seq 65 --budget 1G
check "hf: GPT-2's learned positions bound the sequence" 2 "gpt2-tiny.json" "positions"
run plan "$root/models/hf/llama-tiny.json" --budget 1000T --json -o hf-sdpa.json
run plan "$root/models/hf/llama-tiny.json" --attention eager --budget 1000T --json -o hf-eager.json
check_that "hf: eager attention keeps more than sdpa" python3 -c '
import json, sys
s, e = (json.load(open(p))["predicted"]["baseline_activation_peak_bytes"] for p in sys.argv[1:])
assert e > s, (e, s)' hf-sdpa.json hf-eager.json

# Bad configs: the file and the key.
printf '{"model_type": "bert", "hidden_size": 8}' > hf-bert.json
run plan hf-bert.json --budget 1G
check "hf: an unknown model_type lists the families" 2 "hf-bert.json: model_type: expected one of gpt2, opt, llama, mistral, mixtral, qwen2, qwen3, phi3, gemma, gemma2, got \"bert\""
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); del d["intermediate_size"]; json.dump(d, open(sys.argv[2], "w"))' "$root/models/hf/llama-tiny.json" hf-no-ffn.json
run plan hf-no-ffn.json --budget 1G
check "hf: a missing key is named" 2 "hf-no-ffn.json: intermediate_size: missing"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["num_key_value_heads"] = 3; json.dump(d, open(sys.argv[2], "w"))' "$root/models/hf/llama-tiny.json" hf-kv3.json
run plan hf-kv3.json --budget 1G
check "hf: heads that the key/value heads do not divide are refused" 2 "hf-kv3.json" "kv_heads"
mkdir -p hf-empty-dir
run plan hf-empty-dir --budget 1G
check "hf: a directory without config.json names the file" 2 "hf-empty-dir/config.json"

# The norms' epsilon comes from the config (rms_norm_eps, layer_norm_epsilon), else the
# family's default; Qwen3's q/k norms take the same one.
run import "$root/tests/data/hf/llama-3-8b" -o hf-eps-llama.json
run import "$root/tests/data/hf/qwen3-8b.json" -o hf-eps-qwen3.json
run import "$root/tests/data/hf/gpt2-medium.json" -o hf-eps-gpt2.json
check_that "hf: every norm takes the config's epsilon" python3 - hf-eps-llama.json hf-eps-qwen3.json \
    hf-eps-gpt2.json "$root/tests/data/hf" <<'PY'
import json, sys, os
def norms(m):
    for n in m["nodes"] + [n for b in m.get("blocks", {}).values() for n in b["nodes"]]:
        if n.get("op") in ("layernorm", "rmsnorm", "qknorm"):
            yield n
cfgs = [os.path.join(sys.argv[4], "llama-3-8b", "config.json"),
        os.path.join(sys.argv[4], "qwen3-8b.json"), os.path.join(sys.argv[4], "gpt2-medium.json")]
for model, cfg, key in zip(sys.argv[1:4], cfgs, ["rms_norm_eps", "rms_norm_eps", "layer_norm_epsilon"]):
    want = json.load(open(cfg))[key]
    found = list(norms(json.load(open(model))))
    assert found and all(n["eps"] == want for n in found), (model, want, found[:2])
ops = {n["op"] for n in norms(json.load(open(sys.argv[2])))}
assert "qknorm" in ops, ops
PY

# Each family's defaults are its config class's (issue 24): every tiny config, less each key
# in turn, against transformers' own config class and model on the meta device
# (tests/cli/hf_defaults.py), in the referee's interpreter; skipped without transformers.
mkdir -p "$work/hf-defaults"
"${CKPLAN_PYTHON:-python3}" "$here/hf_defaults.py" "$bin" "$root/models/hf" "$work/hf-defaults" \
    > "$work/hf-defaults.out" 2>&1
hd=$?
if [ "$hd" = 77 ]; then
    echo "hf: defaults against transformers skipped: $(cat "$work/hf-defaults.out")"
else
    rc=$hd; out=$(cat "$work/hf-defaults.out"); err=""
    check "hf: a key left out takes its family's config class's default, as transformers builds it" 0 \
        "0 differences"
fi
