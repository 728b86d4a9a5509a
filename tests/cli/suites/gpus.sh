# sweep --gpus N --device D ("Which layout?"): Llama-3-8B over 8 H100s lists the ZeRO stages
# best first, each row's figures are those `ckplan plan` predicts for that layout (an
# independent plan --json a layout, and plan --budget at the smallest budget of one that
# does not fit), the communication bytes follow from plan's per-rank shards, the global
# batch sets the microbatches, --csv parses, and options that make no sense are refused.

mkdir -p gpus-suite && cd gpus-suite || exit 1 # its own directory: no runs file may appear
llama="$root/tests/data/hf/llama-3-8b"
gpus_opts=(--seq 8192 --batch 1 --recipe bf16-master --device h100-80gb)
run sweep "$llama" "${gpus_opts[@]}" --gpus 8
check "sweep --gpus 8 ranks the layouts of 8 H100s" 0 "over 8 GPUs, NVIDIA H100 SXM 80 GB" \
    "dp=8 zero=2" "dp=8 zero=3" "dp=8 zero=1" "dp=8 zero=0" "no, static; needs" "communication is not in it"
check_that "best first: ZeRO-2, 3 (as fast, more bytes), 1 (recomputes), 0 (static over budget)" \
    test "$(printf '%s\n' "$out" | grep -o 'dp=8 zero=[0-3] *[a-z]*' | tr -s ' ' | tr '\n' ';')" = \
    "dp=8 zero=2 yes;dp=8 zero=3 yes;dp=8 zero=1 yes;dp=8 zero=0 no;"
check_that "no runs file is written" test ! -e ckplan.runs.jsonl

run sweep "$llama" "${gpus_opts[@]}" --gpus 8 --csv
check "--csv" 0 "rank,layout,dp,zero,status,static_bytes"
printf '%s\n' "$out" > gpus-8.csv
for z in 0 1 2 3; do
    "$bin" plan "$llama" "${gpus_opts[@]}" --dp 8 --zero $z --json -o "gpus-plan-$z.json" \
        >"gpus-plan-$z.out" 2>/dev/null
    echo $? >"gpus-plan-$z.rc"
done
check_that "each row is what plan predicts for its layout; ranked fits first, fastest, fewest bytes" \
    python3 - gpus-8.csv "$bin" "$llama" "${gpus_opts[@]}" <<'PY'
import csv, json, subprocess, sys
rows = list(csv.DictReader(open(sys.argv[1])))
binary, model, opts = sys.argv[2], sys.argv[3], sys.argv[4:]
assert [int(r["rank"]) for r in rows] == [1, 2, 3, 4], rows
assert sorted(int(r["zero"]) for r in rows) == [0, 1, 2, 3] and {r["dp"] for r in rows} == {"8"}
for r in rows:
    z = int(r["zero"])
    rc = int(open(f"gpus-plan-{z}.rc").read())
    assert r["microbatches"] == "1"
    if r["status"] == "fits":
        assert rc == 0, (z, rc)
        p = json.load(open(f"gpus-plan-{z}.out"))["predicted"]
        assert int(r["static_bytes"]) == p["static_bytes"], (r, p)
        assert int(r["activation_bytes"]) == p["activation_peak_bytes"], (r, p)
        assert int(r["total_bytes"]) == p["peak_bytes"], (r, p)
        assert float(r["step_time_s"]) == p["time"] and float(r["overhead"]) == p["overhead"], (r, p)
    else:
        assert rc == 3 and r["status"] in ("infeasible", "static_over_budget"), (z, rc, r)
        need = int(r["min_budget_bytes"])
        at = lambda b: subprocess.run([binary, "plan", model, *opts, "--dp", "8", "--zero", str(z),
                                       "--budget", str(b), "-o", "gpus-min.json"],
                                      capture_output=True).returncode
        assert at(need) == 0 and at(need - 1) == 3, (z, need)
        assert int(r["static_bytes"]) == json.load(open("gpus-min.json"))["predicted"]["static_bytes"]
fit = [r for r in rows if r["status"] == "fits"]
assert rows[:len(fit)] == fit and [r["zero"] for r in rows] == ["2", "3", "1", "0"], rows
key = [(float(r["step_time_s"]), int(r["comm_bytes"])) for r in fit]
assert key == sorted(key), key
PY
check_that "comm bytes: ring 2(N-1) gradient shards (ZeRO 0-2), 3/2 of that for ZeRO-3, from plan's shards" \
    python3 - gpus-8.csv gpus-plan-3.out <<'PY'
import csv, json, sys
rows = {int(r["zero"]): r for r in csv.DictReader(open(sys.argv[1]))}
shard = json.load(open(sys.argv[2]))["predicted"]["static"]  # ZeRO-3: every tensor's 1/8
grads, params = shard["gradients"], shard["parameters"]
assert grads == params  # bf16 both, all trainable
for z in (0, 1, 2):
    assert int(rows[z]["comm_bytes"]) == 2 * 7 * grads, rows[z]
assert int(rows[3]["comm_bytes"]) == 7 * (2 * params + grads) == 3 * 7 * grads
for r in rows.values():
    assert int(r["comm_bytes"]) == int(r["comm_gradient_bytes"]) + int(r["comm_parameter_bytes"])
PY

# the global batch: 32 sequences of 1 over 8 ranks are 4 microbatches a rank
run sweep "$llama" "${gpus_opts[@]}" --gpus 8 --global-batch 32 --csv
printf '%s\n' "$out" > gpus-32.csv
check_that "--global-batch 32: 4 microbatches, 4 times the time; ZeRO-2/3 communicate each, 0/1 once" \
    python3 - gpus-8.csv gpus-32.csv <<'PY'
import csv, sys
one, four = ({r["layout"]: r for r in csv.DictReader(open(f))} for f in sys.argv[1:])
for k, r in four.items():
    z = int(r["zero"])
    assert r["microbatches"] == "4" and r["status"] == one[k]["status"], r
    if r["status"] == "fits":
        assert abs(float(r["step_time_s"]) - 4 * float(one[k]["step_time_s"])) <= 1e-12 * float(r["step_time_s"])
    times = 4 if z >= 2 else 1
    assert int(r["comm_gradient_bytes"]) == times * int(one[k]["comm_gradient_bytes"]), (r, one[k])
PY
run sweep "$llama" "${gpus_opts[@]}" --gpus 8 --global-batch 12
check "a global batch that dp x batch does not divide is listed as such" 0 "batch does not divide"
run sweep "$llama" --seq 8192 --recipe bf16-master --device h100-80gb --gpus 8 --global-batch 16
check "--global-batch needs --batch" 2 "give --batch too"

# one GPU: the one layout, which shards nothing and sends nothing
run sweep "$root/models/gpt2-tiny.json" --device h100-80gb --gpus 1 --csv
check "--gpus 1 is the one-GPU layout" 0 "1,dp=1 zero=0,1,0,fits,"
check_that "one row, nothing communicated" test "$(printf '%s\n' "$out" | tail -n +2 | cut -d, -f13 | tr '\n' ' ')" = "0 "

# refusals
for opt in "--budgets 10G" "--run" "--planners dp" "--runs r.jsonl" "--steps 2" "--dp 8" "--zero 1" \
    "--fsdp full-shard"; do
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
