# Tensor, sequence and context parallelism (--tp, --sp, --cp): Llama-3-8B over tp 2 with
# sequence parallelism and ZeRO-1 over dp 4 per rank, its static memory against a count of
# the config's modules as Megatron splits them; what --tp 2 halves and what it leaves whole
# in a GPT-2-medium layer, against Korthikanti et al.'s terms; plans read back; refusals.

llama="$root/tests/data/hf/llama-3-8b"
gpt2="$root/tests/data/hf/gpt2-medium.json"
run plan "$llama" --seq 8192 --batch 1 --recipe bf16-master --tp 2 --sp --dp 4 --zero 1 \
    --device h100-80gb -o tp-llama.json
check "llama-3-8b --tp 2 --sp --dp 4 --zero 1 on h100-80gb plans" 0 \
    "layout: 4 data-parallel ranks, ZeRO-1" \
    "layout: 2 tensor-parallel ranks with sequence parallelism, 1 context-parallel rank: a rank runs 1/2 of the heads, MLP width and vocabulary, 1/2 of the sequence outside attention and the MLP" \
    "plan written to tp-llama.json"
check_that "the rank's static memory is Megatron's split of the config's modules, ZeRO-1 over 4" \
    python3 - tp-llama.json "$llama/config.json" <<'PY'
import json, sys
p, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
t, dp = 2, 4
C, H, K, F = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["intermediate_size"]
V, L, D = c["vocab_size"], c["num_hidden_layers"], c["hidden_size"] // c["num_attention_heads"]
# column-parallel q, k, v, gate, up and row-parallel o, down split by t; the norms whole;
# embed_tokens and lm_head (untied) by vocabulary
layer = (C * H * D + 2 * C * K * D + H * D * C + 3 * C * F) // t + 2 * C
n = 2 * V * C // t + L * layer + C
s = p["predicted"]["static"]
assert p["model"]["parameters"] == n, (p["model"]["parameters"], n)
assert s["parameters"] == 2 * n and s["gradients"] == 2 * n, s
assert s["optimizer_state"] == 8 * n // dp and s["master_weights"] == 4 * n // dp, s
assert s["gather_buffers"] == s["reduce_scatter_buffers"] == 0, s
assert sum(s.values()) == p["predicted"]["static_bytes"]
assert p["predicted"]["peak_bytes"] <= p["budget_bytes"]
o = p["model"]["options"]
assert (o["tp"], o["sp"], o["dp"], o["zero"]) == (2, True, 4, 1), o
assert "cp" not in o
PY

# One GPT-2-medium layer, eager attention, dropout on: --tp 2 halves what is inside
# attention and the MLP, 24sbh + 5as^2b of it, and leaves its input (2sbh) and the rest
# whole; --sp halves the rest too.
for opts in "" "--tp 2" "--tp 2 --sp"; do
    name=$(echo "tp-chain $opts" | tr -d ' -')
    run chain "$gpt2" --seq 1024 --batch 2 --attention eager --impl fused $opts -o "$name.json"
done
check_that "--tp 2 halves attention's and the MLP's activations; --sp the rest" \
    python3 - tpchain.json tpchaintp2.json tpchaintp2sp.json <<'PY'
import json, sys
one, tp, sp = ([s for s in json.load(open(f))["stages"] if s["name"] == "h.0"][0] for f in sys.argv[1:])
s, b, h, a = 1024, 2, 1024, 16
inside = 24 * s * b * h + 5 * a * s * s * b      # q, k, v, scores, MLP: split by t
outside = 10 * s * b * h + 16 * s * b            # norms' inputs and stats, dropout masks
assert one["saved_bytes"] == inside + outside, one["saved_bytes"]
assert tp["saved_bytes"] == inside // 2 + outside, tp["saved_bytes"]
assert sp["saved_bytes"] == (inside + outside) // 2, sp["saved_bytes"]
assert one["out_bytes"] == tp["out_bytes"] == 2 * sp["out_bytes"] == 2 * s * b * h
PY

# --cp 2: every activation's sequence halved; ZeRO shards over dp x cp
run plan "$llama" --seq 8192 --recipe bf16-master --tp 2 --cp 2 --dp 2 --zero 1 --device h100-80gb \
    -o tp-cp.json
check "--cp 2 plans and names the context-parallel ranks" 0 "2 context-parallel ranks" "1/2 of the sequence" \
    "ZeRO shards over the 4 data- and context-parallel ranks"
check_that "--cp 2 --dp 2 shards optimizer state as --dp 4 does, parameters as --tp 2 alone" \
    python3 - tp-cp.json tp-llama.json <<'PY'
import json, sys
cp, tp = (json.load(open(f))["predicted"]["static"] for f in sys.argv[1:])
assert cp["optimizer_state"] == tp["optimizer_state"] and cp["parameters"] == tp["parameters"], (cp, tp)
PY

# plans read back: run refuses what it cannot execute; emit takes a --tp 2 plan's options
run run tp-llama.json --steps 1
check "run refuses a tensor-parallel plan" 2 \
    "tp-llama.json: model.options: the plan is one rank's of --tp 2 --sp --cp 1" "cannot run tensor- or context-parallel layers"
llama_tiny="$root/models/hf/llama-tiny.json"
run plan "$llama_tiny" --budget 1000T --tp 2 -o tp-tiny.json
run emit torch "$llama_tiny" --plan tp-tiny.json -o tp-tiny.py
check "emit torch reads a --tp 2 plan back and emits the rank's model" 0
check_that "the emitted module has the rank's heads" grep -q '"heads": 2' tp-tiny.py
run emit torch "$llama_tiny" --tp 2 --sp -o tp-sp.py
check "emit torch refuses what exchanges activations" 2 "node embed exchanges activations with other ranks"

# refusals
run plan "$gpt2" --budget 1000T --sp
check "--sp needs --tp above 1" 2 "--sp: sequence parallelism splits over the tensor-parallel ranks: it needs --tp 2 or more, got --tp 1"
run plan "$gpt2" --budget 1000T --tp 3
check "--tp must divide the heads" 2 "gpt2-medium.json: heads (H): 16 does not divide by --tp 3"
run plan "$gpt2" --budget 1000T --tp 2 --sp --seq 1001
check "--sp must divide the sequence" 2 "the sequence (T, --seq): 1001 does not divide by --tp under --sp 2"
run plan "$root/models/gpt2-tiny.json" --budget 1000T --tp 2
check "model files refuse --tp" 2 "--tp, --sp and --cp apply to Hugging Face configs only"
run plan --help
check "--help names --tp, --sp and --cp" 0 "--tp N" "--sp " "--cp N"

# profile executes one tensor-parallel rank's layers; its costs are keyed by --tp
run profile "$llama_tiny" --tp 2 --steps 1 -o tp-costs.json
check "profile runs one --tp 2 rank's layers" 0 "costs written to tp-costs.json"
run plan "$llama_tiny" --tp 2 --costs tp-costs.json --budget 1000T -o tp-costs-plan.json
check "a --tp 2 plan takes --tp 2 costs" 0
run plan "$llama_tiny" --costs tp-costs.json --budget 1000T -o tp-costs-whole.json
check "the whole model refuses one rank's costs" 2 "measured with the model options 'tp=2', planning with '(none)'"
