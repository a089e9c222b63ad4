#!/usr/bin/python3
"""npullm-bench --device npu-emu --json reports the device's counters:
per decoded token 2 dispatches per layer + 1, the embedding row in and the
logits out, and no weight byte after load; one submission per decode step,
which for the -b 2 steps holds both sequences (so between 1/2 and 1
submission per token)."""

import json
import subprocess
import sys


def main():
    bench, model, n_layer, n_embd, n_vocab = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    out = subprocess.run([bench, model, "--device", "npu-emu", "-p", "20", "-n", "3", "-b", "2",
                          "-r", "1", "--chunk", "16", "--json"],
                         capture_output=True, text=True, timeout=240)
    if out.returncode != 0:
        sys.exit("npullm-bench failed: " + out.stderr)
    r = json.loads(out.stdout)
    d = r["device_stats"]
    per = d["decode_per_token"]
    # instruction words the host rewrites per token: 7 + 5 per layer, 3 for
    # the LM head (docs/npu.md, "Instruction streams")
    params = 4 * (12 * n_layer + 3)
    checks = [
        (r["device"] == "npu-emu", "device is %r" % r["device"]),
        (per["dispatches"] == 2 * n_layer + 1, "decode dispatches per token %r" % per["dispatches"]),
        (0.5 <= per["submissions"] < 1, "submissions per token %r" % per["submissions"]),
        (per["h2d_bytes"] == 2 * n_embd + params, "bytes in per token %r" % per["h2d_bytes"]),
        (per["d2h_bytes"] == 4 * n_vocab, "bytes out per token %r" % per["d2h_bytes"]),
        (per["h2d_weight_bytes"] == 0, "weight bytes per token %r" % per["h2d_weight_bytes"]),
        (d["load"]["h2d_weight_bytes"] == d["weight_bytes"] > 0, "load uploads the weights once"),
        (d["prefill"]["h2d_weight_bytes"] == 0, "no weight bytes in prefill"),
        (d["prefill_chunk"] == 16 and d["prefill_prompts"] >= 2, "prefill counters %r" % d),
    ]
    failed = [msg for ok, msg in checks if not ok]
    for msg in failed:
        print("check failed: " + msg)
    print(json.dumps(d, indent=1))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
