"""Emitted code is generated, never spliced (issue 24, class 1).

usage: emit_hostile.py CKPLAN ROOT TARGET    (TARGET: hf, fsdp, megatron, deepspeed, torch)

Every string an input can carry into emitted output (a model's name, a Hugging Face config's
_name_or_path, the model file's path, the plan's planner) is drawn from a hostile set, and
the target is emitted for it and for a plain twin that differs only in those strings. The
output must parse (Python: ast; deepspeed: JSON), have exactly the twin's structure (the
Python syntax trees equal once string constants are blanked; megatron's lines equal but for
comments), hold no more lines than the twin (but JSON, whose strings may hold a line separator), import without side effects (torch, in an empty
directory) and give back the strings exactly. Prints what failed and exits 1 on any failure.
"""
import ast
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

HOSTILE = [
    '"', '"""', "'''", "\\", "\\N{DASH}", "\\x41", "\\u2028", "\n", "\r", "\t", "\x0c", "\x1b[2J",
    "\u2028", "\u2029", "\x85", "#", "{x}", "%s", "$(touch pwned)", "`touch pwned`",
    "\"\"\"\nopen('pwned', 'w')\n\"\"\"", "é😀", "\ufeff",
]
# One hostile string holding all of them, as a single case beside each alone.
HOSTILE.append("".join(HOSTILE))
PLAIN = "plain"

failures = []


def fail(case, what):
    failures.append("%s: %s" % (case, what))


def ckplan(*args, cwd):
    r = subprocess.run([CKPLAN, *args], cwd=cwd, capture_output=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError("ckplan %s: exit %d: %s" % (" ".join(map(repr, args)), r.returncode,
                                                       r.stderr.decode(errors="replace")))
    return r


def file_part(text):
    """text as a file name: '/' and NUL cannot be in one."""
    return text.replace("/", "_").replace("\0", "_") or "_"


def make_inputs(work, text, kind, path_text=None):
    """A model of `kind` (ckplan's own or a Hugging Face config) named `text`, stored under a
    path holding path_text (by default text), and a plan of it whose planner is `text` too:
    (model path, plan path)."""
    path_text = text if path_text is None else path_text
    if kind == "model":
        model = json.load(open(os.path.join(ROOT, "models", "gpt2-tiny.json")))
        model["name"] = text
    else:
        model = json.load(open(os.path.join(ROOT, "models", "hf", "llama-tiny.json")))
        model["_name_or_path"] = text
    folder = os.path.join(work, "dir" + file_part(path_text))
    os.makedirs(folder, exist_ok=True)
    model_path = os.path.join(folder, "model" + file_part(path_text) + ".json")
    with open(model_path, "w") as f:
        json.dump(model, f)
    plan_path = os.path.join(work, "plan-" + kind + ".json")
    ckplan("plan", model_path, "--budget", "1T", "--planner", "every", "-o", plan_path, cwd=work)
    plan = json.load(open(plan_path))
    plan["planner"] = text  # run and emit take any planner string
    with open(plan_path, "w") as f:
        json.dump(plan, f)
    return model_path, plan_path


def emit(work, target, model_path, plan_path):
    out = os.path.join(work, "out-" + target + (".py" if target == "torch" else ""))
    if target == "torch":
        ckplan("emit", "torch", model_path, "--plan", plan_path, "-o", out, cwd=work)
    else:
        ckplan("emit", target, plan_path, "-o", out, cwd=work)
    with open(out, "rb") as f:
        return f.read().decode("utf-8")


class Blank(ast.NodeTransformer):
    def visit_Constant(self, node):
        return ast.Constant(value="" if isinstance(node.value, str) else node.value)


def python_shape(case, text):
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        fail(case, "does not parse: %s" % e)
        return None
    return ast.dump(Blank().visit(tree))


def check_python(case, out, twin):
    shape, twin_shape = python_shape(case, out), python_shape(case + " (plain)", twin)
    if shape is not None and shape != twin_shape:
        fail(case, "its code differs from the plain twin's: a string became code")


def check_megatron(case, out, twin):
    for line, twin_line in zip(out.splitlines(), twin.splitlines()):
        if line != twin_line and not (line.startswith("# ") and twin_line.startswith("# ")):
            fail(case, "a line that is not a comment differs from the twin's: %r" % line)
            return


def check_deepspeed(case, out, twin, text, model_path):
    try:
        got, want = json.loads(out)["ckplan"], json.loads(twin)["ckplan"]
    except ValueError as e:
        fail(case, "is not JSON: %s" % e)
        return
    if sorted(got) != sorted(want):
        fail(case, "its keys differ from the twin's")
    for key, value in (("planner", text), ("model", model_path)):
        if got[key] != value:
            fail(case, "%s is %r, not %r" % (key, got[key], value))
    if got["checkpoint_layer_names"] != want["checkpoint_layer_names"]:
        fail(case, "the layer names changed")


def check_torch_module(case, path, text, model_path):
    """Imports the module in an empty directory: nothing may appear there, and MODEL_NAME,
    MODEL_PATH and PLANNER must be the input's strings."""
    quiet = tempfile.mkdtemp(dir=WORK)
    here = os.getcwd()
    os.chdir(quiet)
    try:
        spec = importlib.util.spec_from_file_location("hostile_module", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as e:  # a module that does not import is the failure reported
        fail(case, "does not import: %r" % e)
        return
    finally:
        os.chdir(here)
    if os.listdir(quiet):
        fail(case, "importing it made files: %s" % os.listdir(quiet))
    if module.PLANNER != text:
        fail(case, "PLANNER is %r" % module.PLANNER)
    if module.MODEL_PATH.encode("utf-8", "surrogateescape") != os.fsencode(model_path):
        fail(case, "MODEL_PATH is %r, not %r" % (module.MODEL_PATH, model_path))
    name = module.MODEL_NAME
    if KIND == "model" and name != text:
        fail(case, "MODEL_NAME is %r" % name)


def run_case(target, text, kind, path_text=None):
    global KIND
    KIND = kind
    case = "emit %s, %s, %r" % (target, kind, (path_text or text)[:40])
    work = tempfile.mkdtemp(dir=WORK)
    twin_work = tempfile.mkdtemp(dir=WORK)
    model_path, plan_path = make_inputs(work, text, kind, path_text)
    out = emit(work, target, model_path, plan_path)
    twin = emit(twin_work, target, *make_inputs(twin_work, PLAIN, kind))
    # Lines as Python and editors split them (\u2028 included); JSON may hold any of them.
    if target != "deepspeed" and len(out.splitlines()) != len(twin.splitlines()):
        fail(case, "%d lines where the twin has %d" % (len(out.splitlines()), len(twin.splitlines())))
    if target in ("hf", "fsdp", "torch"):
        check_python(case, out, twin)
    if target == "megatron":
        check_megatron(case, out, twin)
    if target == "deepspeed":
        check_deepspeed(case, out, twin, text, model_path)
    if target == "torch":
        check_torch_module(case, os.path.join(work, "out-torch.py"), text, model_path)


def main():
    global CKPLAN, ROOT, WORK
    CKPLAN, ROOT, target = sys.argv[1], sys.argv[2], sys.argv[3]
    WORK = tempfile.mkdtemp(prefix="hostile-", dir=os.getcwd())
    kinds = ("model", "hf") if target != "torch" else ("model",)
    for text in HOSTILE:
        for kind in kinds:
            run_case(target, text, kind)
    # A model path that is not UTF-8, which only the command line can give: refused, as
    # what ckplan writes (the plan, the module) records it in UTF-8 text.
    path = os.path.join(WORK, os.fsdecode(b"bytes\xff\xfe.json"))
    with open(path, "w") as f:
        f.write(open(os.path.join(ROOT, "models", "gpt2-tiny.json")).read())
    args = ["emit", "torch", path] if target == "torch" else ["plan", path, "--budget", "1T", "-o", "p.json"]
    r = subprocess.run([CKPLAN, *args], cwd=WORK, capture_output=True, stdin=subprocess.DEVNULL)
    if r.returncode != 2 or b"is not UTF-8" not in r.stderr:
        fail("a path that is not UTF-8", "exit %d: %r" % (r.returncode, r.stderr[-300:]))
    for f in failures:
        print(f)
    print("%d cases, %d failures" % (len(HOSTILE) * len(kinds), len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
