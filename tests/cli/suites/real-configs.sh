# Issue 11's question for every published config in tests/data/hf (the ten families): at 4K
# tokens, batch 1, bf16 with f32 master weights, on 80 GB or on an H100, ckplan answers with
# the parameter count, the static memory by part and either a plan or why none fits
# (exit 3, with what sharding would leave). The counts themselves are tests/unit/test_hf.c's.

# GPT-2 (1024) and OPT (2048) have learned positions for fewer tokens: they run at theirs.
for config in "$root"/tests/data/hf/*; do
    name=$(basename "$config" .json)
    seq=$(python3 - "$config" <<'PY'
import json, os, sys
path = sys.argv[1]
c = json.load(open(os.path.join(path, "config.json") if os.path.isdir(path) else path))
learned = c["model_type"] in ("gpt2", "opt")
print(min(4096, c.get("n_positions", c.get("max_position_embeddings"))) if learned else 4096)
PY
)
    for where in "--budget 80G" "--device h100-80gb"; do
        # shellcheck disable=SC2086
        run plan "$config" --seq "$seq" --batch 1 --recipe bf16-master $where -o "real-$name.json"
        check_that "$name $where: plans (0) or says why not (3)" test "$rc" = 0 -o "$rc" = 3
        check "$name $where: the parameter count and the training setup" "$rc" "parameters: " \
            "training: recipe bf16-master"
        if [ "$rc" = 0 ]; then
            check "$name $where: the static memory by part and the plan" 0 "    parameters " \
                "    gradients " "    optimizer " "    master " "checkpointed stages"
            check_that "$name $where: the plan's parameter count is the summary's" python3 - \
                "real-$name.json" "$out" <<'PY'
import json, sys
n = json.load(open(sys.argv[1]))["model"]["parameters"]
assert "parameters: {:,}".format(n) in sys.argv[2], n
PY
        else
            check "$name $where: static memory by part, and what ZeRO would leave" 3 \
                "static_over_budget" "parameters " "gradients " "optimizer state " \
                "master weights " "ZeRO-3"
        fi
    done
done
# the question of the README: Llama-3-8B at 8K fits 80 GB with LoRA, not without
run plan "$root/tests/data/hf/llama-3-8b" --seq 8192 --batch 1 --recipe bf16-master --budget 80G
check "Llama-3-8B full fine-tuning at 8K does not fit 80G" 3 "static_over_budget"
run plan "$root/tests/data/hf/llama-3-8b" --seq 8192 --batch 1 --recipe bf16-master --lora 16 \
    --device h100-80gb -o real-l3-lora.json
check "Llama-3-8B with LoRA at 8K fits an H100" 0 "budget from --device h100-80gb"
