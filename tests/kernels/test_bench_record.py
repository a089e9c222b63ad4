#!/usr/bin/python3
"""npullm-bench --record FILE: each run appends one JSON line (date, CPU,
load, command, and the run's object as "result") and still prints the
object on stdout; a second run appends a second line; a failed run
records nothing; an unwritable file is a clear error before the run.

  test_bench_record.py NPULLM-BENCH WORKDIR
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from npl_cli_test import FAILED, expect, expect_error, run  # noqa: E402


def lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def main():
    bench, workdir = sys.argv[1], sys.argv[2]
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, "results-test.jsonl")
    if os.path.exists(path):
        os.unlink(path)
    argv = [bench, "--barrier", "-t", "1", "-r", "1", "--record", path]
    for want in (1, 2):
        code, out, err = run(argv)
        expect(code == 0, "run %d: exit %d (%r)" % (want, code, err))
        expect(json.loads(out).get("threads") == 1, "run %d: stdout is the object: %r" % (want, out))
        got = lines(path)
        expect(len(got) == want, "run %d: %d lines in the file" % (want, len(got)))
    last = got[-1]
    for key in ("date", "cpu", "cpus", "load", "command", "result"):
        expect(key in last, "the line has %r: %r" % (key, last))
    expect(last.get("command") == "npullm-bench --barrier -t 1 -r 1 --record " + path, "command: %r" % last)
    expect(last.get("result", {}).get("threads") == 1, "result: %r" % last)
    expect(len(last.get("load", [])) == 3, "load: %r" % last)
    # a failing run (no such model) records nothing
    code, _, _ = run([bench, os.path.join(workdir, "missing.gguf"), "--record", path])
    expect(code != 0 and len(lines(path)) == 2, "a failed run left the file alone (exit %d)" % code)
    expect_error([bench, "--barrier", "--record", os.path.join(workdir, "no", "such", "dir.jsonl")], 1,
                 ["cannot record the result"])
    expect_error([bench, "--barrier", "--record"], 2, ["--record needs a results file"])
    print("%d passed, %d failed" % (0 if FAILED else 1, 1 if FAILED else 0))
    sys.exit(1 if FAILED else 0)


main()
