# Pipeline layouts (--pp, --microbatches, --virtual-stages): Llama-3-8B per rank under 1F1B
# and interleaved 1F1B, with ZeRO beside it; every rank kind in the summary and the plan,
# the worst one's figures in predicted; the refusals (uneven splits, chain files, commands
# that do not plan pipelines, run); exit 3 when the worst rank cannot fit; plans read back.

llama="$root/tests/data/hf/llama-3-8b"
pipe_llama() {
    run plan "$llama" --impl fused --seq 8192 --batch 1 --recipe bf16-master --device h100-80gb "$@"
}

pipe_llama --pp 4 --microbatches 8 -o pipe-llama.json
check "llama-3-8b --pp 4 --microbatches 8 on h100-80gb plans every rank" 0 \
    "pipeline: 4 stages, 8 microbatches a step (each of --batch), 1F1B (PipeDream-Flush)" \
    "pipeline rank 0, the worst" "  0     embed..h.7 " "  1     h.8..h.15 " "  2     h.16..h.23 " \
    "  3     h.24..lm_head " "worst: the plan's" "plan written to pipe-llama.json"
check_that "1F1B: rank i holds min(N - i, M) in flight, each rank's total fits, the worst is predicted" \
    python3 - pipe-llama.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
pl, pred = p["pipeline"], p["predicted"]
assert p["model"]["options"]["pp"] == 4 and p["model"]["options"]["microbatches"] == 8
assert p["model"]["options"]["virtual_stages"] == 1
assert [r["in_flight"] for r in pl["ranks"]] == [4, 3, 2, 1]
assert pl["bubble_fraction"] == 3 / 8
for r in pl["ranks"]:
    assert r["total_bytes"] == r["static_bytes"] + r["activation_bytes"] <= p["budget_bytes"]
    (c,) = r["chunks"]
    assert c["layers"] == 8 and c["in_flight"] == r["in_flight"]
    assert r["activation_bytes"] == (c["in_flight"] - 1) * c["checkpoint_bytes"] + c["microbatch_peak_bytes"]
w = pl["ranks"][pl["worst_rank"]]
assert w["total_bytes"] == max(r["total_bytes"] for r in pl["ranks"]) == pred["peak_bytes"]
assert w["static_bytes"] == pred["static_bytes"] and w["activation_bytes"] == pred["activation_peak_bytes"]
assert pl["worst_rank"] == 0
chunks = [r["chunks"][0] for r in pl["ranks"]]
assert [c["first_stage"] for c in chunks] == [0, 9, 17, 25] and chunks[-1]["end_stage"] == 35
assert p["stages"] == 9 and len(p["stage_info"]) == 9 and p["stage_info"][0]["name"] == "embed"
# the middle ranks hold layers alone; the first the embeddings too, the last the head
s = [r["static_bytes"] for r in pl["ranks"]]
assert s[1] == s[2] < s[0] and s[1] < s[3]
PY

pipe_llama --pp 4 --microbatches 8 --dp 2 --zero 1 -o pipe-llama-zero.json
check "--pp with --dp and --zero" 0 "layout: 2 data-parallel ranks, ZeRO-1" "pipeline: 4 stages"
check_that "ZeRO-1 over 2 shards each pipeline rank's optimizer state" \
    python3 - pipe-llama.json pipe-llama-zero.json <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert b["model"]["options"]["dp"] == 2 and b["model"]["options"]["zero"] == 1
for ra, rb in zip(a["pipeline"]["ranks"], b["pipeline"]["ranks"]):
    assert rb["static_bytes"] < ra["static_bytes"]
assert abs(2 * b["predicted"]["static"]["optimizer_state"] - a["predicted"]["static"]["optimizer_state"]) <= 2 ** 20
assert b["predicted"]["static"]["parameters"] == a["predicted"]["static"]["parameters"]
PY

pipe_llama --pp 4 --microbatches 8 --virtual-stages 2 -o pipe-llama-v2.json
check "--virtual-stages 2: interleaved 1F1B, two chunks a rank" 0 "interleaved 1F1B" \
    "2 virtual stages: chunk c of 8 on rank c mod 4" "  0     embed..h.3,h.16..h.19 "
check_that "interleaved: Megatron's warm-up counts, Korthikanti's L(1 + (p - 1)/(pm)) on the first rank" \
    python3 - pipe-llama-v2.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
pl = p["pipeline"]
assert [r["in_flight"] for r in pl["ranks"]] == [11, 9, 7, 5]
first = pl["ranks"][0]
held = sum(c["in_flight"] * c["layers"] for c in first["chunks"])
assert held == 32 * (1 + 3 / 8), held
for r in pl["ranks"]:
    assert sum(c["in_flight"] for c in r["chunks"]) == r["in_flight"]
    assert r["total_bytes"] <= p["budget_bytes"]
PY

run plan "$llama" --impl fused --seq 8192 --batch 1 --recipe bf16-master --device h100-80gb --pp 4 --json -o pipe-json.json
check "--json carries the pipeline; --microbatches defaults to --pp" 0 '"pipeline":' '"worst_rank":'
printf '%s\n' "$out" >pipe-json-stdout.json
check_that "--json prints what -o writes" python3 -c '
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a == b and a["pipeline"]["microbatches"] == 4' pipe-json.json pipe-json-stdout.json

# refusals
pipe_llama --pp 3 -o pipe-bad.json
check "layers that do not divide by --pp are refused" 2 "--pp 3 --virtual-stages 1: the model's 32 layers"
pipe_llama --pp 4 --virtual-stages 3 -o pipe-bad.json
check "nor by --pp x --virtual-stages" 2 "--pp 4 --virtual-stages 3: the model's 32 layers" "12 chunks"
pipe_llama --pp 4 --microbatches 6 --virtual-stages 2 -o pipe-bad.json
check "interleaving needs the microbatches to divide by the stages" 2 \
    "--microbatches 6 --pp 4 --virtual-stages 2: the interleaved schedule needs"
pipe_llama --pp 0 -o pipe-bad.json
check "--pp 0 is refused" 2 "--pp: expected a whole number from 1 to 1024, got '0'"
pipe_llama --pp 2 --microbatches 0 -o pipe-bad.json
check "--microbatches 0 is refused" 2 "--microbatches: expected a whole number from 1 to 65536"
pipe_llama --pp 2 --virtual-stages 65 -o pipe-bad.json
check "--virtual-stages past its limit is refused" 2 "--virtual-stages: expected a whole number from 1 to 64"
check_that "no plan written by a refusal" test ! -e pipe-bad.json
run plan "$data/hetero3.json" --budget 1G --pp 2 -o pipe-bad.json
check "a chain file refuses --pp" 2 "apply to model files" "(--pp, --microbatches, --virtual-stages)"
run chain "$llama" --impl fused --pp 2 -o pipe-bad.json
check "chain does not take pipeline layouts: a pipeline has a chain a rank" 2 \
    "pipeline layouts are planned by 'ckplan plan' and 'ckplan sweep' only: this command works on one chain"
run sweep "$llama" --impl fused --seq 8192 --batch 1 --recipe bf16-master --pp 4 --microbatches 8 --budgets 70G --run \
    --runs pipe-run.jsonl
check "sweep --run refuses a pipeline, which one process cannot run" 2 \
    "sweep: --run runs each plan in one process" "sweep it without --run"
check_that "and records nothing" test ! -e pipe-run.jsonl

# sweep --budgets plans a pipeline at each budget as plan does: each record is the plan's
# worst rank, with the layout; an infeasible point's minimum is a budget plan meets
run sweep "$llama" --impl fused --seq 8192 --batch 1 --recipe bf16-master --device h100-80gb --pp 4 --microbatches 8 \
    --dp 2 --zero 1 --budgets 30G,36G,50G,70G --planners dp,sqrt --runs pipe-sweep.jsonl
check "sweep --budgets plans a pipeline layout at every point" 0 "sweep: 8 points: 0 ran"
check_that "every record is what plan writes for its budget, layout included; minimums fit" \
    python3 - "$bin" "$llama" pipe-sweep.jsonl <<'PY'
import json, subprocess, sys
binary, llama, runs = sys.argv[1:]
common = ["--impl", "fused", "--seq", "8192", "--batch", "1", "--recipe", "bf16-master", "--device", "h100-80gb",
          "--pp", "4", "--microbatches", "8", "--dp", "2", "--zero", "1"]
def plan(planner, budget):
    p = subprocess.run([binary, "plan", llama, *common, "--planner", planner, "--budget", str(budget),
                        "--json", "-o", "/dev/null"], capture_output=True, text=True)
    return p.returncode, json.loads(p.stdout) if p.returncode == 0 else None
records = [json.loads(line) for line in open(runs)]
assert len(records) == 8, len(records)
statuses = [r["status"] for r in records]
assert "planned" in statuses and "infeasible" in statuses, statuses
for r in records:
    assert r["model"]["options"] == {"set": {"B": 1, "T": 8192}, "recipe": "bf16-master", "impl": "fused", "dp": 2,
                                     "zero": 1, "pp": 4, "microbatches": 8, "virtual_stages": 1}, r["model"]
    budget, planner = r["plan"]["budget_bytes"], r["plan"]["planner"]
    rc, doc = plan(planner, budget)
    if r["status"] == "planned":
        assert rc == 0, (planner, budget, rc)
        for k, v in r["predicted"].items():
            assert doc["predicted"][k] == v, (k, v, doc["predicted"][k])
        assert doc["predicted"]["peak_bytes"] == doc["pipeline"]["ranks"][doc["pipeline"]["worst_rank"]]["total_bytes"]
    else:
        assert rc == 3, (planner, budget, rc)
        least = r["minimum_budget_bytes"]
        assert least > budget
        rc_min, doc = plan(planner, least)
        assert rc_min == 0, (planner, least, rc_min)
        assert doc["predicted"]["peak_bytes"] <= least
        if planner == "sqrt":  # its schedule is the same at every budget: the least is exact
            assert plan(planner, least - 1)[0] == 3
PY
run report --runs pipe-sweep.jsonl
check "report shows each record's layout" 0 "options" \
    "B=1 T=8192 recipe=bf16-master impl=fused dp=2 zero=1 pp=4 microbatches=8 virtual_stages=1"

# exit 3: the worst rank cannot fit; each rank that does not is named
pipe_llama --pp 4 --microbatches 8 --budget 30G -o pipe-small.json
check "a budget below the first rank's static memory is infeasible" 3 \
    "is too small for pipeline rank 0 with planner dp" "is too small for pipeline rank 3"
check_that "nothing written when infeasible" test ! -e pipe-small.json
pipe_llama --pp 4 --microbatches 8 --budget 36G -o pipe-tight.json
check "a budget that holds only the middle ranks names the others" 3 "pipeline rank 0" "pipeline rank 3"
check_that "and not the middle ranks, which fit" bash -c '! grep -q "pipeline rank [12] " "$1"' _ "$work/err"

# read back: run reads the plan through, then refuses to execute a pipeline
run run pipe-llama.json --steps 1
check "run refuses a pipeline plan, having read it" 2 \
    "pipe-llama.json: model.options: the plan is the worst rank's of --pp 4 --microbatches 8 --virtual-stages 1" \
    "cannot run a pipeline"
run run pipe-llama-v2.json --steps 1
check "and an interleaved one" 2 "--virtual-stages 2" "cannot run a pipeline"
run plan --help
check "--help names the pipeline options" 0 "--pp N" "--microbatches M" "--virtual-stages V"

# --inference plans no pipeline; --svg draws the worst rank's first chunk
run plan "$root/models/llama-tiny.json" --pp 2 --budget 1G --inference
check "--inference refuses a pipeline layout" 2 "--inference takes no pipeline layout"
run plan "$root/models/llama-tiny.json" --pp 2 --budget 14000000 --svg pipe-tiny.svg -o pipe-tiny.json
check "--svg with --pp charts the worst rank's chunk" 0 "the worst (its microbatches in flight counted)"
check_that "a rank recomputes, so the baseline is not said to fit" bash -c '! grep -q "the baseline fits" "$1"' _ "$work/out"
check_that "the chart is drawn" grep -q "<svg" pipe-tiny.svg
check_that "its plan's schedule is of the worst rank's first chunk" python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
w = p["pipeline"]["ranks"][p["pipeline"]["worst_rank"]]["chunks"][0]
assert p["stages"] == w["end_stage"] - w["first_stage"] == len(p["stage_info"])
assert max(op.get("stage", 0) for op in p["schedule"]) == p["stages"] - 1' pipe-tiny.json
