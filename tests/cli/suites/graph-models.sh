# Models planned node by node (--granularity node, issue 13 item 1): `chain` writes a
# model's training step as a graph that `plan` reads; `plan MODEL --granularity node` plans
# that graph with the static memory beside it, and its plan replays valid under the
# independent replay of tests/cli/graph_replay.py and under `ckplan run`, which loads the
# model again with the plan's options. Commands that execute chains refuse node granularity.

mkdir -p graph-models && cd graph-models || return
greplay() { python3 "$here/graph_replay.py" "$@"; }
json_num() { json_get "$@" | cut -d. -f1; }

for m in gpt2-tiny llama-tiny mlp-deep; do
    model=$root/models/$m.json
    run chain "$model" --granularity node -o "$m.graph.json"
    check "$m: chain --granularity node writes its graph" 0
    run plan "$m.graph.json" --min-budget
    graph_min=$out
    run plan "$model" --granularity node --min-budget
    check "$m: the node-granularity model has a smallest budget" 0
    model_min=$out
    run plan "$model" --granularity node --budget 1T --planner none -o "$m.none.json"
    static=$(json_num "$m.none.json" '["predicted"]["static_bytes"]')
    base=$(json_num "$m.none.json" '["predicted"]["baseline_activation_peak_bytes"]')
    check_that "$m: its smallest budget is the graph's plus the static memory" \
        test "$model_min" = "$((graph_min + static))"
    budget=$((static + (base + graph_min) / 2))
    run plan "$model" --granularity node --budget "$budget" -o "$m.plan.json"
    check "$m: planned half-way between its smallest budget and the baseline" 0 "planner fast" \
        "static memory"
    check_that "$m: ... a graph plan of granularity node" \
        test "$(json_get "$m.plan.json" '["details"]["granularity"]')" = node
    check_that "$m: ... which the independent replay confirms on the written graph" \
        greplay "$m.plan.json" "$m.graph.json"
    check_that "$m: ... within the budget, recomputing" \
        test "$(json_get "$m.plan.json" '["details"]["recomputes"]')" -gt 0
    run run "$m.plan.json"
    check "$m: run loads the model again and replays the plan" 0 "replayed, not executed"
done

# The model's options travel with the plan: run loads the model as it was planned.
run plan "$root/models/gpt2-tiny.json" --granularity node --seq 32 --batch 2 --budget 1T -o opts.json
check "a node plan with model options" 0
check_that "... records them" test "$(json_get opts.json '["model"]["options"]["set"]["T"]')" = 32
run run opts.json
check "... and run replays it against the model loaded with them" 0 "replayed, not executed"
python3 - opts.json opts-static.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["predicted"]["static_bytes"] += 1
p["predicted"]["peak_bytes"] += 1
p["predicted"]["baseline_peak_bytes"] += 1
json.dump(p, open(sys.argv[2], "w"))
PY
run run opts-static.json
check "a node plan whose static memory is not the model's is refused" 1 "predicted.static_bytes" \
    "the model's graph leaves out"

run plan "$root/models/gpt2-tiny.json" --granularity node --min-budget
tiny_min=$out
run plan "$root/models/gpt2-tiny.json" --granularity node --budget 1M
check "below the static memory a node plan is infeasible, naming the smallest budget" 3 \
    "smallest feasible budget: $tiny_min bytes"
run plan "$root/models/gpt2-tiny.json" --granularity node --budget 1T --slots 10
check "--slots does not apply to node granularity" 2 "--slots does not apply to --granularity node"
run plan "$data/chain10.json" --granularity node --budget 1T
check "a chain file has no nodes to plan" 2 "--granularity node applies to model files"
for cmd in sweep profile; do
    case $cmd in
    sweep) run sweep "$root/models/gpt2-tiny.json" --granularity node --budgets 16M,32M ;;
    profile) run profile "$root/models/gpt2-tiny.json" --granularity node --steps 1 ;;
    esac
    check "$cmd refuses --granularity node by name" 2 "--granularity node: only 'ckplan plan' and 'ckplan chain'"
done
cd "$work" || exit 1
