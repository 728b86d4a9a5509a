# Partitioned checkpoints (--partition-activations, DeepSpeed's partition_activations):
# Llama-3-8B over tp 2 at 32K tokens keeps its checkpointed layers' inputs split, fits its
# budget by replay, and reads back into emit deepspeed and megatron with their own flags;
# sweep records it; what cannot express or run it refuses it (exit 2).

llama="$root/tests/data/hf/llama-3-8b"
part_llama() {
    run plan "$llama" --impl fused --seq 32768 --batch 1 --recipe bf16-master --tp 2 --dp 4 --zero 1 \
        --device h100-80gb "$@"
}

part_llama --planner sqrt -o part-whole.json
check "llama-3-8b --tp 2 with whole checkpoints (sqrt)" 0 "plan written to part-whole.json"
part_llama --planner sqrt --partition-activations -o part-sqrt.json
check "--partition-activations plans, saying what it keeps" 0 \
    "partitioned checkpoints (DeepSpeed's partition_activations): a checkpointed layer's input is kept as 1/2 of it" \
    "plan written to part-sqrt.json"
check_that "the same sqrt schedule holds less: each checkpoint of a layer's input is half of it, the peak no more than their sum lower" \
    python3 - part-whole.json part-sqrt.json <<'PY'
import json, sys
w, p = (json.load(open(f)) for f in sys.argv[1:])
assert p["model"]["options"]["partition_activations"] is True and p["model"]["options"]["tp"] == 2
assert "partition_activations" not in w["model"]["options"]
assert w["schedule"] == p["schedule"]  # sqrt's schedule does not depend on the budget
ckpts = [op for op in p["schedule"] if op["op"] == "F_ck"]
layer_ckpts = [op for op in ckpts if p["stage_info"][op["stage"]]["name"].startswith("h.")]
assert layer_ckpts, ckpts
x = 2 * 32768 * 4096  # a layer's input: s b h in bf16
saved = w["predicted"]["activation_peak_bytes"] - p["predicted"]["activation_peak_bytes"]
assert 0 < saved <= len(layer_ckpts) * x // 2, (saved, len(layer_ckpts))
assert p["predicted"]["peak_bytes"] <= p["budget_bytes"]
assert p["predicted"]["time"] == w["predicted"]["time"]
PY

part_llama --partition-activations -o part-dp.json
check "dp plans with partitioned checkpoints" 0 "plan written to part-dp.json"
check_that "its replayed peak fits the budget" python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
assert p["predicted"]["peak_bytes"] <= p["budget_bytes"], p["predicted"]' part-dp.json

# a pipeline: each microbatch in flight keeps its checkpoints' shards (C, held once the
# forward's checkpoint functions have returned); sqrt's schedule is the same either way
for mode in whole split; do
    extra=(); [ "$mode" = split ] && extra=(--partition-activations)
    run plan "$llama" --impl fused --seq 32768 --batch 1 --recipe bf16-master --tp 2 --pp 4 --microbatches 8 \
        --budget 54G --planner sqrt "${extra[@]}" -o "part-pp-$mode.json"
    check "--pp 4 with $mode checkpoints plans" 0 "plan written to part-pp-$mode.json"
done
check_that "a pipeline rank's C drops by half a layer's input for each checkpoint it keeps of one" \
    python3 - part-pp-whole.json part-pp-split.json <<'PY'
import json, sys
w, p = (json.load(open(f)) for f in sys.argv[1:])
assert w["schedule"] == p["schedule"] and w["pipeline"]["worst_rank"] == p["pipeline"]["worst_rank"]
k = p["schedule"].index({"op": "loss"})
kept = [op["stage"] for op in p["schedule"][:k] if op["op"] == "F_ck"]
layers = [i for i in kept if p["stage_info"][i]["name"].startswith("h.")]
assert layers, kept
x = 2 * 32768 * 4096
rank = p["pipeline"]["worst_rank"]
cw, cp = (d["pipeline"]["ranks"][rank]["chunks"][0]["checkpoint_bytes"] for d in (w, p))
assert cw - cp == len(layers) * x // 2, (cw, cp, len(layers))
PY

# read back: the deepspeed section partitions, megatron distributes, both from the replay
run emit deepspeed part-sqrt.json -o part-ds.json
check "emit deepspeed reads the plan back" 0
check_that "emit deepspeed turns partition_activations on; the plan's figures are the replay's" \
    python3 - part-ds.json part-sqrt.json <<'PY'
import json, sys
d, p = (json.load(open(f)) for f in sys.argv[1:])
assert d["activation_checkpointing"]["partition_activations"] is True
assert d["ckplan"]["plan_predicted"]["activation_peak_bytes"] == p["predicted"]["activation_peak_bytes"]
PY
check_that "no difference between the plan file and the replay was warned about" \
    bash -c '! grep -q "differ" "$1"' _ "$work/err"
run emit megatron part-sqrt.json
check "emit megatron adds --distribute-saved-activations" 0 "--distribute-saved-activations" \
    "checkpoints split over the tensor-parallel ranks"
run emit hf part-sqrt.json
check "emit hf refuses: PyTorch's checkpoint keeps inputs whole" 2 \
    "part-sqrt.json: model.options.partition_activations: PyTorch's checkpoint keeps a layer's input whole"
run emit fsdp part-sqrt.json
check "emit fsdp refuses too" 2 "model.options.partition_activations"
run run part-sqrt.json --steps 1
check "run refuses a tensor-parallel plan" 2 "cannot run tensor- or context-parallel layers"

# sweep keeps the option in its records
run sweep "$llama" --impl fused --seq 32768 --batch 1 --recipe bf16-master --tp 2 --partition-activations \
    --budgets 60G,75G --planners sqrt --runs part-runs.jsonl
check "sweep --budgets plans with partitioned checkpoints" 0 "sweep: 2 points"
run sweep "$llama" --impl fused --seq 512 --batch 1 --tp 2 --partition-activations --budgets 60G --run --runs part-runs.jsonl
check "sweep --run refuses it: one process has no other ranks to gather from" 2 \
    "are gathered from the other tensor-parallel ranks"
run report --runs part-runs.jsonl
check "report shows them among the options" 0 "tp=2 partition_activations"

# refusals
run plan "$llama" --impl fused --seq 4096 --partition-activations --budget 70G
check "--partition-activations needs --tp" 2 "--partition-activations: checkpoints are split over the tensor-parallel ranks: it needs --tp 2 or more"
run plan "$llama" --impl fused --seq 4096 --tp 2 --sp --partition-activations --budget 70G
check "and no --sp" 2 "and no --sp, under which a layer's input is split already"
run plan "$root/models/gpt2-tiny.json" --partition-activations --budget 70G
check "a model file refuses it" 2 "--partition-activations"
run plan "$llama" --impl fused --seq 4096 --tp 2 --partition-activations --granularity node --budget 70G
check "graph planning refuses it" 2 "--granularity node plans a graph"
run chain "$llama" --impl fused --tp 2 --partition-activations -o part-chain.json
check "chain refuses it: a chain file has no field for shards" 2 "a ckplan-chain/1 file has no field for"
check_that "and writes nothing" test ! -e part-chain.json
run emit torch "$llama" --plan part-sqrt.json -o part.py
check "emit torch refuses a plan with it" 2 "the emitted module (one process) does not have"
check_that "and writes nothing" test ! -e part.py
run emit torch "$llama" --impl fused --seq 64 --tp 2 --partition-activations -o part.py
check "emit torch takes the option as the other model options, and refuses it" 2 \
    "the emitted module (one process) does not have: emit a model or plan of --tp alone"
run profile "$root/models/hf/llama-tiny.json" --tp 2 --partition-activations --steps 1 -o part-costs.json
check "profile measures the stages: shards change no stage's time" 0 "costs written to part-costs.json"
run sweep "$llama" --impl fused --device h100-80gb --gpus 8 --partition-activations
check "sweep --gpus chooses the layout itself" 2 "it takes no --partition-activations"
