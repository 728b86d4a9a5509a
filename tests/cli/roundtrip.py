#!/usr/bin/env python3
"""roundtrip.py FAMILY CKPLAN ROOT: whatever ckplan writes, ckplan reads back.

For every input of a family, taken up to and past the limits, ckplan must either refuse
it where it enters (exit 2, with a message naming the limit) or accept it, and then every
file it writes must be plain JSON (no null where a number belongs, every byte count a
whole number below 2^53, the largest integer a JSON number keeps exactly) and read back:
`run` reads each plan (CKPLAN_RUN_MEMORY=1 stops it just after it has read the plan,
derived the model again and replayed the schedule), `plan` reads each chain (and `chain`
writes it again byte for byte), `report` reads every record of each runs file. Where
the limit can be computed here independently, the family also checks that exactly the
inputs within it are accepted.

Families: budgets, rates, dims, chains, minimums, times, costs, seeds. Runs in the current
directory; prints each violation and exits 1 if there is any.
"""
import hashlib
import json
import os
import random
import re
import subprocess
import sys

LIMIT = 2**53
SIZE_LIMIT_SAYS = "below 2^53 bytes (8 PiB)"
TIME_LIMIT_SAYS = "at most 1e+100"
MAX_TIME = 1e100
PLANNERS = ["dp", "revolve", "chen", "sqrt", "none"]
problems = []
CKPLAN = ROOT = None


def ck(*args, env=None):
    full_env = dict(os.environ, **(env or {}))
    p = subprocess.run([CKPLAN, *map(str, args)], capture_output=True, text=True, env=full_env)
    return p.returncode, p.stdout + p.stderr


def problem(what, said=""):
    problems.append(f"{what}{': ' + said[:400] if said else ''}")


def numbers_exact(path, doc, where=""):
    """Every value is present (no null) and every byte count a whole number below 2^53."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k.endswith("bytes") and not (isinstance(v, (int, float)) and float(v).is_integer()
                                            and 0 <= v < LIMIT):
                problem(f"{path}: {where}{k} is {v!r}, not a byte count below 2^53")
            numbers_exact(path, v, f"{where}{k}.")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            numbers_exact(path, v, f"{where}{i}.")
    elif doc is None:
        problem(f"{path}: {where.rstrip('.')} is null (a number JSON cannot hold)")


def load_json(path):
    with open(path) as f:
        return json.load(f)


def plan_reads_back(path):
    numbers_exact(path, load_json(path))
    rc, said = ck("run", path, "--runs", "never.jsonl", env={"CKPLAN_RUN_MEMORY": "1"})
    if rc != 2 or "running the baseline next to the plan needs" not in said:
        problem(f"run does not read back the plan {path} (exit {rc})", said)


def chain_reads_back(path):
    """path: a chain file that ckplan wrote."""
    numbers_exact(path, load_json(path))
    rc, said = ck("chain", path, "-o", "again.chain.json")
    if rc != 0 or open(path, "rb").read() != open("again.chain.json", "rb").read():
        problem(f"chain does not write {path} again as it was (exit {rc})", said)
    rc, said = ck("plan", path, "--budget", LIMIT - 1, "-o", "from-chain.plan.json")
    if rc != 0:
        problem(f"plan does not read the chain {path} (exit {rc})", said)
    else:
        plan_reads_back("from-chain.plan.json")


def runs_read_back(path, expected):
    lines = [line for line in open(path) if line.strip()]
    for line in lines:
        numbers_exact(path, json.loads(line))
    rc, said = ck("report", "--runs", path, "--json")
    rows = json.loads(said) if rc == 0 else []
    if rc != 0 or "skipped" in said or len(rows) != expected or len(lines) != expected:
        problem(f"report does not read every record of {path} back ({len(lines)} lines, "
                f"{expected} expected, exit {rc})", said)


def refused(what, rc, said, *fragments):
    if rc != 2 or not any(f in said for f in fragments):
        problem(f"{what}: expected exit 2 naming the limit ({' or '.join(fragments)}), got exit {rc}",
                said)


def plans_everywhere(model, budgets, *options, planners=PLANNERS):
    """Plans model with each planner at each budget; each plan written must read back."""
    for planner in planners:
        for budget in budgets:
            rc, said = ck("plan", model, "--budget", budget, "--planner", planner, *options,
                          "-o", "p.plan.json")
            given = re.search(r"budget [^(]*\((\d+) bytes\)", said)
            if rc == 0 and (not given or load_json("p.plan.json")["budget_bytes"] != int(given[1])):
                problem(f"the plan does not hold the budget {budget} given", said)
            if rc == 0:
                plan_reads_back("p.plan.json")
            elif rc != 3:
                problem(f"plan {model} --budget {budget} --planner {planner} {options}: exit {rc}", said)


def sweep_reads_back(model, budgets, n_budgets, *options, exact=None):
    """Sweeps model at budgets with every planner; report must read every record back, and
    the records hold the budgets `exact` (bytes) when given."""
    if os.path.exists("s.jsonl"):
        os.remove("s.jsonl")
    rc, said = ck("sweep", model, "--budgets", budgets, "--planners", ",".join(PLANNERS),
                  *options, "--runs", "s.jsonl")
    if rc != 0:
        problem(f"sweep {model} --budgets {budgets} {options}: exit {rc}", said)
    else:
        runs_read_back("s.jsonl", n_budgets * len(PLANNERS))
        held = {json.loads(line)["plan"]["budget_bytes"] for line in open("s.jsonl")}
        if exact is not None and held != set(exact):
            problem(f"sweep --budgets {budgets} recorded the budgets {sorted(held)}, not {exact}")


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


# ---- families -------------------------------------------------------------------------

def family_budgets():
    """Budgets up to and past 2^53, on a model and on a chain file."""
    accepted = ["1", "20M", "8191T", "8191.5T", "9007.199254740991TB", str(LIMIT - 1)]
    past = [str(LIMIT), "8192T", "9000T", "9007.199254740992TB", str(2**64 - 1)]
    for model in (f"{ROOT}/models/gpt2-tiny.json", f"{ROOT}/tests/cli/data/chain10.json"):
        plans_everywhere(model, accepted)
        for budget in past:
            rc, said = ck("plan", model, "--budget", budget, "-o", "never.plan.json")
            refused(f"plan --budget {budget}", rc, said, SIZE_LIMIT_SAYS)
            rc, said = ck("sweep", model, "--budgets", f"1:{budget}:3", "--runs", "never.jsonl")
            refused(f"sweep --budgets 1:{budget}:3", rc, said, SIZE_LIMIT_SAYS)
        low = 8191 << 40
        sweep_reads_back(model, f"8191T:{LIMIT - 1}:3", 3,
                         exact=[low, low + (LIMIT - 1 - low) // 2, LIMIT - 1])
        sweep_reads_back(model, f"1,20M,8191.5T,{LIMIT - 1}", 4,
                         exact=[1, 20 << 20, 8191.5 * 2**40, LIMIT - 1])
    if os.path.exists("never.jsonl"):
        problem("a refused sweep appended records")


def family_rates():
    """--gemm-flops and --mem-bandwidth from 1e-300 to the largest double."""
    model = f"{ROOT}/models/gpt2-tiny.json"
    rates = ["1e-300", "1e-95", "1e-9", "1", "1e11", "1e300", "1.7976931348623157e308"]
    for gemm in rates:
        for bandwidth in rates:
            options = ("--gemm-flops", gemm, "--mem-bandwidth", bandwidth)
            # times are at most 2^64 FLOPs or bytes over the rate, summed over < 200000 ops
            must_accept = float(gemm) >= 1 and float(bandwidth) >= 1
            rc, said = ck("chain", model, *options, "-o", "r.chain.json")
            if rc == 0:
                chain_reads_back("r.chain.json")
                plans_everywhere(model, ["20M"], *options, planners=["dp"])
            elif must_accept:
                problem(f"chain {options} is refused", said)
            else:
                refused(f"chain {options}", rc, said, TIME_LIMIT_SAYS)
    rc, said = ck("plan", model, "--budget", "22M", "--gemm-flops", "1e-300", "-o", "never.plan.json")
    refused("plan --gemm-flops 1e-300 (infinite times)", rc, said, TIME_LIMIT_SAYS)
    sweep_reads_back(model, "1,20M,8191T", 3, "--gemm-flops", "1.7976931348623157e308")


def wide_model(batch, width):
    return write_json("wide.json", {
        "format": "ckplan-model/1", "name": "wide", "dims": {"B": batch, "D": width},
        "inputs": [{"name": "x", "shape": ["B", "D"]}, {"name": "y", "shape": ["B", "D"]}],
        "nodes": [{"name": "fc", "op": "linear", "out": "D", "inputs": ["x"]},
                  {"name": "act", "op": "relu", "inputs": ["fc"]},
                  {"name": "fc2", "op": "linear", "out": "D", "inputs": ["act"]},
                  {"name": "loss", "op": "mse", "inputs": ["fc2", "y"]}]})


def accepted_model(batch, width):
    rc, said = ck("chain", wide_model(batch, width), "-o", "d.chain.json")
    if rc not in (0, 2):
        problem(f"chain of dims B={batch} D={width}: exit {rc}", said)
    if rc == 2:
        refused(f"dims B={batch} D={width}", rc, said, SIZE_LIMIT_SAYS, "overflows 64 bits")
    return rc == 0


def family_dims():
    """Model dims up to the largest JSON integer; the largest batch accepted, and one more."""
    for batch, width in [(1, 1), (2**30, 4), (2**48, 1), (2**50, 1), (2**52, 1), (LIMIT - 1, 1),
                         (1, 2**26), (1, 2**30), (2**20, 2**20), (LIMIT - 1, LIMIT - 1)]:
        if accepted_model(batch, width):
            chain_reads_back("d.chain.json")
            plans_everywhere("wide.json", ["1", LIMIT - 1], planners=["dp"])
    lo, hi = 1, LIMIT - 1  # the largest accepted batch, by bisection: accepted(lo), not hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if accepted_model(mid, 1) else (lo, mid)
    accepted_model(lo, 1)
    chain_reads_back("d.chain.json")
    plans_everywhere("wide.json", ["1", "4096T", LIMIT - 1])
    sweep_reads_back("wide.json", f"1:{LIMIT - 1}:4", 4)
    rc, _ = ck("plan", "wide.json", "--budget", LIMIT - 1, "-o", "largest.plan.json")
    plan = load_json("largest.plan.json") if rc == 0 else {"predicted": {}}
    # The limit is on the chain's store-everything figure (d.chain.json is lo's), which
    # bounds every exact one a plan reports (the compiled program's).
    total = plan["predicted"].get("static_bytes", LIMIT) + baseline_peak(load_json("d.chain.json"))
    rc, said = ck("chain", wide_model(hi, 1), "-o", "never.chain.json")
    refused(f"one batch more than the largest accepted ({hi})", rc, said, SIZE_LIMIT_SAYS)
    step = total / lo  # bytes per batch row
    if not (total < LIMIT <= total + 2 * step):
        problem(f"the largest batch accepted ({lo}) needs {total} bytes: the limit is not where "
                f"the store-everything step reaches 2^53")


def baseline_peak(chain):
    """The store-everything schedule's peak, replayed here from ../shared/spec/chain-model.md."""
    stages = chain["stages"]
    x = [chain["input_bytes"]] + [s["out_bytes"] for s in stages]
    held = peak = x[0]
    for s in stages:
        held += s["saved_bytes"]
        peak = max(peak, held + s["fwd_tmp_bytes"])
    held += x[-1]
    peak = max(peak, held + chain["loss"]["bwd_tmp_bytes"])
    for i in reversed(range(len(stages))):
        held += x[i]
        peak = max(peak, held + stages[i]["bwd_tmp_bytes"])
        held -= x[i + 1] + stages[i]["saved_bytes"]
    return peak


def make_chain(sizes, times=(1, 2)):
    stages = [{"name": f"s{i}", "fwd_time": times[0], "bwd_time": times[1], "out_bytes": out,
               "saved_bytes": saved, "fwd_tmp_bytes": ftmp, "bwd_tmp_bytes": btmp}
              for i, (out, saved, ftmp, btmp) in enumerate(sizes[1:])]
    return {"format": "ckplan-chain/1", "name": "edge", "input_bytes": sizes[0],
            "stages": stages, "loss": {"bwd_time": times[0], "bwd_tmp_bytes": 0}}


def family_chains():
    """Chain files whose sizes, each below 2^53, add up to around 2^53, some past it."""
    rng = random.Random(5)
    chains = [make_chain([1, (1, LIMIT - 4, 0, 0)]), make_chain([1, (1, LIMIT - 3, 0, 0)]),
              make_chain([LIMIT - 1, (1, 1, 0, 0)]),
              make_chain([1] + [(2**50, 2**51, 0, 0)] * 4)]
    for _ in range(10):
        n = rng.randrange(1, 6)
        scale = LIMIT // (3 * n)
        sizes = [rng.randrange(1, scale)]
        for _ in range(n):
            out = rng.randrange(1, scale)
            sizes.append((out, out + rng.randrange(0, scale), rng.randrange(0, scale // 4),
                          rng.randrange(0, scale // 4)))
        chains.append(make_chain(sizes))
    for k, chain in enumerate(chains):
        path = write_json(f"c{k}.chain.json", chain)
        need = baseline_peak(chain)
        rc, said = ck("chain", path, "-o", "c.chain.json")
        if need >= LIMIT:
            refused(f"{path}, whose store-everything step needs {need} bytes", rc, said, SIZE_LIMIT_SAYS)
        elif rc != 0:
            problem(f"{path}, whose store-everything step needs {need} bytes, is refused", said)
        if rc != 0:
            continue
        chain_reads_back("c.chain.json")
        plans_everywhere(path, [1, need // 2, need])
        sweep_reads_back(path, f"1:{need}:3", 3)


def family_minimums():
    """A planner's smallest budget, printed and recorded for infeasible points, is one that
    works, and never above the baseline's peak (from there the baseline is the plan): what
    bounds every minimum ckplan records."""
    rng = random.Random(3)
    # revolve alone would need 74 bytes here; the baseline needs 58
    chains = [make_chain([4, (18, 27, 25, 3), (0, 0, 17, 9)])]
    for _ in range(20):
        sizes = [rng.randrange(0, 20)]
        for _ in range(rng.randrange(1, 6)):
            out = rng.randrange(0, 20)
            sizes.append((out, out + rng.randrange(0, 20), rng.randrange(0, 30), rng.randrange(0, 30)))
        chains.append(make_chain(sizes))
    for chain in chains:
        path = write_json("small.chain.json", chain)
        need = baseline_peak(chain)
        for planner in PLANNERS:
            rc, said = ck("plan", path, "--budget", 0, "--planner", planner, "-o", "never.plan.json")
            least = re.search(r"its smallest plan needs [^(]*\((\d+) bytes\)", said)
            if need == 0 and rc == 0:
                continue
            if rc != 3 or not least or int(least[1]) > need:
                problem(f"{planner} on {json.dumps(chain)}: the smallest budget printed is above "
                        f"the baseline's peak ({need}) (exit {rc})", said)
                continue
            rc, said = ck("plan", path, "--budget", least[1], "--planner", planner, "-o", "m.plan.json")
            if rc != 0:
                problem(f"{planner} on {json.dumps(chain)}: the smallest budget printed does not work", said)


def family_times():
    """Stage times from 0 and the smallest double to the largest, in chains and costs files."""
    rng = random.Random(7)
    times = [0, 5e-324, 1e-300, 1, 1e100, 1.0000000000000002e100, 1e300, 1.7976931348623157e308]
    times += [rng.random() * 10.0**rng.randrange(-300, 100) for _ in range(4)]
    for t in times:
        for pair in ((t, t), (5e-324, t)):
            path = write_json("t.chain.json", make_chain([2] + [(4, 9, 1, 2)] * 6, pair))
            rc, said = ck("chain", path, "-o", "c.chain.json")
            if max(pair) > MAX_TIME:
                refused(f"a chain with times {pair}", rc, said, TIME_LIMIT_SAYS)
            elif rc != 0:
                problem(f"a chain with times {pair} is refused", said)
            if rc != 0:
                continue
            written = load_json("c.chain.json")
            if [written["stages"][0]["fwd_time"], written["stages"][0]["bwd_time"]] != list(pair):
                problem(f"chain wrote the times {pair} as {written['stages'][0]}")
            chain_reads_back("c.chain.json")
            plans_everywhere(path, [21, 60], planners=["dp"])
            sweep_reads_back(path, "1:60:3", 3)


def family_costs():
    """Costs files (plan --costs) with times up to the largest double."""
    model = f"{ROOT}/models/gpt2-tiny.json"
    rc, said = ck("chain", model, "-o", "m.chain.json")
    chain = load_json("m.chain.json")
    sha = hashlib.sha256(open(model, "rb").read()).hexdigest()
    for t in [0, 5e-324, 1e-9, 1e100, 1.0000000000000002e100, 1.7976931348623157e308]:
        for s in chain["stages"]:
            s["fwd_time"] = s["bwd_time"] = t
        costs = write_json("t.costs.json", {"format": "ckplan-costs/1",
                                            "model": {"path": model, "sha256": sha},
                                            "granularity": "block",
                                            "measured_activation_peak_bytes": 1000, "chain": chain})
        rc, said = ck("plan", model, "--budget", "20M", "--costs", costs, "-o", "k.plan.json")
        if t > MAX_TIME:
            refused(f"a costs file with times {t}", rc, said, TIME_LIMIT_SAYS)
        elif rc != 0:
            problem(f"a costs file with times {t}: exit {rc}", said)
        else:
            plan_reads_back("k.plan.json")
            sweep_reads_back(model, "1,20M", 2, "--costs", costs)


def tiny_model():
    return write_json("tiny.json", {
        "format": "ckplan-model/1", "name": "tiny", "dims": {"B": 2, "D": 4},
        "inputs": [{"name": "x", "shape": ["B", "D"]}, {"name": "y", "shape": ["B", "D"]}],
        "nodes": [{"name": "fc", "op": "linear", "out": "D", "inputs": ["x"]},
                  {"name": "loss", "op": "mse", "inputs": ["fc", "y"]}]})


def family_seeds():
    """--seed up to and past 2^53, in the records of real runs."""
    model = tiny_model()
    rc, said = ck("plan", model, "--budget", "1M", "-o", "tiny.plan.json")
    for seed in [0, 1, LIMIT - 1, LIMIT, 2**64 - 1]:
        for command in (["run", "tiny.plan.json", "--steps", 1], ["sweep", model, "--budgets", "1M",
                                                                   "--planners", "dp", "--run",
                                                                   "--steps", 1]):
            if os.path.exists("seed.jsonl"):
                os.remove("seed.jsonl")
            rc, said = ck(*command, "--seed", seed, "--runs", "seed.jsonl")
            if seed >= LIMIT:
                refused(f"{command[0]} --seed {seed}", rc, said, str(LIMIT - 1))
                continue
            if rc != 0:
                problem(f"{command[0]} --seed {seed}: exit {rc}", said)
                continue
            runs_read_back("seed.jsonl", 1)
            recorded = json.loads(open("seed.jsonl").readline())["settings"]["seed"]
            if recorded != seed:
                problem(f"{command[0]} --seed {seed} recorded the seed as {recorded}")


def main():
    global CKPLAN, ROOT
    family, CKPLAN, ROOT = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
    globals()["family_" + family]()
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
