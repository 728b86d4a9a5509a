# moe, Mixtral's sparse mixture-of-experts block, in a 2-layer tiny Mixtral-like model
# (rmsnorm, linear, rope, attention, moe): every planner's plan runs under --verify with
# measured peaks equal to predicted ones, and the chain's MoE stages save what a hand count
# of Hugging Face's eager autograd gives.

. "$here/verify_planners.sh"

verify_planners moe "$data/moe-tiny.json"

# Stage hN.norm2..res2 at op granularity saves norm2's rstd (f32 per row), moe's input and
# what moe keeps (docs/model-format.md, section 3), and the stage's output; its input, res1,
# is held already. e = 4 (f32), N = B*T rows, R = N*K routed rows.
run chain "$data/moe-tiny.json" --granularity op -o moe-chain.json
check "moe: the tiny model's chain derives" 0
check_that "moe: each MoE stage saves the hand count" \
    python3 - "$data/moe-tiny.json" moe-chain.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["dims"]
N, C, E, K, F = d["B"] * d["T"], d["C"], d["E"], d["K"], d["F"]
R, e = N * K, 4
rstd = 4 * N
moe_input = e * N * C
per_row = N * (4 * E + 8 * K + 4 * K + 4)    # probs, top-k indices, top-k probs, their sum
# (row, k) int64, weight, x, 4 of F, w2 out, and w2 out weighted (index_add_'s source)
per_routed = R * (16 + e * (1 + C + 4 * F + C + C))
out = e * N * C
want = rstd + moe_input + per_row + per_routed + out
stages = {s["name"]: s for s in json.load(open(sys.argv[2]))["stages"]}
for layer in range(d["L"]):
    got = stages["h.%d.norm2..h.%d.res2" % (layer, layer)]["saved_bytes"]
    assert got == want, (layer, got, want)
PY

# The same model with more experts than rows can reach (E = 8, K = 1) still runs: experts
# that no row picks are skipped, and their gradients stay zero.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["dims"]["E"]=8; d["dims"]["K"]=1; d["dims"]["B"]=1; d["dims"]["T"]=2; json.dump(d, open(sys.argv[2], "w"))' \
    "$data/moe-tiny.json" moe-sparse.json
run plan moe-sparse.json --budget 1000T -o moe-sparse-plan.json
check "moe: a model with idle experts plans" 0
run run moe-sparse-plan.json --verify --steps 2 --runs moe-sparse.jsonl --quiet
check "moe: a model with idle experts passes --verify" 0

# Mixtral's config imported in f32 under hf: transformers 5's grouped_mm experts, whose
# backward runs in phases (planner/op's ck_phase: each makes its gradients and frees what
# it read last). Under PyTorch 2's lifetimes each phase makes its parameters' gradients; with
# two micro-steps it adds temporaries into them; with .grad buffers held, temporaries too.
run import "$root/models/hf/mixtral-tiny.json" --seq 16 --recipe fp32 -o moe-grouped.json
check "moe: Mixtral's config imports in f32" 0
verify_planners moe-grouped moe-grouped.json --may-store-all
verify_planners moe-grouped-accum moe-grouped.json --may-store-all --grad-accum 2
verify_planners moe-grouped-held moe-grouped.json --may-store-all --grads held
