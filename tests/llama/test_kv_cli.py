#!/usr/bin/python3
"""--kv f16|q8_0 of npullm-run and npullm-bench: a bad value is a usage
error (exit 2, a message naming the accepted values), a head size Q8_0
cannot hold is refused at load (exit 2), and both formats run.

  test_kv_cli.py --npullm-run PATH --npullm-bench PATH --model HD32.gguf --model-hd16 TINY.gguf
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from npl_cli_test import FAILED, expect, expect_error, run  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--npullm-run", required=True)
    p.add_argument("--npullm-bench", required=True)
    p.add_argument("--model", required=True, help="a llama model whose head size is a multiple of 32")
    p.add_argument("--model-hd16", required=True, help="a llama model of head size 16")
    a = p.parse_args()
    gen = ["--prompt", "hello", "--raw", "-n", "8", "--temperature", "0", "--threads", "2"]

    for bad in ["q4_0", "F16", ""]:
        expect_error([a.npullm_run, a.model] + gen + ["--kv", bad], 2, ["--kv expects f16 or q8_0"])
        expect_error([a.npullm_bench, a.model, "--kv", bad], 2, ["--kv needs f16 or q8_0", "usage:"])
    expect_error([a.npullm_run, a.model] + gen + ["--kv"], 2, ["--kv needs a value"])
    expect_error([a.npullm_bench, a.model, "--kv"], 2, ["--kv needs f16 or q8_0"])
    expect_error([a.npullm_run, a.model_hd16] + gen + ["--kv", "q8_0"], 2, ["multiple of 32", "is 16"])

    for kv in ["f16", "q8_0"]:
        code, out, err = run([a.npullm_run, a.model] + gen + ["--kv", kv, "--json"])
        expect(code == 0, "npullm-run --kv %s: exit %d (%r)" % (kv, code, err))
        if code == 0:
            expect(len(json.loads(out)["tokens"]) == 8, "--kv %s: %r" % (kv, out))
        code, out, err = run([a.npullm_bench, a.model, "--kv", kv, "-t", "2", "-p", "16", "-n", "4", "-b", "2",
                              "-r", "1", "--json"])
        expect(code == 0, "npullm-bench --kv %s: exit %d (%r)" % (kv, code, err))
        if code == 0:
            expect(json.loads(out)["kv"] == kv, "npullm-bench --kv %s: %r" % (kv, out))

    print("%d failed checks" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
