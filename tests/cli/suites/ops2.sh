# Models that use the ops of issue 11 (lora, qknorm, geglu, softcap, scale, and attention's
# head_dim, softmax_dtype and softcap): every planner's plan runs under --verify with
# measured peaks equal to predicted ones and the baseline's gradients bit for bit
# (verify_planners, from ops.sh, which is sourced before this file).

verify_planners lora "$data/lora-tiny.json"
verify_planners qknorm "$data/qknorm-tiny.json"
verify_planners geglu "$data/geglu-tiny.json"
verify_planners softcap "$data/softcap-tiny.json"
verify_planners scale "$data/scale-tiny.json"
verify_planners attn-softcap "$data/attn-softcap-tiny.json"
verify_planners attn-softcap-flash "$data/attn-softcap-flash-tiny.json"

# Eager attention's saved scores, from the plan's replayed stage sizes: softcap keeps its
# tanh, one more [B,H,T,T] f32 tensor per layer (B=2, H=4, T=8: 2048 bytes) than the same
# attention without it; with f32 activations the f32 softmax is the one copy of the
# probabilities, so softmax_dtype f32 changes nothing.
ops2_edit() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); a=d["blocks"]["layer"]["nodes"][3]; exec(sys.argv[3]); json.dump(d, open(sys.argv[2], "w"))' "$data/attn-softcap-tiny.json" "$@"; }
ops2_edit ops2-nocap.json "del a['softcap']"
ops2_edit ops2-nof32.json "del a['softmax_dtype']"
stage_saved() { json_get "$1" '["stages"][1]["saved_bytes"]'; }
run chain "$data/attn-softcap-tiny.json" -o ops2-cap.chain.json
run chain ops2-nocap.json -o ops2-nocap.chain.json
run chain ops2-nof32.json -o ops2-nof32.chain.json
check_that "attention softcap keeps B*H*T*T*4 = 2048 bytes more per layer" \
    test "$(( $(stage_saved ops2-cap.chain.json) - $(stage_saved ops2-nocap.chain.json) ))" = 2048
check_that "attention softmax_dtype f32 on f32 activations keeps the same bytes" \
    test "$(stage_saved ops2-cap.chain.json)" = "$(stage_saved ops2-nof32.chain.json)"
# bf16 activations without dropout: the f32 softmax output (4 bytes a score) and its bf16
# cast (2) where bf16 probabilities alone (2) were kept: 4*512 = 2048 bytes more per layer.
ops2_edit ops2-bf16-f32.json "d['dtype'] = 'bf16'; del a['dropout']"
ops2_edit ops2-bf16.json "d['dtype'] = 'bf16'; del a['dropout']; del a['softmax_dtype']"
run chain ops2-bf16-f32.json -o ops2-bf16-f32.chain.json
run chain ops2-bf16.json -o ops2-bf16.chain.json
check_that "attention softmax_dtype f32 on bf16 keeps 4*B*H*T*T bytes more per layer" \
    test "$(( $(stage_saved ops2-bf16-f32.chain.json) - $(stage_saved ops2-bf16.chain.json) ))" = 2048
