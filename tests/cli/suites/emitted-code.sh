# Emitted code is generated, never spliced (issue 24, class 1). Every string an input can
# carry into emitted output (a model's name, a Hugging Face config's _name_or_path, the
# model's path, a plan's planner) reaches it as an escaped literal (cli/pystr.c) or escaped
# comment text: for every target, each string of a hostile set gives output that parses,
# has exactly the structure of a plain twin's, imports without side effects and gives the
# strings back (tests/cli/emit_hostile.py). Parameter names in `emit torch` are unique by
# construction: a collision is refused, naming both nodes.

for target in hf fsdp megatron deepspeed torch; do
    check_that "emit $target: hostile names, paths and planners stay data" \
        "$CKPLAN_PYTHON" "$here/emit_hostile.py" "$bin" "$root" "$target"
done

mkdir -p "$work/keys" && cd "$work/keys" || return
# collide MODEL TOP LAYER_NODE: MODEL with its top-level node TOP renamed h_0_LAYER_NODE, the
# name layer 0's node LAYER_NODE ("h.0.LAYER_NODE") has as a PyTorch parameter key.
collide() {
    python3 - "$root/models/$1" "$2" "h_0_$3" > "collide-$1" <<'PY'
import json, sys
model, top, new = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
for node in model["nodes"]:
    node["inputs"] = [new if i == top else i for i in node["inputs"]]
    if node["name"] == top:
        node["name"] = new
json.dump(model, sys.stdout)
PY
    run emit torch "collide-$1" -o "collide-$1.py"
    check "emit torch: $2 renamed h_0_$3 in $1 is refused, naming both nodes" 2 \
        "nodes h.0.$3 and h_0_$3 both give the PyTorch parameter h_0_$3_"
    check_that "emit torch: nothing written for the collision in $1" test ! -e "collide-$1.py"
}
collide gpt2-tiny.json ln_f ln1
collide llama-tiny.json norm_f norm2

# Names that differ only by '.' and '_' elsewhere stay apart: every shipped model's module
# holds each parameter under its own key, as many elements as ckplan counts.
pairs=()
for model in "$root"/models/*.json "$root"/models/hf/*.json; do
    base=$(basename "$model" .json)
    "$bin" plan "$model" --budget 1000T -o "keys-$base.plan.json" >/dev/null 2>&1
    run emit torch "$model" -o "keys_${base//-/_}.py"
    check "emit torch $base" 0
    pairs+=("keys_${base//-/_}.py" "keys-$base.plan.json")
done
check_that "emit torch, every shipped model: distinct keys, ckplan's parameter count" \
    "$CKPLAN_PYTHON" -c 'import importlib.util, json, math, sys
for module, plan in zip(sys.argv[1::2], sys.argv[2::2]):
    spec = importlib.util.spec_from_file_location(module[:-3], module)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    keys = [p[1] for n in m.NODES for p in n["params"]]
    assert len(keys) == len(set(keys)), (module, "a key twice")
    count = sum(math.prod(p[2]) for n in m.NODES for p in n["params"])
    want = json.load(open(plan))["model"]["parameters"]
    assert count == want, (module, count, want)' "${pairs[@]}"
cd "$work" || return
