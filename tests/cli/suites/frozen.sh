# Frozen parameters ("frozen": true, docs/model-format.md): frozen models plan and run under
# every planner with --verify (measured peaks equal to the predicted ones, to the byte,
# gradients identical to the baseline's), they need less than the same model unfrozen, and
# static memory counts gradients and optimizer state for trainable parameters only.

# frozen_model OUT PYTHON: models/gpt2-tiny.json as `n` (its nodes) after PYTHON.
frozen_model() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); n=d["nodes"]; exec(sys.argv[3]); json.dump(d, open(sys.argv[2], "w"))' "$root/models/gpt2-tiny.json" "$@"; }
# The embedding and its tied head frozen (one table); then also the first three layers.
frozen_model frozen-embed.json "n[0]['frozen'] = True; n[4]['frozen'] = True"
frozen_model frozen-last.json "n[0]['frozen'] = True; n[4]['frozen'] = True; n[2].update(repeat=3, frozen=True); n.insert(3, {'name': 'last', 'block': 'layer', 'inputs': ['h']}); n[4]['inputs'] = ['last']"
frozen_model unfrozen-last.json "n[2]['repeat'] = 3; n.insert(3, {'name': 'last', 'block': 'layer', 'inputs': ['h']}); n[4]['inputs'] = ['last']"
# moe-tiny with its experts and router frozen (their input requires a gradient), and with
# everything but the moe frozen (the first layer's moe input then requires none).
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["blocks"]["layer"]["nodes"][7]["frozen"] = True; json.dump(d, open(sys.argv[2], "w"))' \
    "$data/moe-tiny.json" frozen-moe.json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [n.update(frozen=True) for n in d["blocks"]["layer"]["nodes"] if n["op"] in ("rmsnorm", "linear")]; [n.update(frozen=True) for n in d["nodes"] if n["name"] in ("embed", "norm_f", "head")]; json.dump(d, open(sys.argv[2], "w"))' \
    "$data/moe-tiny.json" frozen-but-moe.json
# mlp-deep (f32 input: every tensor requires a gradient) with its odd layers frozen.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["nodes"][0]["repeat"] = 1; d["nodes"][1:1] = [{"name": "h%d" % i, "block": "layer", "frozen": i % 2 == 0, "inputs": ["h" if i == 1 else "h%d" % (i - 1)]} for i in range(1, 16)]; d["nodes"][16]["inputs"] = ["h15"]; json.dump(d, open(sys.argv[2], "w"))' \
    "$root/models/mlp-deep.json" frozen-mlp.json


# Every planner's plan half-way between dp's smallest plan and the baseline passes --verify
# (tests/cli/verify_planners.sh). At block granularity the last layer of frozen-last is
# one stage with the frozen prefix, so its smallest plan may be the baseline.
. "$here/verify_planners.sh"
verify_planners frozen-embed frozen-embed.json --granularity op
verify_planners frozen-last frozen-last.json --granularity op
verify_planners frozen-last-blocks frozen-last.json --may-store-all --granularity block
verify_planners frozen-mlp frozen-mlp.json --granularity op
verify_planners frozen-moe frozen-moe.json
verify_planners frozen-but-moe frozen-but-moe.json
# none stores everything, so it plans only where the baseline fits.
run plan frozen-last.json --planner none --budget 1000T -o frozen-none.json
check "frozen: none plans the store-everything step" 0
run run frozen-none.json --verify --steps 1 --quiet
check "frozen: none's plan passes --verify" 0

# Static memory by hand. gpt2-tiny (C=128, T=64, V=512, 4 layers): a layer has
# ln1 2C + qkv 3C*C+3C + proj C*C+C + ln2 2C + fc1 4C*C+4C + fc2 4C*C+C = 198272 parameters;
# wte V*C + wpe T*C = 73728, ln_f 2C = 256: 867072 in all (f32). With the first three
# layers, the embedding and its tied head frozen, the last layer and ln_f (198528) have
# gradients (4 bytes) and adam's moments (8 bytes); the token ids and targets take 2 KiB.
run plan frozen-last.json --budget 1000T --json -o frozen-last-static.json
check_that "frozen: static memory is parameters, and gradients and adam state for trainable ones only" \
    test "$(json_get frozen-last-static.json '["predicted"]["static_bytes"]')" = $((867072 * 4 + 198528 * (4 + 8) + 2048))
check_that "frozen: the plan's gradients and optimizer state are the trainable parameters'" \
    test "$(json_get frozen-last-static.json '["predicted"]["static"]["gradients"]') $(json_get frozen-last-static.json '["predicted"]["static"]["optimizer_state"]')" = "$((198528 * 4)) $((198528 * 8))"
run plan frozen-last.json --budget 1000T
check "frozen: the summary gives the trainable count" 0 "parameters: 867,072" "; 198,528 trainable, the rest frozen"
run plan unfrozen-last.json --budget 1000T --json -o unfrozen-last-static.json
check_that "frozen: the frozen model's baseline keeps less than the unfrozen one's" python3 -c '
import json, sys
f, u = (json.load(open(p))["predicted"] for p in sys.argv[1:])
assert f["baseline_activation_peak_bytes"] * 2 < u["baseline_activation_peak_bytes"], (f, u)' \
    frozen-last-static.json unfrozen-last-static.json

# Refusals name the file, the JSON path and what was expected.
frozen_model frozen-gelu.json "d['blocks']['layer']['nodes'][8]['frozen'] = True"
run plan frozen-gelu.json --budget 1G
check "frozen: refused on an op without parameters" 2 "frozen-gelu.json: blocks.layer.nodes[8].frozen: expected only on a node with parameters" "gelu has no parameters to freeze"
frozen_model frozen-untied.json "n[0]['frozen'] = True"
run plan frozen-untied.json --budget 1G
check "frozen: a tied head must be frozen with its embedding" 2 "frozen-untied.json: nodes[4].frozen: expected true, as on embedding \"embed\" whose table this head shares"
frozen_model frozen-all.json "n[0]['frozen'] = True; n[4]['frozen'] = True; n[2]['frozen'] = True; n[3]['frozen'] = True"
run plan frozen-all.json --budget 1G
check "frozen: everything frozen is refused: nothing to train" 2 "frozen-all.json: nodes: every node with parameters is frozen"
