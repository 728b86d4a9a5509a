# stage_info in plan files: which stage is which. A model's plan lists its stages' names
# and the nodes each covers (every node but the loss exactly once, in model order, as
# expanded from the model file here, independently of ckplan); a chain file's plan lists
# names only. run refuses a plan whose stage_info is not the model's stages, and still
# runs a plan written before stage_info existed.

# si_edit IN OUT PYTHON: OUT is plan IN as JSON `d` after the statements PYTHON.
si_edit() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(d, open(sys.argv[2], "w"))' "$@"; }

# si_covers PLAN MODEL CHAIN: PLAN's stage_info has CHAIN's stage names, and its nodes,
# concatenated, are MODEL's nodes after expanding blocks, the loss (the last) excepted.
si_covers() {
    python3 - "$@" <<'PY'
import json, sys
plan, model, chain = (json.load(open(p)) for p in sys.argv[1:4])
dims = {}
def size(e):
    if isinstance(e, int):
        return e
    v = 1
    for f in str(e).split("*"):
        f = f.strip()
        v *= int(f) if f.isdigit() else dims[f]
    return v
for k, e in model.get("dims", {}).items():
    dims[k] = size(e)
expanded = []
for n in model["nodes"]:
    if "block" in n:
        for r in range(size(n.get("repeat", 1))):
            expanded += [f"{n['name']}.{r}.{b['name']}" for b in model["blocks"][n["block"]]["nodes"]]
    else:
        expanded.append(n["name"])
info = plan["stage_info"]
assert len(info) == plan["stages"] == len(chain["stages"]), (len(info), plan["stages"])
assert [s["name"] for s in info] == [s["name"] for s in chain["stages"]], "names differ from ckplan chain"
assert all(sorted(s) == ["name", "nodes"] and s["nodes"] for s in info), "a stage without nodes"
listed = [n for s in info for n in s["nodes"]]
assert listed == expanded[:-1], "nodes are not the model's, once each, in order"
PY
}

for m in "$root"/models/*.json; do
    name=$(basename "$m" .json)
    for g in block op; do
        run plan "$m" --budget 1T --planner none --granularity "$g" -o "si-$name-$g.json"
        check "stage_info: $name ($g) plans" 0
        run chain "$m" --granularity "$g" -o "si-$name-$g.chain.json"
        check_that "stage_info: $name ($g) lists every node but the loss once, in order, under the chain's stage names" \
            si_covers "si-$name-$g.json" "$m" "si-$name-$g.chain.json"
    done
done

run plan "$data/chain10.json" --budget 30 --planner chen -o si-chain.json
check "stage_info: a chain file plans" 0
check_that "stage_info: a chain file's plan has its stages' names and no nodes" python3 -c '
import json, sys
plan, chain = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert plan["stage_info"] == [{"name": s["name"]} for s in chain["stages"]], plan["stage_info"]
' si-chain.json "$data/chain10.json"
run run si-chain.json --verify --steps 1 --runs si.jsonl --quiet
check "stage_info: a chain file's plan runs and verifies" 0

tiny=$root/models/gpt2-tiny.json
run plan "$tiny" --budget 22M -o si.json
run run si.json --verify --steps 1 --runs si.jsonl --quiet
check "stage_info: a model's plan runs and verifies" 0

# Edited so that it is no longer the model's stages: refused before anything runs.
lines=$(wc -l < si.jsonl)
si_edit si.json si-node.json "d['stage_info'][2]['nodes'][1] = 'h.1.ln2'"
run run si-node.json --steps 1 --runs si.jsonl
check "stage_info: a node edited is refused, naming the entry and both names" 2 \
    "si-node.json: stage_info[2].nodes[1]: the plan says \"h.1.ln2\", the model derives \"h.1.qkv\"" "plan it again"
si_edit si.json si-name.json "d['stage_info'][1]['name'] = 'h.9'"
run run si-name.json --steps 1 --runs si.jsonl
check "stage_info: a stage name edited is refused" 2 "si-name.json: stage_info[1].name: the plan says \"h.9\", the model derives \"h.0\""
si_edit si.json si-moved.json "s = d['stage_info']; s[3]['nodes'].append(s[4]['nodes'].pop(0))"
run run si-moved.json --steps 1 --runs si.jsonl
check "stage_info: a node moved to the stage before is refused" 2 "si-moved.json: stage_info[3].nodes: the plan says 13 nodes, the model derives 12 nodes"
si_edit si.json si-no-nodes.json "del d['stage_info'][0]['nodes']"
run run si-no-nodes.json --steps 1 --runs si.jsonl
check "stage_info: a model's stage without its nodes is refused" 2 "si-no-nodes.json: stage_info[0].nodes: the plan says no nodes, the model derives 2 nodes"
# A plan made at op granularity, relabelled as block: the stage count differs already.
run plan "$tiny" --budget 1G --granularity op -o si-op.json
si_edit si-op.json si-op-as-block.json "d['details']['granularity'] = 'block'"
run run si-op-as-block.json --steps 1 --runs si.jsonl
check "stage_info: an op-granularity plan relabelled block is refused" 2 "si-op-as-block.json: stages: the plan has"
check_that "stage_info: nothing recorded for the refused plans" test "$(wc -l < si.jsonl)" = "$lines"
si_edit si.json si-bad-type.json "d['stage_info'][5]['nodes'][0] = 5"
run run si-bad-type.json --steps 1 --runs si.jsonl
check "stage_info: a node that is not a string is an input error naming the path" 2 \
    "si-bad-type.json: stage_info[5].nodes[0]: expected a string (a node's name), got the number 5"

# Plans written before stage_info existed still run, and verify.
si_edit si.json si-old.json "del d['stage_info']"
run run si-old.json --verify --steps 1 --runs si.jsonl --quiet
check "stage_info: a plan without stage_info still runs and verifies" 0
si_edit si-chain.json si-chain-old.json "del d['stage_info']"
run run si-chain-old.json --verify --steps 1 --runs si.jsonl --quiet
check "stage_info: so does a chain file's plan without it" 0

# Size: stage_info grows with the model's node names. 200,000 nodes (a block of 20
# repeated 9999 times and the loss) give a plan that run reads back, and refuses quickly
# when the very last node is edited (reading and comparing are linear). A plan over the
# input limit is refused by plan, naming the limit, and leaves no file.
python3 - si-big.json <<'PY'
import json, sys
block, prev = [], "x"
for i in range(20):
    block.append({"name": f"layer_node_{i}", "op": "relu", "inputs": [prev]})
    prev = block[-1]["name"]
json.dump({"format": "ckplan-model/1", "name": "big", "dims": {"B": 2, "C": 4},
           "inputs": [{"name": "x", "shape": ["B", "C"]}, {"name": "y", "shape": ["B", "C"]}],
           "blocks": {"layer": {"input": "x", "nodes": block}},
           "nodes": [{"name": "h", "block": "layer", "repeat": 9999, "inputs": ["x"]},
                     {"name": "loss", "op": "mse", "inputs": ["h", "y"]}]}, open(sys.argv[1], "w"))
PY
run plan si-big.json --budget 1G --planner chen -o si-big.plan.json
check "stage_info: a 200,000-node model plans" 0
check_that "stage_info: its plan lists 199,980 nodes" test "$(json_get si-big.plan.json '["stage_info"].__len__(), sum(len(s["nodes"]) for s in d["stage_info"])')" = "9999 199980"
si_edit si-big.plan.json si-big-edit.json "d['stage_info'][-1]['nodes'][-1] = 'zzz'"
timeout 20 "$bin" run si-big-edit.json --steps 1 --runs si.jsonl >"$work/out" 2>"$work/err"; rc=$?; out=$(cat "$work/out"); err=$(cat "$work/err")
check "stage_info: its last node edited is found, within 20 seconds" 2 "stage_info[9998].nodes[19]: the plan says \"zzz\""
size_mb=$(($(wc -c < si-big.plan.json) >> 20))
CKPLAN_MAX_INPUT_MB=$size_mb run plan si-big.json --budget 1G --planner chen -o si-big-over.json
check "stage_info: a plan over the input limit is refused by plan" 2 "si-big-over.json: would be" "larger than the limit of $size_mb MiB" "CKPLAN_MAX_INPUT_MB"
check_that "stage_info: and not written" test ! -e si-big-over.json
CKPLAN_MAX_INPUT_MB=$((size_mb + 1)) run plan si-big.json --budget 1G --planner chen -o si-big-at.json
check "stage_info: one MiB more and it is written" 0
