# run --ranks N over OpenMPI (docs/parallel.md, "Running it"): a small mlp-deep planned to
# checkpoint at --dp 2 and 4 with each ZeRO stage runs on N processes, every rank's tracked
# peak its predicted peak to the byte and the parameters the one-process run's bit for
# bit; a wrong --ranks, a tampered plan, a rank that fails or is killed, a missing mpirun
# or worker each end with their exit code, never a hang.

worker="$(dirname "$bin")/ckplan-rank"
ranks_supp="$data/lsan-openmpi.supp"
# The ranks under SAN=1: OpenMPI's own allocations are not ckplan's leaks (the file says
# which libraries); everything else stays reported. The suppressions match whole stacks:
# the slow unwinder walks through OpenMPI's frames, and its components stay loaded to the
# end so that their frames have names.
ranks_env=(ASAN_OPTIONS="fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
           LSAN_OPTIONS="suppressions=$ranks_supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
           OMPI_MCA_mca_base_component_disable_dlclose=1)
# The slow unwinder makes a rank under SAN=1 take seconds: of the runs that pass, only
# --dp 4 --zero 3 checks leaks (the executor's paths of every stage are leak-checked
# without MPI by tests/unit/test_shard.c); the others, and the killed one, check memory
# errors and undefined behaviour. The failing runs check leaks on their error paths.
no_leaks=(ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}")
run_ranks() { env "${ranks_env[@]}" "$bin" "$@" >"$work/out" 2>"$work/err"; rc=$?; out=$(cat "$work/out"); err=$(cat "$work/err"); }

mlp="$root/models/mlp-deep.json"
small=(--set W=66 --set L=6 --set IN=30) # tensors of 66 and 10 elements: shares with padding

# plan_checkpointing DP ZERO FILE: plans at the static memory plus 60% of the baseline's
# activations, so that the schedule recomputes.
plan_checkpointing() {
    run plan "$mlp" "${small[@]}" --budget 1000T --dp "$1" --zero "$2" --json
    local budget
    budget=$(printf '%s' "$out" | python3 -c 'import json,sys; p=json.load(sys.stdin)["predicted"]
print(p["static_bytes"] + p["baseline_activation_peak_bytes"] * 6 // 10)')
    run plan "$mlp" "${small[@]}" --budget "$budget" --dp "$1" --zero "$2" -o "$3"
}

# The rank table: every rank's measured static, activation and peak equal its predicted
# ones, and the predicted peak is the plan file's static plus activation figure.
check_rank_table() {
    printf '%s' "$out" > ranks-table.txt
    python3 - "$1" "$2" ranks-table.txt <<'PY'
import json, sys
plan, n = json.load(open(sys.argv[1])), int(sys.argv[2])
p = plan["predicted"]
rows = [l.split() for l in open(sys.argv[3]).read().splitlines() if l.split()[:1] and l.split()[0].isdigit()]
assert [int(r[0]) for r in rows] == list(range(n)), rows
for r in rows:
    ps, pa, pp, ms, ma, mp = map(int, r[1:7])
    assert (ms, ma, mp) == (ps, pa, pp), r
    assert ps == p["static_bytes"] and pp == ps + pa == p["peak_bytes"], (r, p)
PY
}

if [ ! -x "$worker" ] || ! command -v mpirun >/dev/null 2>&1; then
    rc=missing; out=""; err="$worker or mpirun is missing"
    fail "run --ranks needs OpenMPI and ckplan-rank: run 'make deps', then 'make ckplan-rank'"
else
    for n in 2 4; do
        for z in 0 1 2 3; do
            plan_checkpointing "$n" "$z" "ranks-$n-$z.json"
            check_that "--dp $n --zero $z: the plan recomputes" python3 -c '
import json, sys; s = json.load(open(sys.argv[1]))["schedule"]
assert any(a["op"] in ("F_ck", "F_none") for a in s), s' "ranks-$n-$z.json"
            if [ "$n-$z" = 4-3 ]; then
                run_ranks run "ranks-$n-$z.json" --ranks "$n" --verify --steps 1
            else
                env "${no_leaks[@]}" "$bin" run "ranks-$n-$z.json" --ranks "$n" --verify --steps 1 \
                    >"$work/out" 2>"$work/err"; rc=$?; out=$(cat "$work/out"); err=$(cat "$work/err")
            fi
            check "run --ranks $n --verify passes at --zero $z" 0 "$n ranks over MPI" \
                "every rank's tracked peak is its prediction to the byte" \
                "equal the one-process run's ($n microbatches, gradients averaged in rank order) bit for bit" \
                "verify: passed"
            check_that "--ranks $n --zero $z: every rank's peaks are the predicted ones to the byte" \
                check_rank_table "ranks-$n-$z.json" "$n"
        done
    done

    # The plan's path reaches the ranks after "--": a plan named like an option is the plan.
    cp ranks-2-1.json ./--verify
    env "${no_leaks[@]}" "$bin" run --ranks 2 --steps 1 -- --verify >"$work/out" 2>"$work/err"
    rc=$?; out=$(cat "$work/out"); err=$(cat "$work/err")
    check "a plan named --verify runs on the ranks as the plan" 0 "2 ranks over MPI"
    rm -f ./--verify

    run_ranks run ranks-2-3.json --ranks 4 --verify
    check "--ranks must be the plan's --dp" 2 "ranks-2-3.json: --ranks 4: the plan is one rank's of --dp 2" \
        "run it with --ranks 2"
    run_ranks run ranks-2-3.json --ranks 2 --svg ranks.svg
    check "--ranks writes no chart" 2 "--ranks writes no run record, chart or trace"

    python3 - ranks-4-3.json ranks-tampered.json <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
plan["predicted"]["peak_bytes"] += 8
json.dump(plan, open(sys.argv[2], "w"))
PY
    run_ranks run ranks-tampered.json --ranks 4 --verify --steps 1
    check "a tampered plan fails --verify" 1 "rank 0: predicted.peak_bytes: the plan file says" \
        "verify: FAILED"

    # every rank refuses what it cannot execute: the ranks agree and exit 2
    run plan "$root/models/gpt2-tiny.json" --budget 1000T --dp 2 --zero 2 -o ranks-tied.json
    run_ranks run ranks-tied.json --ranks 2 --steps 1
    check "tied parameters at ZeRO-2 are refused by the ranks" 2 "rank 0: ranks-tied.json:" \
        "lm_head's parameter is tied" "a rank failed (exit 2"
    ranks_env+=(CKPLAN_RUN_MEMORY=1K)
    run_ranks run ranks-2-0.json --ranks 2 --steps 1
    unset 'ranks_env[-1]'
    check "a rank's input error ends the job with exit 2" 2 "rank 0: ranks-2-0.json: running 2 ranks" \
        "--ranks runs no baseline" "a rank failed (exit 2"

    # The ranks share this machine: N of them need N times a rank's peak (static plus the
    # plan's activations; no baseline runs), refused one byte short of it, run at it; each
    # rank alone once checked only its own step beside a baseline, and started anyway.
    peak=$(json_get ranks-4-3.json '["predicted"]["peak_bytes"]')
    ranks_env+=(CKPLAN_RUN_MEMORY=$((4 * peak - 1)))
    run_ranks run ranks-4-3.json --ranks 4 --steps 1
    unset 'ranks_env[-1]'
    check "--ranks 4: the four ranks' memory together, one byte over what is allowed" 2 \
        "rank 0: ranks-4-3.json: running 4 ranks on this machine needs" "(4 x " \
        "--ranks runs no baseline" "CKPLAN_RUN_MEMORY allows" "fewer ranks"
    ranks_env+=(CKPLAN_RUN_MEMORY=$((4 * peak)))
    run_ranks run ranks-4-3.json --ranks 4 --steps 1
    unset 'ranks_env[-1]'
    check "--ranks 4: the four ranks run in exactly their memory together" 0 "4 ranks over MPI"

    # a rank killed in the middle of its steps: mpirun ends the others, run exits 1
    run plan "$mlp" --set L=8 --budget 1000T --dp 2 --zero 3 -o ranks-long.json
    ( env "${no_leaks[@]}" timeout 120 "$bin" run ranks-long.json --ranks 2 \
        --steps 1000 >ranks-kill.out 2>&1; echo $? >ranks-kill.rc ) &
    for _ in $(seq 100); do
        victim=$(pgrep -f "^$worker .* -- ranks-long.json$" | head -n 1)
        [ -n "$victim" ] && break
        sleep 0.1
    done
    sleep 0.5
    [ -n "$victim" ] && kill -9 "$victim"
    wait
    rc=$(cat ranks-kill.rc); out=$(cat ranks-kill.out); err=""
    check "a killed rank ends the job with exit 1, no hang" 1 "a rank was killed by signal 9"

    # SIGTERM to ckplan alone (not its process group) is passed on to mpirun, which ends the
    # ranks: exit 143 within seconds, not after the 1000 steps; and ckplan killed by SIGKILL
    # takes mpirun and the ranks with it (PR_SET_PDEATHSIG). Neither left any process.
    job_gone() { # within 10 s, no mpirun or rank of ranks-long.json is left
        for _ in $(seq 100); do
            pgrep -f "(^$worker |mpirun ).*ranks-long.json$" >/dev/null || return 0
            sleep 0.1
        done
        pkill -KILL -f "(^$worker |mpirun ).*ranks-long.json$"; return 1
    }
    for sig in TERM KILL; do
        env "${no_leaks[@]}" --default-signal=TERM,INT "$bin" run ranks-long.json --ranks 2 \
            --steps 1000 >ranks-sig.out 2>&1 &
        pid=$!
        for _ in $(seq 100); do
            pgrep -f "^$worker .* -- ranks-long.json$" >/dev/null && break
            sleep 0.1
        done
        sleep 0.5
        kill -"$sig" "$pid"; SECONDS=0
        wait "$pid"; rc=$?; out=$(cat ranks-sig.out); err=""
        took=$SECONDS
        if [ "$sig" = TERM ]; then
            check "SIGTERM to ckplan alone ends the ranks: exit 143" 143 "interrupted by SIGTERM"
            check_that "... within 10 s (took $took s)" test "$took" -le 10
        fi
        check_that "SIG$sig to ckplan leaves no mpirun or rank running" job_gone
    done
fi

# what is missing says how to get it
mkdir -p ranks-empty ranks-alone
ln -sf "$(command -v cat)" ranks-empty/cat # what `run` itself needs
run plan "$mlp" "${small[@]}" --budget 1000T --dp 2 --zero 1 -o ranks-any.json
PATH="$work/ranks-empty" run run "$work/ranks-any.json" --ranks 2
check "no mpirun: exit 2 saying to install it" 2 "OpenMPI's mpirun is not on PATH" "make deps"
cp "$bin" ranks-alone/ckplan
"$work/ranks-alone/ckplan" run "$work/ranks-any.json" --ranks 2 >"$work/out" 2>"$work/err"; rc=$?
out=$(cat "$work/out"); err=$(cat "$work/err")
check "no worker beside ckplan: exit 2 saying how to build it" 2 "ranks-alone/ckplan-rank is missing" \
    "make ckplan-rank"
