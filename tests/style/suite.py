"""What the checks of tests/style/ share: their command line and their self-tests' trees.

A check is check(root, out) -> (files passed, files failed), printing each violation to
out as FILE:LINE: what is wrong; its self_test() -> bool runs it on planted trees."""
import os
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))


def write_tree(root, files):
    """Writes {path under root: content}, making the folders."""
    for path, text in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)


def violations(check, root):
    """The lines check prints for the tree at root."""
    with tempfile.TemporaryFile("w+") as out:
        check(root, out)
        out.seek(0)
        return out.read().splitlines()


def main(name, doc, check, self_test, argv):
    """[RESULTS_FILE]: the self-test, then the check on this tree, with "passed failed"
    written to RESULTS_FILE (the self-test counts as one case); --root DIR: the check on
    DIR alone. Exits 1 on any failure, 2 on a usage error."""
    if len(argv) == 3 and argv[1] == "--root":
        return 1 if check(argv[2], sys.stdout)[1] else 0
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        print(doc.strip().split("\n\n")[-1], file=sys.stderr)
        return 2
    tested = self_test()
    ok, bad = check(ROOT, sys.stdout)
    ok, bad = ok + tested, bad + (not tested)
    if len(argv) == 2:
        os.makedirs(os.path.dirname(os.path.abspath(argv[1])), exist_ok=True)
        with open(argv[1], "w") as f:
            f.write(f"{ok} {bad}\n")
    print(f"{name}: {ok} passed, {bad} failed")
    return 1 if bad else 0
