# Models that use the ops of issue 11 (lora, qknorm, geglu, softcap, scale, and attention's
# head_dim, softmax_dtype and softcap): every planner's plan runs under --verify with
# measured peaks equal to predicted ones and the baseline's gradients bit for bit
# (verify_planners, from ops.sh, which is sourced before this file).

verify_planners lora "$data/lora-tiny.json"
verify_planners qknorm "$data/qknorm-tiny.json"
verify_planners geglu "$data/geglu-tiny.json"
verify_planners softcap "$data/softcap-tiny.json"
verify_planners scale "$data/scale-tiny.json"
