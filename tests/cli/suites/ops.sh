# Models that use each op added since the op table became the one home of an op's facts
# (rope, cast, swiglu): every planner's plan, half-way between dp's smallest plan and the
# baseline, runs under --verify with the measured activation peak equal to the predicted
# one, to the byte, and the baseline's gradients bit for bit (verify_planners, tests/cli/run).

verify_planners rope "$data/rope-tiny.json"
verify_planners swiglu "$data/swiglu-tiny.json"
verify_planners cast "$data/cast-tiny.json"

# cast: `to` is a float dtype; the executor runs ops other than cast in f32 only.
# ops_edit OUT PYTHON: cast-tiny.json as `d` after the statements PYTHON.
ops_edit() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(d, open(sys.argv[2], "w"))' "$data/cast-tiny.json" "$@"; }
ops_edit ops-cast-int.json "d['blocks']['layer']['nodes'][2]['to'] = 'int32'"
run plan ops-cast-int.json --budget 1G -o ops-cast-int-plan.json
check "cast: an integer \"to\" is refused, naming the file and JSON path" 2 \
    "ops-cast-int.json: blocks.layer.nodes[2].to: expected a float dtype (\"f32\", \"bf16\" or \"f16\"), got the string \"int32\""
ops_edit ops-cast-gelu.json "d['blocks']['layer']['nodes'][3] = {'name': 'back', 'op': 'gelu', 'inputs': ['low']}"
run plan ops-cast-gelu.json --budget 1G -o ops-cast-gelu-plan.json
check "cast: a gelu on bf16 is planned" 0
run run ops-cast-gelu-plan.json --steps 1 --runs ops-cast-gelu.jsonl
check "cast: the executor refuses a gelu on bf16, naming the node" 2 \
    "node h.0.back (gelu) computes in bf16: the executor's kernels for it take f32 only"
