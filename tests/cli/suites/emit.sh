# ckplan emit hf|fsdp|megatron|deepspeed (docs/emit.md): plans for the stacks users run. The
# Python snippets are executed with PyTorch 2 (the referee's interpreter, CKPLAN_PYTHON)
# against a module tree of Hugging Face's shape: exactly the plan's layers must be
# recomputed in backward, and the gradients must equal the unwrapped module's. Every
# predicted figure is checked against the schedule the output expresses: its activation
# peak is the one `ckplan run` measures, within the independent replay's bound
# (tests/cli/replay.py), its time the replay's; which layers a plan checkpoints is computed from the plan
# file by tests/cli/emit_check.py, not taken from ckplan.
emit_check() { python3 "$here/emit_check.py" "$@"; }
torch_check() { "$CKPLAN_PYTHON" "$here/emit_check.py" "$@"; }
mkdir -p "$work/emit" && cd "$work/emit" || return

# --- usage ------------------------------------------------------------------------------
run emit; check "emit: no target is a usage error" 2 "usage: ckplan emit TARGET"
run emit --help; check "emit --help lists every target" 0 "  hf  " "  fsdp  " "  megatron  " "  deepspeed  " "-o, --output FILE"
run help emit; check "help emit" 0 "usage: ckplan emit TARGET"
run --help; check "--help lists emit" 0 "emit "
for t in hf fsdp megatron deepspeed; do
    run emit $t --help; check "emit $t --help" 0 "usage: ckplan emit $t PLAN [-o FILE]" "F_all" "Exit codes"
done
run emit pytorch x.json; check "emit: unknown target" 2 "'pytorch' is not a target (torch, hf, fsdp, megatron, deepspeed)"
run emit hf; check "emit hf: no PLAN" 2 "emit hf: no PLAN given"
run emit hf a.json b.json; check "emit hf: two PLANs" 2 "more than one PLAN given (b.json)"
run emit megatron a.json --frob; check "emit: unknown option" 2 "unknown option '--frob'"
run emit hf a.json -o; check "emit: -o without a value" 2 "needs a value"
run emit -o x.py hf a.json; check "emit: -o before the target says where it goes" 2 "emit: -o goes after the target"

# --- plans with every answer: no layer, some, all; exact and not expressible -------------
# (gpt2-tiny: stages embed, drop_embed, h.0..h.3, ln_f, lm_head; mlp-deep: h.0..h.15, head).
# Each test plan is the first, from the baseline's budget down, that is of its kind, as
# emit_check.py sees it from the plan file: the cases follow the models' figures.
"$bin" chain "$root/models/gpt2-tiny.json" -o gpt2.chain.json
"$bin" chain "$root/models/mlp-deep.json" -o mlp.chain.json
"$bin" chain "$root/models/gpt2-tiny.json" --granularity op -o gpt2-op.chain.json
plan_case() { # NAME KIND MODEL CHAIN PLAN-OPTIONS...: the plan of that kind into NAME.json
    local name=$1 kind=$2 model=$3 chain=$4; shift 4
    printf '%s\n' "$chain" > "$name.chain"
    check_that "emit: a $kind plan ($*) for the $name case" emit_check pick "$kind" "$bin" "$name.json" "$model" "$@"
}
plan_case none  none        "$root/models/gpt2-tiny.json" gpt2.chain.json --planner dp
plan_case some  some-exact  "$root/models/gpt2-tiny.json" gpt2.chain.json --planner dp
plan_case first first-exact "$root/models/gpt2-tiny.json" gpt2.chain.json --planner dp
plan_case mixed mixed       "$root/models/gpt2-tiny.json" gpt2.chain.json --planner dp
plan_case chen  all         "$root/models/gpt2-tiny.json" gpt2.chain.json --planner chen
plan_case all   all-nested  "$root/models/mlp-deep.json" mlp.chain.json --planner revolve
# at op granularity a layer is two stages, and the plan keeps activations inside layers
plan_case op    inner       "$root/models/gpt2-tiny.json" gpt2-op.chain.json --planner dp --granularity op

for p in none some first mixed chen all op; do
    chain=$(cat $p.chain)
    for t in hf fsdp; do
        run emit $t $p.json -o $t-$p.py
        check "emit $t ($p): written" 0
        check_that "emit $t ($p): the snippet checkpoints exactly the plan's layers, gradients equal" torch_check run $t $t-$p.py $p.json
        check_that "emit $t ($p): its predicted peak, time and budget verdict are the replay of what it expresses" emit_check figures $t $t-$p.py $p.json "$chain" "$bin"
    done
    run emit hf $p.json
    check_that "emit hf ($p): stdout is what -o wrote" test "$out" = "$(cat hf-$p.py)"
    check_that "emit hf ($p): turns the KV cache off" grep -q "model.config.use_cache = False" hf-$p.py
    check_that "emit hf ($p): non-reentrant, the random state kept" grep -q "use_reentrant=False, preserve_rng_state=True" hf-$p.py
    run emit megatron $p.json -o megatron-$p.txt
    check "emit megatron ($p): written" 0
    check_that "emit megatron ($p): its predicted peak, time and budget verdict are the replay of its flags" emit_check figures megatron megatron-$p.txt $p.json "$chain" "$bin"
    run emit deepspeed $p.json -o deepspeed-$p.json
    check "emit deepspeed ($p): written" 0
    check_that "emit deepspeed ($p): its predicted peak, time and budget verdict are the replay of its layers" emit_check figures deepspeed deepspeed-$p.json $p.json "$chain" "$bin"
    check_that "emit deepspeed ($p): the layers to wrap are the plan's, exact as an outside replay says" python3 -c '
import json, subprocess, sys
d = json.load(open(sys.argv[1]))
want = json.loads(subprocess.check_output([sys.executable, sys.argv[2], "layers", sys.argv[3]]))
fig = json.loads(subprocess.check_output([sys.executable, sys.argv[2], "figures", "deepspeed", sys.argv[1], sys.argv[3], sys.argv[4], sys.argv[5]]))
s, c = d["activation_checkpointing"], d["ckplan"]
assert sorted(s) == sorted(["partition_activations", "cpu_checkpointing", "contiguous_memory_optimization",
                            "number_checkpoints", "synchronize_checkpoint_boundary", "profile"]), s
assert s["number_checkpoints"] == (len(want) or None), s
assert c["checkpoint_layers"] == want and c["checkpoint_layer_names"] == ["h.%d" % k for k in want], c
assert c["exact"] == fig["exact"] and (c["cannot_express"] == []) == c["exact"], c
plan = json.load(open(sys.argv[3]))
assert c["plan_predicted"]["activation_peak_bytes"] == plan["predicted"]["activation_peak_bytes"], c
assert c["baseline"]["activation_peak_bytes"] == plan["predicted"]["baseline_activation_peak_bytes"], c
' deepspeed-$p.json "$here/emit_check.py" $p.json "$chain" "$bin"
done

# What each case says.
check_that "emit hf: a plan of whole layers is expressed exactly" grep -q "checkpointing these layers is exactly the plan's schedule" hf-some.py
check_that "emit hf: no layer checkpointed gives an empty list" grep -q "^CKPLAN_CHECKPOINT = \[\]" hf-none.py
check_that "emit hf: a recomputed stage that is no layer is stated" grep -q "that \(is\|are\) no decoder layer (the first: " hf-mixed.py
check_that "emit hf: an F_none chain dropping a layer's input is stated" grep -q "drops the input of [0-9]* layers\? (F_none; the first: h\.[0-9]*)" hf-mixed.py
check_that "emit hf: all layers checkpointed" test "$(emit_check layers chen.json)" = "[0, 1, 2, 3]"
check_that "emit hf: nested recomputation is stated" grep -q "nested recomputation" hf-all.py
check_that "emit hf: a checkpoint inside a layer is stated" grep -q "keeps an activation inside [0-9]* layers\? as a checkpoint" hf-op.py
check_that "emit megatron: no layer, no flags" bash -c '! grep -q "^--" megatron-none.txt && grep -q "no recomputation: pass none" megatron-none.txt && grep -q "exactly the plan" megatron-none.txt'
n_first=$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$(emit_check layers first.json)")
check_that "emit megatron: the first $n_first layers alone are the block method, exactly" bash -c 'grep -qx -- "--recompute-granularity full --recompute-method block --recompute-num-layers $1" megatron-first.txt && grep -q "these flags are exactly the plan" megatron-first.txt' _ "$n_first"
check_that "emit megatron: other layers than the first cannot be expressed, the closest flags come with their cost" bash -c 'grep -q "cannot express the plan" megatron-some.txt && grep -q "checkpoints other layers than those" megatron-some.txt && grep -q "^--recompute-granularity full\|^# no recomputation" megatron-some.txt && grep -q "^#   these flags " megatron-some.txt'
check_that "emit megatron: what cannot be expressed says which flags come closest" grep -q "^# closest flags: " megatron-mixed.txt

# Megatron's uniform method: a plan checkpointing mlp-deep's 16 layers in groups of 4 (its
# schedule built by the test, its time replayed from the spec and its activation peak the
# one `run` measures, which plan files hold).
python3 - "$here" all.json mlp.chain.json uniform.json "$bin" <<'EOF'
import json, sys
sys.path.insert(0, sys.argv[1])
import emit_check, replay
plan, chain = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
L = len(chain["stages"])
plan["schedule"] = emit_check.segments_schedule(L, [(a, a + 4) for a in range(0, 16, 4)])
_, time = replay.replay(chain, plan["schedule"])
peak = emit_check.measured_peak(sys.argv[5], plan, plan["schedule"])
p = plan["predicted"]
p.update(activation_peak_bytes=peak, peak_bytes=p["static_bytes"] + peak, time=time,
         overhead=time / p["baseline_time"] - 1)
plan["budget_bytes"] = p["peak_bytes"]
plan.pop("details", None)
json.dump(plan, open(sys.argv[4], "w"))
EOF
run emit megatron uniform.json
check "emit megatron: groups of 4 layers are the uniform method, exactly" 0 "these flags are exactly the plan's schedule" "--recompute-granularity full --recompute-method uniform --recompute-num-layers 4"
check_that "emit megatron: a plan whose figures are its replay gives no warning" test -z "$err"
run emit hf uniform.json
check "emit hf: groups of layers cannot be expressed per layer" 0 "drops the input of 12 layers" "CKPLAN_CHECKPOINT = [$(seq -s ", " 0 15)]"

# A plan made from a Hugging Face config: its 22 layers are model.model.layers.
"$bin" plan "$root/tests/data/hf/tinyllama-1.1b.json" --seq 8192 --batch 8 --device h100-80gb -o tinyllama.json >/dev/null 2>&1
run emit hf tinyllama.json -o hf-tinyllama.py
check "emit hf: a Hugging Face config's plan" 0
check_that "emit hf: a config's layers are counted as the config has them" grep -q "^CKPLAN_LAYERS = 22 " hf-tinyllama.py
check_that "emit hf: a config's plan runs against a tree of its shape" torch_check run hf hf-tinyllama.py tinyllama.json

# A plan file whose figures were edited: the replayed ones are printed, with a warning.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["predicted"]["activation_peak_bytes"] += 1; json.dump(d, open(sys.argv[2], "w"))' some.json edited.json
run emit deepspeed edited.json
check "emit: an edited plan's figures are not believed" 0 "warning: edited.json: the plan file's figures differ from the replay" "predicted.activation_peak_bytes: the plan file says"
check_that "emit: ... and the replayed ones are printed" test "$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ckplan"]["plan_predicted"]["activation_peak_bytes"])')" = "$(json_get some.json '["predicted"]["activation_peak_bytes"]')"

# A plan path with a newline cannot break out of the snippet's comments.
nl_plan="$work/emit/odd
import os; os.exit(3)
.json"
cp some.json "$nl_plan"
run emit hf "$nl_plan" -o hf-odd.py
check "emit hf: a plan named with a newline" 0
check_that "emit hf: the name stays inside its comment: the snippet runs" torch_check run hf hf-odd.py some.json

# --- errors: file, JSON path, what was expected; exit 2; no output written ---------------
echo keep > kept.py
run emit hf missing.json -o kept.py; check "emit: a missing plan" 2 "missing.json: cannot open"
check_that "emit: a failed emit leaves -o untouched" test "$(cat kept.py)" = keep
printf '{"format": "ckplan-plan/1",\n "stages": [' > trunc.json
run emit fsdp trunc.json; check "emit: a truncated plan gives line and column" 2 "trunc.json:2:12: not valid JSON"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["schedule"][0]["op"] = "F_some"; json.dump(d, open(sys.argv[2], "w"))' some.json badop.json
run emit megatron badop.json; check "emit: a plan that is no plan names the path" 2 "badop.json: schedule[0].op"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["schedule"] = d["schedule"][1:]; json.dump(d, open(sys.argv[2], "w"))' some.json invalid.json
run emit deepspeed invalid.json; check "emit: an invalid schedule names the operation" 2 "invalid.json: schedule[0]"
cp "$root/models/gpt2-tiny.json" model.json
"$bin" plan model.json --budget 1G -o changed.json >/dev/null 2>&1
printf ' ' >> model.json
run emit hf changed.json -o kept.py; check "emit: a model changed since planning" 2 "changed.json: the model file" "changed since the plan was made"
check_that "emit: ... writes nothing" test "$(cat kept.py)" = keep
"$bin" plan "$data/chain10.json" --budget 40 -o chainplan.json >/dev/null 2>&1
for t in hf fsdp megatron deepspeed; do
    run emit $t chainplan.json; check "emit $t: a chain file's plan has no layers" 2 "chainplan.json: model.path: expected a model file or a Hugging Face config" "got a chain file"
done
cat > flat.json <<'EOF'
{"format": "ckplan-model/1", "name": "flat", "dtype": "f32", "dims": {"B": 4, "W": 8},
 "inputs": [{"name": "x", "shape": ["B", "W"], "dtype": "f32"}, {"name": "y", "shape": ["B", "W"], "dtype": "f32"}],
 "nodes": [{"name": "fc1", "op": "linear", "out": "W", "inputs": ["x"]},
           {"name": "act", "op": "relu", "inputs": ["fc1"]},
           {"name": "fc2", "op": "linear", "out": "W", "inputs": ["act"]},
           {"name": "loss", "op": "mse", "inputs": ["fc2", "y"]}]}
EOF
"$bin" plan flat.json --budget 1G -o flatplan.json >/dev/null 2>&1
run emit hf flatplan.json; check "emit: a model with no repeated block has no layers" 2 "flatplan.json: stage_info: expected stages that are instances of a repeated block" "model flat repeats no block"
run emit hf some.json -o some.json; check "emit: -o over the PLAN is refused" 2 "some.json"
check_that "emit: ... and the plan is intact" emit_check layers some.json
cp "$root/models/gpt2-tiny.json" model2.json
"$bin" plan model2.json --budget 1G -o model2plan.json >/dev/null 2>&1
run emit hf model2plan.json -o model2.json; check "emit: -o over the plan's model is refused" 2 "the plan's model"
check_that "emit: ... and the model is intact" cmp -s model2.json "$root/models/gpt2-tiny.json"
run emit hf some.json -o "$work/emit/no/such/dir/x.py"; check "emit: an unwritable -o is an error" 1 "no/such/dir"
cd "$work" || return
