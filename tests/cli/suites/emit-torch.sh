# emit torch: the model as a PyTorch module. What the module computes and holds is
# tests/torch/run's (PyTorch as the referee); here: the command's interface, its errors,
# and the module's own interface (STAGES as the plan's stage_info, the same seed giving the
# same parameters and inputs with or without a plan).

run emit torch --help
check "emit torch --help names the module's interface and --plan" 0 "build(seed=0)" "--plan PLAN"

run emit torch "$root/models/gpt2-tiny.json" -o gpt2_tiny_plain.py
check "emit torch writes a module without a plan" 0
check_that "emit torch: the module is Python that compiles" \
    python3 -m py_compile gpt2_tiny_plain.py
check_that "emit torch: without a plan, SCHEDULE is None" grep -q '^SCHEDULE = None' gpt2_tiny_plain.py

run plan "$root/models/gpt2-tiny.json" --budget 22M -o tiny-plan.json
run emit torch "$root/models/gpt2-tiny.json" --plan tiny-plan.json -o gpt2_tiny_dp.py
check "emit torch writes the plan's module" 0
check_that "emit torch: the module lists the plan's schedule, one line an operation" \
    python3 -c 'import json, sys
plan = json.load(open("tiny-plan.json"))
text = open("gpt2_tiny_dp.py").read()
ops = text[text.index("SCHEDULE = [") + 12:text.index("\n]", text.index("SCHEDULE = ["))]
lines = [l.strip() for l in ops.strip().splitlines()]
want = ["(\"loss\", None)," if o["op"] == "loss" else "(\"%s\", %d)," % (o["op"], o["stage"])
        for o in plan["schedule"]]
assert lines == want, (lines[:4], want[:4])'

run emit torch "$root/models/gpt2-tiny.json" --plan tiny-plan.json
check "emit torch without -o writes the module to stdout" 0 "def build(seed=0):"

# Errors: exit 2, naming what is wrong; nothing written.
run emit torch "$data/chain10.json" -o chain.py
check "emit torch refuses a chain file" 2 "a chain file has no model to emit"
check_that "emit torch: nothing written for a chain file" test ! -e chain.py
run plan "$root/models/llama-tiny.json" --budget 1000T -o llama-plan.json
run emit torch "$root/models/gpt2-tiny.json" --plan llama-plan.json -o wrong.py
check "emit torch refuses a plan of another model" 2 "llama-plan.json: model.sha256: the plan is not of"
run emit torch "$root/models/gpt2-tiny.json" --plan tiny-plan.json --seq 32 -o wrong.py
check "emit torch refuses model options beside --plan" 2 "give one or the other"
run emit torch "$root/models/gpt2-tiny.json" --plan no-such-plan.json -o wrong.py
check "emit torch names a plan it cannot read" 2 "no-such-plan.json"
run emit torch "$root/models/gpt2-tiny.json" "$root/models/llama-tiny.json"
check "emit torch takes one MODEL" 2 "expected exactly one MODEL"
run emit torch "$root/models/gpt2-tiny.json" -o "$root/models/gpt2-tiny.json"
check "emit torch refuses to write over its model" 2 "-o"
echo 'kept' > existing.py
run emit torch no-such-model.json -o existing.py
check "emit torch: a failed emit exits 2" 2 "no-such-model.json"
check_that "emit torch: a failed emit leaves the output as it was" grep -qx kept existing.py

# The module's interface, in PyTorch 2 (the referee's interpreter, .venv/: CKPLAN_PYTHON).
check_that "emit torch: STAGES are the plan's stage names; the same seed gives the same parameters and inputs with and without the plan" \
    "$CKPLAN_PYTHON" -c 'import json, sys, torch
sys.path.insert(0, ".")
import gpt2_tiny_plain as plain, gpt2_tiny_dp as planned
names = [s["name"] for s in json.load(open("tiny-plan.json"))["stage_info"]]
assert planned.STAGES == names == plain.STAGES, (planned.STAGES, names)
(m1, in1) = plain.build(seed=3)
loss1 = m1(*in1)  # dropout draws from the generator build() seeded
(m2, in2) = planned.build(seed=3)
loss2 = m2(*in2)
assert all(torch.equal(a, b) for a, b in zip(m1.parameters(), m2.parameters()))
assert all(torch.equal(a, b) for a, b in zip(in1, in2))
assert loss2.dim() == 0 and loss1.item() == loss2.item(), (loss1, loss2)
(m3, in3) = plain.build(seed=4)
assert not torch.equal(in1[0], in3[0])
opt = planned.make_optimizer(m2)
assert isinstance(opt, torch.optim.Adam)'
