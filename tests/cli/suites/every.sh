# --planner every: every layer checkpointed, as Hugging Face's gradient_checkpointing_enable()
# and FSDP's per-block check_fn do, and its figures beside every plan's in the summary and
# in predicted.every_layer, all of them replays of its schedule.

gpt2="$root/models/gpt2-tiny.json"

# --- listed wherever planners are, from the registry ------------------------------------
run plan --help; check "plan --help lists every" 0 "every    checkpoint every layer"
run sweep --help; check "sweep --help lists every among the planners" 0 "dp, revolve, chen, sqrt, every or none"
run plan "$data/chain10.json" --budget 1G --planner magic
check "an unknown planner is answered with the registry's names" 2 "no planner 'magic' (dp, revolve, chen, sqrt, every or none;"
run sweep "$data/chain10.json" --budgets 30 --planners dp,magic --runs every-none.jsonl
check "sweep's unknown planner too" 2 "no planner 'magic' (dp, revolve, chen, sqrt, every or none,"

# --- a model: the layers, and nothing else, checkpointed ----------------------------------
run plan "$gpt2" --budget 20M --planner every --json -o every-gpt2.json
check "every plans gpt2-tiny" 0
check_that "every plans gpt2-tiny: the plan says so" test "$(json_get every-gpt2.json '["planner"]')" = every
check_that "every checkpoints the 4 layers h.0..h.3 and stores the rest" python3 - every-gpt2.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
names = [s["name"] for s in d["stage_info"]]
ops = d["schedule"]
loss = next(k for k, o in enumerate(ops) if o["op"] == "loss")
first = {o["stage"]: o["op"] for o in ops[:loss]}
want = {i: ("F_ck" if n.startswith("h.") else "F_all") for i, n in enumerate(names)}
assert first == want, (first, want)
again = [o["stage"] for o in ops[loss:] if o["op"] == "F_all"]
assert sorted(again) == [i for i, n in enumerate(names) if n.startswith("h.")], again
assert d["details"]["segments"] == 4
PY
run plan "$gpt2" --budget 20M --planner every --granularity op --json -o every-gpt2-op.json
check "every plans gpt2-tiny at op granularity" 0
check_that "every plans gpt2-tiny at op granularity: the plan says so" test "$(json_get every-gpt2-op.json '["planner"]')" = every
check_that "at op granularity each layer's two stages are one segment: 4 F_ck, 4 F_none" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
ops = d["details"]["operations"]
assert (ops["F_ck"], ops["F_none"], d["predicted"]["every_layer"]["layers"]) == (4, 4, 4), ops' every-gpt2-op.json

# --- a LoRA model: its frozen embedding is a stage of its own, each layer one -----------
llama="$root/models/hf/llama-tiny.json"
run plan "$llama" --recipe fp32 --lora 8 --budget 1G --planner every --json -o every-lora.json
check "every plans a LoRA model (frozen embedding, adapted layers)" 0
check_that "under LoRA every checkpoints the layers h.0, h.1 alone, the embedding a stage apart" \
    python3 - every-lora.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
names = [s["name"] for s in d["stage_info"]]
assert names[:3] == ["embed", "h.0", "h.1"], names
ops = d["schedule"]
loss = next(k for k, o in enumerate(ops) if o["op"] == "loss")
ck = sorted(o["stage"] for o in ops[:loss] if o["op"] == "F_ck")
assert [names[i] for i in ck] == ["h.0", "h.1"], ck
assert d["predicted"]["every_layer"]["layers"] == 2, d["predicted"]["every_layer"]
PY
run run every-lora.json --verify --steps 1 --runs every-runs.jsonl
check "run --verify of every's LoRA plan is byte-exact" 0 "gradients identical bit for bit" \
    "tracked activation peak is 100.00% of the prediction"
# In 16 bits PEFT's adapters keep copies of x (lora.upcast): f32 ones beside bf16 weights,
# autocast's bf16 ones; the recomputed layers' adapters read their copy where x is gone.
for recipe in bf16 amp-bf16; do
    run plan "$llama" --recipe "$recipe" --lora 8 --budget 1G --planner every -o "every-lora-$recipe.json"
    check "every plans a LoRA model under --recipe $recipe" 0 "keeps its own"
    run run "every-lora-$recipe.json" --verify --steps 1 --runs every-runs.jsonl
    check "run --verify of every's LoRA plan under --recipe $recipe is byte-exact" 0 \
        "gradients identical bit for bit" "tracked activation peak is 100.00% of the prediction"
done

# --- the summary's every-layer figures are every's plan's own -----------------------------
check_that "predicted.every_layer of any plan is every's predicted figures" python3 - every-gpt2.json "$bin" "$gpt2" <<'PY'
import json, subprocess, sys
every, ckplan, model = sys.argv[1:4]
e = json.load(open(every))["predicted"]
for planner in ("dp", "sqrt", "none"):
    out = subprocess.run([ckplan, "plan", model, "--budget", "30M", "--planner", planner, "--json",
                          "-o", "every-other.json"], capture_output=True, text=True, check=True).stdout
    got = json.loads(out)["predicted"]["every_layer"]
    assert got == {"layers": 4, "peak_bytes": e["peak_bytes"],
                   "activation_peak_bytes": e["activation_peak_bytes"], "time": e["time"],
                   "overhead": e["overhead"]}, (planner, got, e)
PY
run plan "$gpt2" --budget 20M --planner every -o every-summary.json
check "the summary shows every layer beside the plan" 0 "every layer checkpointed (4 layers; as gradient_checkpointing_enable() does; --planner every):"
check_that "its line prints the figures of every's own plan (total, activations, step time, overhead)" \
    python3 - "$work/out" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
row = lambda label: re.search(r"^  %s +(\S+ \S+) " % label, text, re.M).group(1)
step = re.search(r"^  step time +(\S+ \S+) +\S+ \S+ +(\S+) overhead", text, re.M)
line = re.search(r"^  total (.+), activations (.+), step time (.+), (\S+) overhead$", text, re.M)
assert line, text
assert line.groups() == (row("total"), row("activations"), step.group(1), step.group(2)), (line.groups(), text)
PY
# dp's summary carries every's figures: those of every's own plan, printed the same way
run plan "$gpt2" --budget 22M
every_line=$("$bin" plan "$gpt2" --budget 1T --planner every -o every-1t.json |
    sed -n 's/^  total \(.*\), activations \(.*\), step time \(.*\), \(.*\) overhead$/&/p')
check "dp's summary shows every layer's figures too" 0 "every layer checkpointed (4 layers" \
    "${every_line:-no every line}"

# --- too small a budget: exit 3 with every's smallest ---------------------------------------
every_peak=$(json_get every-gpt2.json '["predicted"]["peak_bytes"]')
run plan "$gpt2" --budget 16M --planner every -o every-never.json
check "below every's peak: exit 3 with its smallest budget, every's replayed peak" 3 \
    "too small for planner every: its smallest plan needs" "($every_peak bytes)"
check_that "an infeasible plan writes no file" test ! -e every-never.json
run plan "$gpt2" --budget $((every_peak - 1)) --planner every -o every-never.json
check "one byte below it is infeasible" 3 "too small for planner every"
run plan "$gpt2" --budget "$every_peak" --planner every -o every-min.json
check "at it, every plans" 0 "planner every" "0 B to spare"
check_that "at 1T, every still checkpoints every layer: the same peak" \
    test "$(json_get every-1t.json '["predicted"]["peak_bytes"]')" = "$every_peak"

# --- the plan runs as predicted, byte-exact -------------------------------------------------
run run every-gpt2.json --verify --steps 2 --runs every-runs.jsonl
check "run --verify of every's plan of gpt2-tiny passes" 0 "gradients identical bit for bit" \
    "the plan file's figures match the replay of its schedule" "verify: passed"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["predicted"]["every_layer"]["activation_peak_bytes"] += 1; json.dump(d, open(sys.argv[2], "w"))' \
    every-gpt2.json every-edited.json
run run every-edited.json --verify --steps 1 --runs every-runs.jsonl
check "run --verify fails a plan whose every_layer figure is not the replay's" 1 \
    "predicted.every_layer.activation_peak_bytes: the plan file says"
run emit hf every-gpt2.json -o every-hf.py
check "emit hf expresses every's plan exactly" 0
check_that "as 4 of 4 layers" grep -q "checkpointing these layers is exactly the plan's schedule" every-hf.py

# --- a chain file: its stages stand for layers, the last (the loss's input) stored -----------
run plan "$data/chain10.json" --budget 1000 --planner dp -o every-chain-dp.json
check "a chain file's summary compares with every stage" 0 "every stage checkpointed (9 stages; a chain file names no layers"
run plan "$data/chain10.json" --budget 50 --planner every --json -o every-chain.json
check "every plans a chain file" 0
check_that "every plans a chain file: the plan says so" test "$(json_get every-chain.json '["planner"]')" = every
check_that "each stage but the last checkpointed" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
ops = d["schedule"]
loss = next(k for k, o in enumerate(ops) if o["op"] == "loss")
assert [o["op"] for o in ops[:loss]] == ["F_ck"] * 9 + ["F_all"], ops[:loss]
assert d["predicted"]["every_layer"]["layers"] == 9' every-chain.json
check_that "and replays to its predictions" replay every-chain.json "$data/chain10.json"
check_that "its figures are the every_layer of the dp plan" python3 -c '
import json, sys
e, p = (json.load(open(f))["predicted"] for f in sys.argv[1:3])
assert p["every_layer"]["activation_peak_bytes"] == e["activation_peak_bytes"]
assert p["every_layer"]["time"] == e["time"]' every-chain.json every-chain-dp.json

# --- a model without layers: refused, never checkpointed some other way ---------------------
cat > every-flat.json <<'EOF'
{"format": "ckplan-model/1", "name": "flat", "dims": {"B": 4, "IN": 8, "W": 16, "OUT": 2},
 "inputs": [{"name": "x", "shape": ["B", "IN"]}, {"name": "y", "shape": ["B", "OUT"]}],
 "nodes": [{"name": "fc1", "op": "linear", "out": "W", "inputs": ["x"]},
           {"name": "act", "op": "relu", "inputs": ["fc1"]},
           {"name": "head", "op": "linear", "out": "OUT", "inputs": ["act"]},
           {"name": "loss", "op": "mse", "inputs": ["head", "y"]}]}
EOF
run plan every-flat.json --budget 1G --planner every -o every-flat-plan.json
check "a model that repeats no block is refused by every, even where the baseline fits" 2 \
    "every-flat.json: --planner every" "model flat has no layers it can checkpoint one by one"
check_that "and no plan is written" test ! -e every-flat-plan.json
run sweep every-flat.json --budgets 1G --planners every --runs every-flat.jsonl
check "sweep refuses it too" 2 "model flat has no layers"
run plan every-flat.json --budget 1G -o every-flat-dp.json
check "other planners plan it, and say every has no figures" 0 "every layer: no figures, the model's layers are not known"
check_that "its plan has no every_layer" python3 -c '
import json, sys
assert "every_layer" not in json.load(open(sys.argv[1]))["predicted"]' every-flat-dp.json

# --- sweep ---------------------------------------------------------------------------------
run sweep "$gpt2" --budgets 18M,20M --planners every,dp --runs every-sweep.jsonl
check "sweep plans with every" 0
check_that "and records every's points" python3 -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert [r["plan"]["planner"] for r in recs] == ["every", "every", "dp", "dp"], recs' every-sweep.jsonl
