# ckplan import writes every model option it takes into the model file, or refuses it (issue
# 24): for each option of `import --help` (every option it takes, whatever is added later),
# planning the imported file gives the figures of planning the config with the option, or
# import exits 2 naming the option. Each sample must change the figures, so that an option
# import drops cannot pass unseen.
mkdir -p "$work/import-options" && cd "$work/import-options" || return
config="$root/models/hf/llama-tiny.json"

# A value for each option (with what it needs beside it). An option missing here fails.
declare -A sample=(
    [set]="--set L=3" [seq]="--seq 32" [batch]="--batch 3" [recipe]="--recipe fp32"
    [optimizer]="--optimizer sgd" [impl]="--impl fused" [grads]="--grads held"
    [optimizer-step]="--optimizer-step for-loop" [grad-accum]="--grad-accum 4" [lora]="--lora 4"
    [attention]="--attention eager" [dp]="--dp 4 --zero 3" [zero]="--zero 3 --dp 4"
    [fsdp]="--fsdp full-shard --dp 4" [pp]="--pp 2" [microbatches]="--microbatches 4"
    [virtual-stages]="--virtual-stages 2 --pp 2 --microbatches 2 --set L=4" [tp]="--tp 2"
    [sp]="--sp --tp 2" [cp]="--cp 2" [partition-activations]="--partition-activations --tp 2"
)
# predicted FILE: a plan's figures, without the options it records.
predicted() { python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["predicted"], sort_keys=True))' "$1"; }

run plan "$config" --budget 1T -o plain.plan.json
check "import-options: the config plans without options" 0
plain=$(predicted plain.plan.json)
options=$("$bin" import --help | grep -oE -- '--[a-z][a-z-]*' | sort -u)
taken=0
for opt in $options; do
    name=${opt#--}
    [ "$name" = output ] || [ "$name" = help ] && continue
    run import "$config" "$opt" 1 -o probe.json
    case "$err" in *"unknown option '$opt'"*) continue ;; esac # a word of the help, no option
    taken=$((taken + 1))
    if [ -z "${sample[$name]+set}" ]; then
        rc=x; fail "import-options: $opt has no sample value in this suite: add one"
        continue
    fi
    # shellcheck disable=SC2086 # the sample is words
    run import "$config" ${sample[$name]} -o "imp-$name.json"
    if [ "$rc" = 2 ]; then
        check "import-options: $opt refused, named, never dropped" 2 "import: $opt cannot be written into a model file"
        check_that "import-options: a refused $opt writes no file" test ! -e "imp-$name.json"
        continue
    fi
    check "import-options: import $opt" 0
    # shellcheck disable=SC2086
    run plan "$config" ${sample[$name]} --budget 1T -o "cfg-$name.plan.json"
    check "import-options: the config plans with $opt" 0
    run plan "imp-$name.json" --budget 1T -o "imp-$name.plan.json"
    check "import-options: the file imported with $opt plans" 0
    want=$(predicted "cfg-$name.plan.json")
    check_that "import-options: the sample of $opt changes the figures" test "$want" != "$plain"
    check_that "import-options: planning the file imported with $opt gives the config's figures" \
        test "$(predicted "imp-$name.plan.json")" = "$want"
done
check_that "import-options: import takes the model options (found $taken)" test "$taken" -ge 20
