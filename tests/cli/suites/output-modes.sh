# Outputs keep what the user set (issue 24, class 3), for every command and every file
# output: a replaced file keeps its mode (0600 stays 0600); a read-only one (0444) is refused
# with exit 1, left byte for byte, unless `ckplan --force`, which replaces it keeping 0444;
# runs files are appended to under the same rule. Charts that report names inside --svg DIR
# replace a symbolic link planted there instead of writing through it (cli/files.c).

mkdir -p "$work/modes" && cd "$work/modes" || return
cp "$root/models/gpt2-tiny.json" tiny.json
mkdir -p hfdir && cp "$root/models/hf/llama-tiny.json" hfdir/config.json
"$bin" plan tiny.json --budget 1G -o plan.json >/dev/null 2>&1
"$bin" sweep tiny.json --budgets 20M,1G --planners dp --runs records.jsonl >/dev/null 2>&1

# replaced NAME OPT CMD...: CMD writing OPT's file over an existing one.
replaced() {
    local name=$1 opt=$2; shift 2
    echo old > out.file && chmod 600 out.file
    run "$@" "$opt" out.file
    check "$name $opt over a 0600 file" 0
    check_that "$name $opt: the replaced file is still 0600" test "$(stat -c %a out.file)" = 600
    check_that "$name $opt: it was replaced" bash -c '! grep -qx old out.file'
    echo old > out.file && chmod 444 out.file
    run "$@" "$opt" out.file
    check "$name $opt over a 0444 file: refused" 1 "out.file: the file is read-only (mode 0444)" "--force"
    check_that "$name $opt: the read-only file is as it was" grep -qx old out.file
    check_that "$name $opt: no temporary file left" bash -c '! ls -A | grep -q "^\.ckplan-"'
    run --force "$@" "$opt" out.file
    check "$name $opt over a 0444 file with --force" 0
    check_that "$name $opt --force: replaced, still 0444" \
        bash -c 'test "$(stat -c %a out.file)" = 444 && ! grep -qx old out.file'
    rm -f out.file
}
replaced "plan" -o plan tiny.json --budget 1G
replaced "plan" --svg plan tiny.json --budget 1G -o p2.json
replaced "chain" -o chain tiny.json
replaced "import" -o import hfdir
replaced "profile" -o profile tiny.json --steps 1
replaced "run" --svg run plan.json --steps 1 --runs r.jsonl
replaced "run" --trace run plan.json --steps 1 --runs r.jsonl
for target in hf fsdp megatron deepspeed; do
    replaced "emit $target" -o emit "$target" plan.json
done
replaced "emit torch" -o emit torch tiny.json

# appended NAME OPT CMD...: CMD appending a record to OPT's file.
appended() {
    local name=$1 opt=$2; shift 2
    : > runs.file && chmod 444 runs.file
    run "$@" "$opt" runs.file
    check "$name $opt to a 0444 runs file: refused" 1 "runs.file: the file is read-only (mode 0444)"
    check_that "$name $opt: the read-only runs file is as it was" test ! -s runs.file
    run --force "$@" "$opt" runs.file
    check "$name $opt to a 0444 runs file with --force" 0
    check_that "$name $opt --force: one record more, still 0444" \
        bash -c 'test "$(stat -c %a runs.file)" = 444 && test -s runs.file'
    rm -f runs.file
}
appended "run" --runs run plan.json --steps 1
appended "sweep" --runs sweep tiny.json --budgets 1G --planners dp

# report --svg DIR: a chart's name in DIR that is a link (to a file outside DIR, or dangling)
# is replaced by the chart; the file outside is untouched. Also a chart over a 0600 file.
mkdir -p charts
"$bin" report --runs records.jsonl --svg charts >/dev/null 2>&1
chart=$(cd charts && ls)
check_that "report --svg drew one chart" test -n "$chart"
for link in ../outside.txt "$PWD/outside.txt" ../nowhere.txt; do
    echo secret > outside.txt
    rm -f "charts/$chart" && ln -s "$link" "charts/$chart"
    run report --runs records.jsonl --svg charts
    check "report --svg DIR with a link to $link planted" 0
    check_that "report --svg DIR: the file outside DIR ($link) is untouched" grep -qx secret outside.txt
    check_that "report --svg DIR: no file made outside DIR through $link" test ! -e nowhere.txt
    check_that "report --svg DIR: the chart is a file of its own" \
        bash -c 'test -f "charts/$1" && test ! -L "charts/$1" && grep -q "<svg" "charts/$1"' _ "$chart"
done
chmod 600 "charts/$chart"
run report --runs records.jsonl --svg charts
check_that "report --svg DIR: a 0600 chart stays 0600" test "$(stat -c %a "charts/$chart")" = 600
cd "$work" || return
