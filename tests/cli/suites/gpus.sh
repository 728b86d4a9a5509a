# sweep --gpus N --device D ("Which layout?"): Llama-3-8B over 8 H100s lists the ZeRO stages
# best first, each row's figures are those `ckplan plan` predicts for that layout (an
# independent plan --json a layout, and plan --budget at the smallest budget of one that
# does not fit), the communication bytes follow from plan's per-rank shards, the global
# batch sets the microbatches, --csv parses, and options that make no sense are refused.

mkdir -p gpus-suite && cd gpus-suite || exit 1 # its own directory: no runs file may appear
llama="$root/tests/data/hf/llama-3-8b"
gpus_opts=(--seq 8192 --batch 1 --recipe bf16-master --device h100-80gb --impl fused)
# in a directory of its own: other suites leave the default runs file in the scratch one
mkdir -p gpus-fresh && cd gpus-fresh || exit 1
run sweep "$llama" "${gpus_opts[@]}" --gpus 8
check "sweep --gpus 8 ranks the layouts of 8 H100s" 0 "over 8 GPUs, NVIDIA H100 SXM 80 GB" \
    "dp=8 zero=2" "dp=8 zero=3" "dp=8 zero=1" "dp=8 zero=0" "no, static; needs" "Communication is not in it"
check_that "best first: ZeRO-2, 3 (as fast, more bytes), 1 (recomputes), 0 (static over budget)" \
    test "$(printf '%s\n' "$out" | grep -o 'dp=8 zero=[0-3] *[a-z]*' | tr -s ' ' | tr '\n' ';')" = \
    "dp=8 zero=2 yes;dp=8 zero=3 yes;dp=8 zero=1 yes;dp=8 zero=0 no;"
check_that "no runs file is written" test ! -e ckplan.runs.jsonl
cd "$work" || exit 1

run sweep "$llama" "${gpus_opts[@]}" --gpus 8 --csv
check "--csv" 0 "rank,layout,dp,zero,tp,sp,pp,status,static_bytes"
printf '%s\n' "$out" > gpus-8.csv
check_that "every layout tp x pp x dp = 8 once; each row is what plan predicts for its layout (a pipeline's step: M + pp - 1 microbatch times); ranked fits first, fastest, fewest bytes" \
    python3 - gpus-8.csv "$bin" "$llama" "${gpus_opts[@]}" <<'PY'
import csv, json, subprocess, sys
rows = list(csv.DictReader(open(sys.argv[1])))
binary, model, opts = sys.argv[2], sys.argv[3], sys.argv[4:]
assert [int(r["rank"]) for r in rows] == list(range(1, len(rows) + 1)), rows
want = {(t, p, 8 // t // p, z) for t in (1, 2, 4, 8) for p in (1, 2, 4, 8) if 8 % (t * p) == 0
        for z in range(4) if 8 // t // p > 1 or z == 0}
got = [(int(r["tp"]), int(r["pp"]), int(r["dp"]), int(r["zero"])) for r in rows]
assert sorted(got) == sorted(want) and len(got) == 28, got
assert all(r["sp"] == ("1" if int(r["tp"]) > 1 else "0") for r in rows), rows
assert sorted(int(r["zero"]) for r in rows if r["dp"] == "8") == [0, 1, 2, 3]

def layout(r, zero=None):
    a = ["--dp", r["dp"], "--zero", str(zero if zero is not None else r["zero"])]
    if int(r["tp"]) > 1:
        a += ["--tp", r["tp"], "--sp"]
    if int(r["pp"]) > 1:
        a += ["--pp", r["pp"], "--microbatches", r["microbatches"]]
    return a

def plan(r, *extra, zero=None):
    p = subprocess.run([binary, "plan", model, *opts, *layout(r, zero), *extra, "-o", "gpus-plan.json"],
                       capture_output=True, text=True)
    return p.returncode, p.stdout

for r in rows:
    rc, text = plan(r, "--json")
    m, pp = int(r["microbatches"]), int(r["pp"])
    assert m == 8 // int(r["dp"]), r
    if r["status"] == "fits":
        assert rc == 0, (r, rc)
        p = json.loads(text)["predicted"]
        assert int(r["static_bytes"]) == p["static_bytes"], (r, p)
        assert int(r["activation_bytes"]) == p["activation_peak_bytes"], (r, p)
        assert int(r["total_bytes"]) == p["peak_bytes"], (r, p)
        assert float(r["step_time_s"]) == (m + pp - 1) * p["time"], (r, p)
        assert float(r["overhead"]) == p["overhead"], (r, p)
    else:
        assert rc == 3 and r["status"] in ("infeasible", "static_over_budget"), (r, rc)
        need = int(r["min_budget_bytes"])
        assert plan(r, "--budget", str(need))[0] == 0 and plan(r, "--budget", str(need - 1))[0] == 3, r
        assert int(r["static_bytes"]) == json.load(open("gpus-plan.json"))["predicted"]["static_bytes"]
fit = [r for r in rows if r["status"] == "fits"]
assert rows[:len(fit)] == fit and [r["zero"] for r in rows if r["layout"].count("=") == 2] == ["2", "3", "1", "0"], rows
key = [(float(r["step_time_s"]), int(r["comm_bytes"])) for r in fit]
assert key == sorted(key), key
assert {r["pp"] for r in fit} >= {"2", "4", "8"} and {r["tp"] for r in fit} >= {"2", "4", "8"}, fit
PY
check_that "comm bytes: ring 2(N-1) gradient shards (ZeRO 0-2), 3/2 of that for ZeRO-3, from plan's shards of the rank's own layers; tensor and pipeline bytes from the s.b.h activation" \
    python3 - gpus-8.csv "$bin" "$llama" "${gpus_opts[@]}" <<'PY'
import csv, json, subprocess, sys
rows = list(csv.DictReader(open(sys.argv[1])))
binary, model, opts = sys.argv[2], sys.argv[3], sys.argv[4:]
config = json.load(open(model + "/config.json"))
sbh = 8192 * 1 * config["hidden_size"] * 2  # bf16
layers = config["num_hidden_layers"]
shards, checked = {}, set()

def plan(layout):
    return json.loads(subprocess.run([binary, "plan", model, *opts, *layout, "--json", "-o", "gpus-z.json"],
                                     capture_output=True, text=True, check=True).stdout)

for r in rows:
    dp, z, t, pp, m = (int(r[k]) for k in ("dp", "zero", "tp", "pp", "microbatches"))
    a = ["--dp", str(dp), "--zero", "3"] + (["--tp", str(t), "--sp"] if t > 1 else []) + \
        (["--pp", str(pp), "--microbatches", str(m)] if pp > 1 else [])
    key = (dp, t, pp)
    if key not in shards:  # the plan's rank (a pipeline's worst) at ZeRO-3: every tensor's 1/dp
        doc = plan(a)
        shards[key] = (doc["predicted"]["static"], doc.get("pipeline", {}).get("worst_rank", 0))
    shard, at_zero3 = shards[key]
    a[3] = str(z)
    worst = plan(a).get("pipeline", {}).get("worst_rank", 0) if r["status"] == "fits" else at_zero3
    if worst != at_zero3:  # another rank's nodes: its shards are not the ZeRO-3 plan's
        continue
    checked.add((t, pp))
    grads, params = shard["gradients"], shard["parameters"]
    assert grads == params  # bf16 both, all trainable
    g = int(r["comm_gradient_bytes"]); p = int(r["comm_parameter_bytes"])
    n = dp - 1
    assert g == {0: 2 * n * grads, 1: n * grads, 2: m * n * grads, 3: m * n * grads}[z], (r, grads)
    assert p == {0: 0, 1: n * params, 2: n * params, 3: 2 * m * n * params}[z], (r, params)
    # tensor parallelism: 4 ring all-reduces of s.b.h a layer and microbatch (6 when recomputed)
    tensor = layers // pp * m * 4 * 2 * (t - 1) * sbh // t
    tb = int(r["comm_tensor_bytes"])
    if r["status"] == "fits" and float(r["overhead"]) == 0:
        assert tb == tensor, (r, tensor)
    else:
        assert tensor <= tb <= tensor * 3 // 2, (r, tensor)
    # pipeline: the worst rank's boundary sends, forward and backward, a microbatch
    sends = 0 if pp == 1 else 2 - (worst == 0) - (worst == pp - 1)
    assert int(r["comm_pipeline_bytes"]) == m * sends * sbh // t, (r, worst)
    assert int(r["comm_bytes"]) == g + p + tb + int(r["comm_pipeline_bytes"]), r
assert {(2, 1), (1, 2), (1, 4), (1, 8), (2, 2)} <= checked, checked
PY

# the global batch: 32 sequences of 1 over 8 ranks are 4 microbatches a rank
run sweep "$llama" "${gpus_opts[@]}" --gpus 8 --global-batch 32 --csv
printf '%s\n' "$out" > gpus-32.csv
check_that "--global-batch 32: 4 times the microbatches and the time; ZeRO-2/3 and tensor parallelism communicate each, ZeRO-0/1 once" \
    python3 - gpus-8.csv gpus-32.csv <<'PY'
import csv, sys
one, four = ({r["layout"]: r for r in csv.DictReader(open(f))} for f in sys.argv[1:])
for k, r in four.items():
    z = int(r["zero"])
    if r["pp"] != "1":
        continue  # a pipeline plans for its microbatches in flight: not the same plan
    assert int(r["microbatches"]) == 32 // int(r["dp"]) == 4 * int(one[k]["microbatches"]), r
    assert r["status"] == one[k]["status"], r
    if r["status"] == "fits":
        assert abs(float(r["step_time_s"]) - 4 * float(one[k]["step_time_s"])) <= 1e-12 * float(r["step_time_s"])
    times = 4 if z >= 2 else 1
    assert int(r["comm_gradient_bytes"]) == times * int(one[k]["comm_gradient_bytes"]), (r, one[k])
    if r["status"] == "fits" and r["overhead"] == one[k]["overhead"] == "0":
        assert int(r["comm_tensor_bytes"]) == 4 * int(one[k]["comm_tensor_bytes"]), (r, one[k])
PY
run sweep "$llama" "${gpus_opts[@]}" --gpus 8 --global-batch 12
check "a global batch that dp x batch does not divide is listed as such" 0 "batch does not divide"
run sweep "$llama" --seq 8192 --recipe bf16-master --device h100-80gb --impl fused --gpus 8 --global-batch 16
check "--global-batch needs --batch" 2 "give --batch too"

# layouts the model refuses are rows with the reason, listed last, not errors: Llama-3-8B's 32
# heads and 32 layers do not divide by 3; a ckplan-model/1 file takes no --tp
run sweep "$llama" "${gpus_opts[@]}" --gpus 3 --global-batch 3 --csv
printf '%s\n' "$out" > gpus-3.csv
check "--gpus 3: tp=3 and pp=3 are refused rows" 0 "refused" "heads (H): 32 does not divide by --tp 3" \
    "32 layers (block instances) must divide into 3 chunks"
check_that "refused rows come last, with empty figures, the reason quoted" python3 - gpus-3.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r["layout"] for r in rows[-2:]] == ["dp=1 zero=0 pp=3", "dp=1 zero=0 tp=3 sp"], rows
assert all(r["status"] == "refused" and r["reason"] and not r["static_bytes"] for r in rows[-2:])
assert all(r["status"] != "refused" and not r["reason"] for r in rows[:-2]) and len(rows) == 6
PY
run sweep "$root/models/gpt2-tiny.json" --device h100-80gb --gpus 2
check "a model file: tp refused (a row), its pipeline planned" 0 "dp=1 zero=0 pp=2         yes" \
    "dp=1 zero=0 tp=2 sp      refused: " "apply to Hugging Face configs only"

# one GPU: the one layout, which shards nothing and sends nothing
run sweep "$root/models/gpt2-tiny.json" --device h100-80gb --gpus 1 --csv
check "--gpus 1 is the one-GPU layout" 0 "1,dp=1 zero=0,1,0,1,0,1,fits,"
check_that "one row, nothing communicated" test "$(printf '%s\n' "$out" | tail -n +2 | cut -d, -f16 | tr '\n' ' ')" = "0 "

# refusals
for opt in "--budgets 10G" "--run" "--planners dp" "--runs r.jsonl" "--steps 2" "--dp 8" "--zero 1" \
    "--fsdp full-shard" "--tp 2" "--sp" "--cp 2" "--pp 2" "--microbatches 4" "--virtual-stages 2"; do
    # shellcheck disable=SC2086
    run sweep "$llama" "${gpus_opts[@]}" --gpus 8 $opt
    check "--gpus refuses ${opt%% *}" 2 "it takes no ${opt%% *}"
done
run sweep "$llama" --seq 8192 --batch 1 --gpus 8
check "--gpus needs --device" 2 "--gpus needs --device NAME"
run sweep "$llama" "${gpus_opts[@]}" --csv --budgets 80G
check "--csv without --gpus" 2 "--csv is for --gpus N"
run sweep "$llama" "${gpus_opts[@]}" --gpus 0
check "--gpus 0" 2 "--gpus"
run sweep "$data/chain10.json" --device h100-80gb --gpus 2
check "a chain file has no layouts" 2 "chain10.json" "no static memory to shard"
run sweep --help
check "sweep --help explains --gpus" 0 "--gpus N" "--global-batch G" "Nothing is appended to a runs file"
