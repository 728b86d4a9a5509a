# report --svg DIR names each chart after its model, safely: whatever the model names
# ("../pwned", "a/b", "", ".hidden", controls, 300 characters, UTF-8, names that read alike),
# every chart lands inside DIR, one per model, with a plain name of its own, and the output
# says which chart is which model's.

mkdir -p charts-case/sub && cd charts-case/sub || return
python3 - <<'EOF'
import json
names = ["gpt2", "../pwned", "../../pwned2", "", "a/b", "a:b", "a\\b", ".hidden", "..", ".", "-rf",
         "/tmp/abs", "esc\x1b[2J", "tab\tx", "x" * 300, "x" * 299 + "y", "caf\u00e9", "\u65e5\u672c",
         "A", "a", "a_b", "c1\u009b"]
with open("names.json", "w") as f:
    json.dump(names, f)
with open("runs.jsonl", "w") as f:
    for i, n in enumerate(names):
        for planner in ("dp", "sqrt"):
            f.write(json.dumps({"format": "ckplan-run/1", "status": "planned", "time": "2026-11-29T21:08:31Z",
                "plan": {"sha256": "00", "planner": planner, "budget_bytes": 1000 + i},
                "model": {"path": "m.json", "sha256": "00", "name": n, "stages": 3},
                "predicted": {"activation_peak_bytes": 10 + i, "baseline_activation_peak_bytes": 99,
                              "static_bytes": 5, "time": 1.5, "baseline_time": 1.0, "overhead": 0.5}}) + "\n")
EOF
run report --runs runs.jsonl --svg out --csv
check "report --svg with hostile model names" 0
printf '%s\n' "$err" > chart-lines.txt
check_that "report --svg: one plain chart inside DIR per model, each line naming its model" python3 - <<'EOF'
import json, os, re, xml.etree.ElementTree as ET
names = json.load(open("names.json"))
files = os.listdir("out")
assert len(files) == len(names), (len(files), files)
assert len({f.lower() for f in files}) == len(files), "names differ only by case"
for f in files:
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*\.tradeoff\.svg", f), f
    assert len(f) < 120, f
    ET.parse(os.path.join("out", f))  # a whole, valid XML document
# nothing written anywhere else: only our inputs and DIR here, nothing one or two levels up
assert sorted(os.listdir(".")) == ["chart-lines.txt", "names.json", "out", "runs.jsonl"], os.listdir(".")
assert os.listdir("..") == ["sub"], os.listdir("..")
# every line: chart: out/FILE (model "NAME shown escaped"), one per model, all files named
shown = lambda n: re.sub(r"[\x00-\x1f\x7f]", lambda m: "\\x%02x" % ord(m.group()), n).replace("\x9b", "\\u009b")
lines = [l for l in open("chart-lines.txt", encoding="utf-8").read().splitlines() if l]
got = {}
for l in lines:
    m = re.fullmatch(r'chart: out/(\S+) \(model "(.*)"\)', l)
    assert m, l
    got[m.group(2)] = m.group(1)
assert sorted(got) == sorted(shown(n) for n in names), sorted(got)
assert sorted(got.values()) == sorted(files)
assert got["gpt2"] == "gpt2.tradeoff.svg" and got["a_b"] == "a_b.tradeoff.svg"
EOF
# the same names give the same files when run again
first=$(cat chart-lines.txt)
run report --runs runs.jsonl --svg out --csv
check_that "report --svg: chart names are the same on every run" test "$err" = "$first"
cd "$work" || return
