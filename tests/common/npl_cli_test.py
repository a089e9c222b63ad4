"""The shared part of the command-line tests (tests/llama/test_cli.py,
tests/gemma3/test_cli.py, tests/llama/test_kv_cli.py,
tests/vision/test_mmproj.py): running a program, counting failed checks,
a refusal that must be clean, patched variants of a GGUF file, and named
cases run like the C harness's (tests/common/npl_test.h): "ok   NAME" or
"FAIL NAME" per case, then "N passed, N failed".

The test scripts put tests/common on sys.path and import this module."""

import argparse
import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_patch  # noqa: E402,F401  (the scripts use it through this module)

FAILED = []


def run(cmd, **kw):
    """(exit status, stdout, stderr) of the command (a list)."""
    p = subprocess.run([str(a) for a in cmd], capture_output=True, **kw)
    return p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8")


def expect(cond, what):
    """A check: a failure is printed and counted for the running case."""
    if not cond:
        FAILED.append(what)
        print("  check failed: " + what)
    return cond


def expect_error(cmd, rc, needles, one_line=None):
    """The command exits with rc and every needle is in its stderr; with
    one_line, stderr is that one line, starting with one_line."""
    code, _, err = run(cmd)
    what = " ".join(str(a) for a in cmd[1:])
    expect(code == rc, "%s: exit %d, wanted %d (stderr %r)" % (what, code, rc, err))
    if one_line is not None:
        lines = err.splitlines()
        expect(len(lines) == 1 and lines[0].startswith(one_line), "%s: one %r line, got %r" % (what, one_line, err))
    for needle in needles:
        expect(needle in err, "%s: %r not in %r" % (what, needle, err))


def gguf_variant(base, workdir, name, mutate):
    """workdir/NAME.gguf: the file base with mutate(gguf_patch.GGUF) applied."""
    g = gguf_patch.GGUF(base)
    mutate(g)
    path = os.path.join(workdir, name + ".gguf")
    g.write(path)
    return path


def run_cases(cases, names):
    """Runs the named cases (functions of no argument); the exit status."""
    passed = failed = 0
    for name in names:
        before = len(FAILED)
        cases[name]()
        if len(FAILED) == before:
            passed += 1
            print("ok   " + name)
        else:
            failed += 1
            print("FAIL " + name)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


# ---- tests of npullm-run on one model (tests/llama, tests/gemma3) ----------

A = None  # their arguments: npullm_run, model, workdir


def npullm_run(*args):
    """(exit status, stdout, stderr) of npullm-run with args."""
    return run([A.npullm_run] + list(args))


def npullm_run_refuses(args, rc, needle):
    """npullm-run exits rc with one 'npullm-run: ' line naming needle."""
    expect_error([A.npullm_run] + list(args), rc, [needle], one_line="npullm-run: ")


def model_variant(name, mutate):
    """A variant of the test's model in its workdir (gguf_variant)."""
    return gguf_variant(A.model, A.workdir, name, mutate)


def npullm_run_main(namespace, not_by_default=()):
    """main() of an npullm-run test: --npullm-run PATH --model FILE
    --workdir DIR [CASE...]; the cases are the namespace's case_NAME
    functions (all but not_by_default when none is named), the arguments
    also its A."""
    global A
    ap = argparse.ArgumentParser()
    ap.add_argument("--npullm-run", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("cases", nargs="*")
    a = A = namespace["A"] = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    cases = {k[5:]: v for k, v in namespace.items() if k.startswith("case_")}
    return run_cases(cases, a.cases or [c for c in cases if c not in not_by_default])
