# Exit codes follow the documented table (README.md, docs/reliability.md) for every kind of
# refusal of every command (issue 24): 2 usage or input error, 3 budget infeasible, 1 a
# runtime failure (here: an output that cannot be written), each saying so on stderr (a
# "ckplan: " line, or the usage for a command line without its command or target). One line a case: the code, then the command line ($m a model, $p its plan, $g a
# Checkmate graph, $c a Hugging Face config, $no a folder that does not exist).
mkdir -p "$work/exit-codes" && cd "$work/exit-codes" || return
m="$root/models/gpt2-tiny.json" g="$data/diamond-graph.json" c="$root/models/hf/llama-tiny.json"
no="$work/exit-codes/no/such/dir"
printf '{"format": "ckplan-chain/1", "stages": [1,' > broken.json
"$bin" plan "$m" --budget 1000T -o p.json >/dev/null 2>&1
p=p.json
"$bin" run "$p" --steps 1 --runs r.jsonl >/dev/null 2>&1
while IFS='|' read -r want args; do
    case "$want" in ''|'#'*) continue ;; esac
    eval "set -- $args"
    run "$@"
    check "exit $want: ckplan $args" "$want" "ckplan"
done <<'TABLE'
# usage errors: 2
2| 
2|frobnicate
2|plan "$m"
2|plan --budget 1G
2|plan "$m" --budget 1G --frob
2|plan "$m" --budget 8X
2|plan "$g" --planner milp --min-budget
2|plan "$m" --planner every --min-budget --budget 1G
2|run
2|run "$p" --ranks 2 --svg x.svg
2|chain
2|import
2|import "$c" --dp 4 -o x.json
2|emit
2|emit pytorch "$p"
2|sweep "$m"
2|report --frob
2|profile
# input errors: 2
2|plan "$work/exit-codes/none.json" --budget 1G
2|plan broken.json --budget 1G
2|run none.json
2|run broken.json
2|chain broken.json
2|import broken.json -o x.json
2|emit hf broken.json
2|sweep broken.json --budgets 1G
2|report --runs none.jsonl
2|profile broken.json
2|plan "$m" --budget 1G -o "$m"
# budget infeasible: 3
3|plan "$m" --budget 1K
3|plan "$m" --budget 14M --planner sqrt
3|plan "$m" --inference --budget 1K
3|plan "$g" --budget 1
# runtime failures (an output that cannot be written): 1
1|plan "$m" --budget 1000T -o "$no/p.json"
1|chain "$m" -o "$no/c.json"
1|import "$c" -o "$no/m.json"
1|emit hf "$p" -o "$no/e.py"
1|run "$p" --steps 1 --runs "$no/r.jsonl"
1|sweep "$m" --budgets 1000T --runs "$no/r.jsonl"
1|report --runs r.jsonl --svg "$no"
TABLE
