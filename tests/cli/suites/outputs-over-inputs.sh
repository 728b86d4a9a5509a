# An output that is the same file as an input (the same path, a symbolic link to it, or a
# hard link) is refused with exit 2 and a message naming both, before anything is written:
# every command, every output against every input (ck_files_check_apart, cli/files.c).

mkdir -p apart && cd apart || return
cp "$data/chain10.json" chain.json
cp "$root/models/gpt2-tiny.json" tiny.json
echo '{"format": "ckplan-costs/1"}' > costs.json # read only after the check: any content
"$bin" plan chain.json --budget 1G -o plan.json >/dev/null 2>&1
"$bin" sweep chain.json --budgets 100,1G --planners dp --runs records.jsonl >/dev/null 2>&1
for f in chain.json tiny.json costs.json plan.json records.jsonl; do cp "$f" "$f.before"; done

# refused NAME INPUT_FILE ROLE_OF_INPUT ROLE_OF_OUTPUT CMD...: CMD exits 2 naming both roles,
# and the input is byte for byte as it was.
refused() {
    local name=$1 input=$2 in_role=$3 out_role=$4; shift 4
    run "$@"
    check "$name: refused" 2 "is the same file as the input" "($in_role)" "($out_role)" "choose another output"
    check_that "$name: $input is unchanged" cmp "$input" "$input.before"
}
ln -sf chain.json chain-link.json
ln -f chain.json chain-hard.json
ln -sf costs.json costs-link.json
ln -sf tiny.json tiny-link.json
ln -f tiny.json tiny-hard.json

# plan: MODEL and --costs against -o and --svg (also the default -o, ckplan.plan.json)
refused "plan -o MODEL" chain.json MODEL -o plan chain.json --budget 1G -o chain.json
refused "plan -o a link to MODEL" chain.json MODEL -o plan chain.json --budget 1G -o chain-link.json
refused "plan --svg a hard link to MODEL" chain.json MODEL --svg plan chain.json --budget 1G -o p2.json --svg chain-hard.json
refused "plan -o a link to --costs" costs.json --costs -o plan tiny.json --budget 22M --costs costs.json -o costs-link.json
refused "plan --svg --costs" costs.json --costs --svg plan tiny.json --budget 22M --costs costs.json --svg costs.json
cp chain.json ckplan.plan.json; cp chain.json ckplan.plan.json.before
refused "plan of a model named as the default output" ckplan.plan.json MODEL -o plan ckplan.plan.json --budget 1G
check_that "no chart was drawn by a refused plan" test ! -e p2.json

# run: PLAN and the plan's model (found beside the plan) against --runs, --svg and --trace
refused "run --runs PLAN" plan.json PLAN --runs run plan.json --runs plan.json
ln -f plan.json plan-hard.json
ln -sf plan.json plan-link.json
refused "run --svg a hard link to PLAN" plan.json PLAN --svg run plan.json --runs r.jsonl --svg plan-hard.json
refused "run --trace a link to PLAN" plan.json PLAN --trace run plan.json --runs r.jsonl --trace plan-link.json
mkdir -p beside && cp chain.json beside/model.json && cp chain.json beside/model.json.before
(cd beside && "$bin" plan model.json --budget 1G -o plan.json >/dev/null 2>&1)
refused "run --runs the plan's model" beside/model.json "the plan's model" --runs run beside/plan.json --runs beside/model.json
ln -sf beside/model.json beside-model-link.json
refused "run --svg a link to the plan's model" beside/model.json "the plan's model" --svg run beside/plan.json --runs r.jsonl --svg beside-model-link.json
check_that "a refused run appends no record" test ! -e r.jsonl

# sweep: MODEL and --costs against --runs
refused "sweep --runs MODEL" chain.json MODEL --runs sweep chain.json --budgets 1G --runs chain.json
refused "sweep --runs a hard link to MODEL" chain.json MODEL --runs sweep chain.json --budgets 1G --runs chain-hard.json
refused "sweep --runs a link to --costs" costs.json --costs --runs sweep tiny.json --budgets 22M --costs costs.json --runs costs-link.json

# chain and profile: MODEL (and chain's --costs) against -o
refused "chain -o MODEL" chain.json MODEL -o chain chain.json -o chain.json
refused "chain -o a link to MODEL" chain.json MODEL -o chain chain.json -o chain-link.json
refused "chain -o --costs" costs.json --costs -o chain tiny.json --costs costs.json -o costs.json
refused "profile -o MODEL" tiny.json MODEL -o profile tiny.json --steps 1 -o tiny.json
refused "profile -o a link to MODEL" tiny.json MODEL -o profile tiny.json --steps 1 -o tiny-link.json
refused "profile -o a hard link to MODEL" tiny.json MODEL -o profile tiny.json --steps 1 -o tiny-hard.json

# report: --runs against the charts of --svg DIR (DIR/<model>.tradeoff.svg)
mkdir -p charts
ln -f records.jsonl charts/chain-10.tradeoff.svg
refused "report --svg DIR whose chart is a hard link to --runs" records.jsonl --runs "a chart of --svg" report --runs records.jsonl --svg charts
check_that "a refused report prints no table" test -z "$out"
cp records.jsonl charts/kept.jsonl; cp records.jsonl charts/kept.jsonl.before
ln -sf kept.jsonl charts/chain-10.tradeoff.svg
refused "report --svg DIR whose chart is a link to --runs" charts/kept.jsonl --runs "a chart of --svg" \
    report --runs charts/kept.jsonl --svg charts

# Two outputs of one command that are one file: the second would overwrite the first,
# whether the file exists yet or not.
# clash NAME CMD...: CMD exits 2 naming both outputs, and nothing new is written.
clash() {
    local name=$1; shift
    ls -A > "$work/before.ls"
    run "$@"
    check "$name: refused" 2 "are the same file: one would overwrite the other"
    check_that "$name: nothing written" bash -c 'ls -A | cmp -s - "$1"' _ "$work/before.ls"
}
clash "plan -o and --svg one new name" plan chain.json --budget 1G -o both.out --svg both.out
clash "plan -o and --svg one existing file" plan chain.json --budget 1G -o plan.json --svg plan.json
ln -sf plan.json plan-link.json
clash "plan --svg a link to -o" plan chain.json --budget 1G -o plan.json --svg plan-link.json
clash "run --svg and --trace one new name" run plan.json --steps 1 --runs r.jsonl --svg t.out --trace t.out
clash "run --runs and --trace one file" run plan.json --steps 1 --runs records.jsonl --trace records.jsonl
check_that "records.jsonl is unchanged" cmp records.jsonl records.jsonl.before

# Not refused: outputs that are not regular files, and different files with equal content.
run plan chain.json --budget 1G -o /dev/null --svg /dev/null
check "outputs on /dev/null are not inputs" 0
cp chain.json copy.json
run plan chain.json --budget 1G -o copy.json
check "an output with the same content as the input, but another file, is written" 0 "plan written to copy.json"

cd "$work" || return

# The class, generated: every command, each output it writes aimed at each file it reads,
# as that file's own path, a symbolic link to it and a hard link to it. The files read
# include those a command finds itself: a model given as a directory is read from its
# config.json, a plan's model and costs file are read by run and emit.
mkdir -p "$work/apart-matrix" && cd "$work/apart-matrix" || return
mkdir -p hfdir && cp "$root/models/hf/llama-tiny.json" hfdir/config.json
cp "$root/models/gpt2-tiny.json" tiny.json
"$bin" profile tiny.json --steps 1 -o costs.json >/dev/null 2>&1
"$bin" plan tiny.json --costs costs.json --budget 1G -o plan-c.json >/dev/null 2>&1
"$bin" plan hfdir --budget 1G -o plan-d.json >/dev/null 2>&1
for f in hfdir/config.json tiny.json costs.json plan-c.json plan-d.json; do cp "$f" "$f.before"; done

# apart NAME "FILE:ROLE ..." "OUTPUT ..." CMD...: CMD with each OUTPUT option aimed at each
# FILE (and a link and a hard link to it) exits 2 naming ROLE and the option, FILE unchanged.
apart() {
    local name=$1 inputs=$2 outputs=$3 opt input file role target; shift 3
    for opt in $outputs; do
        for input in $inputs; do
            file=${input%%:*} role=${input#*:} role=${role//_/ }
            ln -sf "$PWD/$file" link.out
            ln -f "$file" hard.out
            for target in "$file" link.out hard.out; do
                run "$@" "$opt" "$target"
                check "$name $opt $target ($file, $role): refused" 2 "($role)" "($opt)"
                check_that "$name $opt $target: $file is unchanged" cmp "$file" "$file.before"
            done
        done
    done
}
apart "plan DIR" "hfdir/config.json:MODEL" "-o --svg" plan hfdir --budget 1G
apart "plan --costs" "tiny.json:MODEL costs.json:--costs" "-o --svg" plan tiny.json --costs costs.json --budget 1G
apart "chain DIR" "hfdir/config.json:MODEL" "-o" chain hfdir
apart "chain --costs" "tiny.json:MODEL costs.json:--costs" "-o" chain tiny.json --costs costs.json
apart "sweep DIR" "hfdir/config.json:MODEL" "--runs" sweep hfdir --budgets 1G --planners dp
apart "sweep --costs" "tiny.json:MODEL costs.json:--costs" "--runs" sweep tiny.json --costs costs.json --budgets 1G --planners dp
apart "import DIR" "hfdir/config.json:CONFIG" "-o" import hfdir
apart "profile DIR" "hfdir/config.json:MODEL" "-o" profile hfdir --steps 1
apart "run" "plan-c.json:PLAN tiny.json:the_plan's_model costs.json:the_plan's_costs" "--runs --svg --trace" run plan-c.json --steps 1
apart "run, a model directory" "plan-d.json:PLAN hfdir/config.json:the_plan's_model" "--runs --trace" run plan-d.json --steps 1
for target in hf fsdp megatron deepspeed; do
    apart "emit $target" "plan-c.json:PLAN tiny.json:the_plan's_model costs.json:the_plan's_costs" "-o" emit "$target" plan-c.json
done
apart "emit hf, a model directory" "plan-d.json:PLAN hfdir/config.json:the_plan's_model" "-o" emit hf plan-d.json
apart "emit torch" "tiny.json:MODEL plan-c.json:--plan" "-o" emit torch tiny.json --plan plan-c.json
apart "emit torch DIR" "hfdir/config.json:MODEL" "-o" emit torch hfdir
cd "$work" || return
