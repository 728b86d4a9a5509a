# PyTorch 2's gradient lifetimes (docs/model-format.md, section 5): --grads held|autograd,
# --grad-accum N and --optimizer-step fused|foreach|for-loop; training.grads,
# training.grad_accum and training.optimizer_step in model files; bad values exit 2 naming
# the option or field; the plan records them, run reads them back and stays byte-exact.
llama_hf=$root/models/hf/llama-tiny.json
run plan --help
check "grads: plan --help lists the options" 0 "--grads WHEN" "--grad-accum N" "--optimizer-step HOW" \
    "for-loop torch.optim's default on the CPU"
run plan "$llama_hf" --budget 1G --grads sometimes -o grads-never.json
check "grads: a bad --grads exits 2 naming the choices" 2 "--grads: expected one of held, autograd, got 'sometimes'"
run plan "$llama_hf" --budget 1G --grad-accum 0 -o grads-never.json
check "grads: --grad-accum 0 exits 2" 2 "--grad-accum"
run plan "$llama_hf" --budget 1G --optimizer-step slow -o grads-never.json
check "grads: a bad --optimizer-step exits 2 naming the choices" 2 "--optimizer-step: expected one of fused, foreach, for-loop, got 'slow'"
run plan "$llama_hf" --budget 1G --grads autograd --dp 2 -o grads-never.json
check "grads: autograd's lifetimes are one process's: a parallel layout is refused" 2 "--grads autograd" "use held"
run plan "$llama_hf" --budget 1G --grads autograd --tp 2 -o grads-never.json
check "grads: so is tensor parallelism, which a Hugging Face config's builder takes" 2 "--grads autograd" "use held"
for layout in "--tp 2" "--dp 2" "--dp 2 --zero 3" "--pp 2"; do
    # shellcheck disable=SC2086 # the layout's options are words
    run plan "$llama_hf" --recipe fp32 --budget 1000T $layout -o grads-layout.json
    check_that "grads: $layout holds the gradients in its framework's buffers" \
        test "$(json_get grads-layout.json '["predicted"]["assumed"]["grads"]')" = held
done
check_that "grads: refused plans write nothing" test ! -e grads-never.json

# A Hugging Face config makes its gradients in the backward; held counts them as static.
# The static memory differs by the gradients exactly, the step's peak by at most them.
run plan "$llama_hf" --recipe fp32 --budget 1000T --json -o grads-auto.json
check "grads: a Hugging Face config plans with autograd's gradients" 0
run plan "$llama_hf" --recipe fp32 --budget 1000T --grads held --json -o grads-held.json
check "grads: --grads held" 0
check_that "grads: autograd's static memory is held's less the gradients, its peak no higher" python3 -c '
import json, sys
a, h = (json.load(open(p))["predicted"] for p in sys.argv[1:])
made = a["assumed"]["gradients_made_bytes"]
assert a["assumed"]["grads"] == "autograd" and h["assumed"]["grads"] == "held", (a, h)
assert made == h["static"]["gradients"] > 0 and a["static"]["gradients"] == 0
assert a["static_bytes"] + made == h["static_bytes"]
assert h["peak_bytes"] - made <= a["peak_bytes"] <= h["peak_bytes"], (a["peak_bytes"], h["peak_bytes"])' grads-auto.json grads-held.json
check_that "grads: the plan records --grads held in model.options" test "$(json_get grads-held.json '["model"]["options"]["grads"]')" = held
run plan "$root/models/llama-tiny.json" --budget 1000T --json -o grads-file.json
check_that "grads: a model file without training.grads holds them" test "$(json_get grads-file.json '["predicted"]["assumed"]["grads"]')" = held

# Accumulation: a later micro-step holds every gradient from its start, so the peak is at
# least held's (whose static memory holds them) less nothing; times stay per micro-step.
run plan "$llama_hf" --recipe fp32 --budget 1000T --grad-accum 4 -o grads-accum.json
check "grads: --grad-accum 4 plans and says so" 0 "4 micro-steps accumulated per optimizer step"
check_that "grads: accumulation holds every gradient through the forward" python3 -c '
import json, sys
c, h, a = (json.load(open(p))["predicted"] for p in sys.argv[1:])
assert c["assumed"]["grad_accum"] == 4
assert c["peak_bytes"] >= h["peak_bytes"] > a["peak_bytes"], (c["peak_bytes"], h["peak_bytes"], a["peak_bytes"])
assert c["time"] == a["time"]' grads-accum.json grads-held.json grads-auto.json

# The optimizer's temporaries: Adam's for-loop step holds two of the largest trainable
# tensor, foreach one copy of all of them (f32 state here); fused none. At a sequence of 1
# the step's peak is the optimizer's, so the three differ by exactly those bytes.
for how in fused foreach for-loop; do
    run plan "$llama_hf" --recipe fp32 --seq 1 --batch 1 --optimizer-step "$how" --budget 1000T --json -o "grads-step-$how.json"
    check "grads: --optimizer-step $how" 0
done
check_that "grads: the optimizer step's temporaries are torch.optim's" python3 -c '
import json, sys
f, e, l = (json.load(open(p)) for p in sys.argv[1:])
largest = 256 * 64  # the embedding and the head, [V, C]
trained = f["model"]["parameters"]
fp, ep, lp = (d["predicted"]["activation_peak_bytes"] for d in (f, e, l))
made = f["predicted"]["assumed"]["gradients_made_bytes"]
assert ep == max(fp, made + 4 * trained), (fp, ep, made, trained)
assert lp == max(fp, made + 2 * 4 * largest), (fp, lp)
assert ep > fp and lp > fp' grads-step-fused.json grads-step-foreach.json grads-step-for-loop.json

# run reads the options back from the plan and measures what was predicted, byte for byte,
# with the gradients of the baseline bit for bit.
verify_planners "grads-accum" "$llama_hf" --may-store-all --recipe fp32 --grad-accum 2 --optimizer-step for-loop --seq 16 --batch 2
verify_planners "grads-gemma-foreach" "$root/models/hf/gemma-tiny.json" --may-store-all --recipe fp32 --optimizer-step foreach --seq 16 --batch 2
verify_planners "grads-file-autograd" "$root/models/gpt2-tiny.json" --grads autograd --grad-accum 3

# training.grads, training.grad_accum and training.optimizer_step in model files.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.setdefault("training", {}).update(grads="autograd", grad_accum=2, optimizer_step="foreach"); json.dump(d, open(sys.argv[2], "w"))' "$root/models/gpt2-tiny.json" grads-model.json
run plan grads-model.json --budget 1000T --json -o grads-model-plan.json
check_that "grads: a model file's training fields are read" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))["predicted"]["assumed"]
assert (a["grads"], a["grad_accum"], a["optimizer_step"]) == ("autograd", 2, "foreach"), a' grads-model-plan.json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["training"]["grad_accum"]=0; json.dump(d, open(sys.argv[2], "w"))' grads-model.json grads-bad.json
run plan grads-bad.json --budget 1000T -o grads-never.json
check "grads: training.grad_accum 0 exits 2 naming the file and the field" 2 "grads-bad.json: training.grad_accum: expected 1 to 4096 micro-steps, got 0"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["training"]["grads"]="maybe"; json.dump(d, open(sys.argv[2], "w"))' grads-model.json grads-bad2.json
run plan grads-bad2.json --budget 1000T -o grads-never.json
check "grads: a bad training.grads exits 2 naming the file and the field" 2 "grads-bad2.json: training.grads: expected one of held, autograd, got \"maybe\""
