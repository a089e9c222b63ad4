#!/usr/bin/python3
"""npullm-bench --peak: one figure for every kind of arithmetic this CPU
has and none for the kinds it lacks (as /proc/cpuinfo reports them), each
a positive rate with the best round not below the worst, in both the
JSON and the text output; a bad thread count is a usage error.

  test_bench_peak.py NPULLM-BENCH
"""

import json
import os
import platform
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from npl_cli_test import FAILED, expect, expect_error, run  # noqa: E402

# JSON key -> the cpuinfo flags that kind needs
KINDS = {"fma_avx2": ["avx2", "fma"], "fma_avx512": ["avx512f"], "bf16": ["avx512f", "avx512_bf16"],
         "vnni": ["avx512f", "avx512_vnni"]}
TEXT = {"fma_avx2": "f32 FMA (AVX2)", "fma_avx512": "f32 FMA (AVX-512)", "bf16": "BF16 VDPBF16PS",
        "vnni": "int8 VPDPBUSD"}


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def main():
    bench = sys.argv[1]
    if platform.machine() != "x86_64":
        code, _, err = run([bench, "--peak", "-r", "1"])
        expect(code == 1 and "x86-64" in err, "--peak off x86-64: exit %d (%r)" % (code, err))
        sys.exit(1 if FAILED else 0)
    flags = cpu_flags()
    want = {k for k, need in KINDS.items() if all(f in flags for f in need)}

    code, out, err = run([bench, "--peak", "-t", "2", "-r", "2", "--json"])
    expect(code == 0, "--peak --json: exit %d (%r)" % (code, err))
    if code == 0:
        got = json.loads(out)
        expect(got.pop("threads") == 2, "threads: %r" % out)
        expect(set(got) == want, "kinds %s, the CPU has %s" % (sorted(got), sorted(want)))
        for kind, (best, worst) in got.items():
            expect(best > 0 and worst > 0 and best >= worst, "%s: best %r, worst %r" % (kind, best, worst))

    code, out, err = run([bench, "--peak", "-t", "1", "-r", "1"])
    expect(code == 0, "--peak: exit %d (%r)" % (code, err))
    for kind, name in TEXT.items():
        expect((name in out) == (kind in want), "%s %s in %r" % (name, "missing" if kind in want else "printed", out))

    expect_error([bench, "--peak", "-t", "zero"], 2, ["bad or missing number", "usage:"])
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
