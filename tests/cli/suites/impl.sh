# Implementation profiles (planner/impl, docs/profiles.md): --impl hf|fused|hf-cpu and
# training.impl; the profiles listed by --help; a bad name exits 2 naming the option or
# the field; the plan records --impl and run and emit read it back; import writes
# training.impl; hf's written-out ops run byte-exact under every planner (run --verify).
. "$here/verify_planners.sh"

llama_hf=$root/models/hf/llama-tiny.json
run plan --help
check "impl: plan --help lists the profiles" 0 "--impl NAME" "hf     transformers 5's modeling code" "fused  liger-kernel"
run chain "$llama_hf" --impl magic -o impl-never.json
check "impl: an unknown profile exits 2 naming the option and the profiles" 2 "--impl: expected one of hf, fused, hf-cpu, got 'magic'"
for cmd in "plan --budget 1G" "chain" "sweep --budgets 1G" "import" "emit torch"; do
    # shellcheck disable=SC2086 # the command and its options are words
    run $cmd "$llama_hf" --impl nope -o impl-never-2.json
    check "impl: ${cmd%% *} takes --impl and refuses a bad one" 2 "--impl: expected one of hf, fused"
done
check_that "impl: refused commands write nothing" test ! -e impl-never.json -a ! -e impl-never-2.json

# A Hugging Face config is hf unless told; the summary says which; fused keeps less.
run plan "$llama_hf" --recipe fp32 --budget 1000T -o impl-hf.json
check "impl: a Hugging Face config plans as hf" 0 "implementation: hf (transformers 5's modeling code, as PyTorch 2's autograd saves it)" \
    "assumed: gradients made by the backward, freed by zero_grad() (PyTorch 2's default)"
run plan "$llama_hf" --recipe fp32 --impl fused --budget 1000T -o impl-fused.json
check "impl: --impl fused" 0 "implementation: fused (liger-kernel, Megatron or llm.c's fused kernels)"
check_that "impl: hf keeps more than fused" python3 -c '
import json, sys
hf, fused = (json.load(open(p))["predicted"]["baseline_activation_peak_bytes"] for p in sys.argv[1:])
assert hf > fused, (hf, fused)' impl-hf.json impl-fused.json
check_that "impl: the plan records --impl in model.options" test "$(json_get impl-fused.json '["model"]["options"]["impl"]')" = fused
run run impl-fused.json --steps 1 --runs impl.jsonl --quiet
check "impl: run loads the model with the plan's profile" 0
check_that "impl: run predicts the plan's figures (fused, not hf)" python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
p = json.load(open(sys.argv[2]))["predicted"]
assert r["predicted"]["activation_peak_bytes"] == p["activation_peak_bytes"]' impl.jsonl impl-fused.json

# import writes training.impl; the file plans as the config does; --impl changes it.
run import "$llama_hf" --recipe fp32 -o impl-imported.json
check "impl: import writes the model" 0
check_that "impl: import writes training.impl hf" test "$(json_get impl-imported.json '["training"]["impl"]')" = hf
run import "$llama_hf" --recipe fp32 --impl fused -o impl-imported-fused.json
check_that "impl: import --impl fused writes training.impl fused" test "$(json_get impl-imported-fused.json '["training"]["impl"]')" = fused
run plan impl-imported.json --budget 1000T -o impl-hf-file.json
check "impl: the imported file plans" 0 "implementation: hf"
run plan impl-imported.json --impl fused --budget 1000T -o impl-fused-file.json
check "impl: --impl replaces the file's training.impl" 0 "implementation: fused"
check_that "impl: the imported files plan to the config's figures under either profile" python3 -c '
import json, sys
a, b, c, d = (json.load(open(p))["predicted"] for p in sys.argv[1:])
assert a == b and c == d' impl-hf.json impl-hf-file.json impl-fused.json impl-fused-file.json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["training"]["impl"]="hf2"; json.dump(d, open(sys.argv[2], "w"))' impl-imported.json impl-bad.json
run plan impl-bad.json --budget 1000T -o impl-never-3.json
check "impl: a bad training.impl exits 2 naming the file and the field" 2 "impl-bad.json: training.impl: expected one of hf, fused, hf-cpu, got \"hf2\""

# A model file without a profile keeps its figures; --impl hf fills what it leaves unset.
run plan "$root/models/llama-tiny.json" --budget 1000T --json -o impl-file.json
check_that "impl: a model file without a profile prints none" bash -c '! "$1" plan "$2" --budget 1000T -o impl-file2.json | grep -q implementation:' _ "$bin" "$root/models/llama-tiny.json"
run plan "$root/models/llama-tiny.json" --impl hf --budget 1000T -o impl-file-hf.json
check "impl: --impl hf on a model file" 0 "implementation: hf"
check_that "impl: hf on llama-tiny.json keeps more" python3 -c '
import json, sys
a, b = (json.load(open(p))["predicted"]["baseline_activation_peak_bytes"] for p in sys.argv[1:])
assert b > a, (a, b)' impl-file.json impl-file-hf.json

# emit torch writes the written-out ops for hf, the fused Functions for fused.
run emit torch "$llama_hf" --recipe fp32 --attention eager -o impl_hf.py
check "impl: emit torch under hf" 0
check_that "impl: the hf module writes its norms, gated unit and repeat_kv out" python3 -c '
import sys
t = open(sys.argv[1]).read()
assert "\"fused\": True" not in t and "\"expand_kv\": True" in t and "\"upcast\": True" in t' impl_hf.py
run emit torch "$llama_hf" --recipe fp32 --impl fused -o impl_fused.py
check_that "impl: the fused module runs the fused kernels" python3 -c '
import sys
t = open(sys.argv[1]).read()
assert "\"fused\": True" in t and "\"expand_kv\": True" not in t and "\"upcast\": True" not in t' impl_fused.py

# run --verify is byte-exact under both profiles, every planner, eager and sdpa, f32 and
# bf16 (the Hugging Face default recipe, 16-bit rmsnorm's f32 copy and the upcast loss).
for impl in hf fused; do
    verify_planners "impl-llama-$impl" "$llama_hf" --may-store-all --recipe fp32 --impl "$impl" --attention eager --seq 32 --batch 2
    verify_planners "impl-llama-$impl-bf16" "$llama_hf" --may-store-all --impl "$impl" --seq 32 --batch 2
    verify_planners "impl-gpt2-$impl" "$root/models/hf/gpt2-tiny.json" --may-store-all --recipe fp32 --impl "$impl" --seq 32 --batch 2
    verify_planners "impl-gemma-$impl" "$root/models/hf/gemma-tiny.json" --may-store-all --recipe fp32 --impl "$impl" --attention eager --seq 32 --batch 2
done
# Qwen3's q and k norms written out (hf); PyTorch's CPU dropout (hf-cpu): the masks in the
# activations' dtype, sdpa with dropout on its math path.
verify_planners "impl-qwen3-hf" "$root/models/hf/qwen3-tiny.json" --may-store-all --impl hf --seq 32 --batch 2
for attention in eager sdpa; do
    verify_planners "impl-gpt2-hf-cpu-$attention" "$root/models/hf/gpt2-tiny.json" --may-store-all --impl hf-cpu --attention "$attention" --seq 32 --batch 2
done
# Mixtral's grouped_mm experts (moe.grouped, both profiles) in 16 bits, the Hugging Face
# default recipe: the f32 routing weights and the int64 and int32 indices among bf16 rows.
verify_planners "impl-mixtral-hf-bf16" "$root/models/hf/mixtral-tiny.json" --may-store-all --impl hf --seq 32 --batch 2
# What sdpa keeps of transformers' tensors: Mistral's sliding-window mask (its window, 32,
# is reached at T = 32) and Phi-3's q and k apart from the projection v keeps.
for name in mistral phi3; do
    verify_planners "impl-$name-hf-sdpa" "$root/models/hf/$name-tiny.json" --may-store-all --impl hf --attention sdpa --seq 32 --batch 1
done
# CUDA's sdpa runs Llama's grouped kv heads in f32 on its math path (attention.gqa_math).
verify_planners "impl-llama-hf-sdpa-f32" "$llama_hf" --may-store-all --recipe fp32 --impl hf --attention sdpa --seq 32 --batch 2

# Under hf, f32 sdpa with grouped kv heads keeps what eager attention keeps, to the byte,
# while 16 bits (flash) and the CPU's fused kernel (hf-cpu) keep less.
for case in "hf eager fp32" "hf sdpa fp32" "hf-cpu sdpa fp32" "hf eager bf16" "hf sdpa bf16"; do
    read -r impl attention recipe <<< "$case"
    run plan "$llama_hf" --impl "$impl" --attention "$attention" --recipe "$recipe" --seq 32 --batch 2 --budget 1000T --json -o "impl-gqa-$impl-$attention-$recipe.json"
done
check_that "impl: CUDA's sdpa keeps eager's tensors for grouped heads in f32 only" python3 -c '
import json, sys
peak = lambda p: json.load(open(p))["predicted"]["baseline_activation_peak_bytes"]
eager, sdpa, cpu, eager16, sdpa16 = (peak(p) for p in sys.argv[1:])
assert sdpa == eager and cpu < sdpa and sdpa16 < eager16, (eager, sdpa, cpu, eager16, sdpa16)' \
    impl-gqa-hf-eager-fp32.json impl-gqa-hf-sdpa-fp32.json impl-gqa-hf-cpu-sdpa-fp32.json impl-gqa-hf-eager-bf16.json impl-gqa-hf-sdpa-bf16.json

# hf-cpu holds each dropout mask in the activations' dtype where hf holds a byte: GPT-2's
# baseline peak differs by at least one [B, T, C] mask (three bytes an element in f32),
# and sdpa with dropout keeps eager's probabilities on the CPU.
for attention in eager sdpa; do
    run plan "$root/models/hf/gpt2-tiny.json" --recipe fp32 --attention "$attention" --seq 32 --batch 2 --budget 1000T --json -o "impl-gpt2-$attention-hf.json"
    run plan "$root/models/hf/gpt2-tiny.json" --recipe fp32 --attention "$attention" --seq 32 --batch 2 --impl hf-cpu --budget 1000T --json -o "impl-gpt2-$attention-cpu.json"
done
check_that "impl: hf-cpu keeps float dropout masks, and eager's probabilities under sdpa with dropout" python3 -c '
import json, sys
peak = lambda p: json.load(open(p))["predicted"]["baseline_activation_peak_bytes"]
eh, ec, sh, sc = (peak(p) for p in sys.argv[1:])
mask = 3 * 2 * 32 * 64  # B T C: 4 bytes where hf holds 1
assert ec - eh >= mask, (eh, ec)
assert sc == ec and sh < sc, (sh, sc, ec)' impl-gpt2-eager-hf.json impl-gpt2-eager-cpu.json impl-gpt2-sdpa-hf.json impl-gpt2-sdpa-cpu.json
