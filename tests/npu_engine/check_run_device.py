#!/usr/bin/python3
"""npullm-run --device: the same prompt on the CPU and on npu-emu gives
first-step candidates that agree both ways (each device's greedy token is
in the other's top 5); auto runs; npu without an NPU and an unknown device
name fail with a message and exit status 2."""

import json
import subprocess
import sys


def run(tool, model, device):
    return subprocess.run([tool, model, "--prompt", "Hello there", "--raw", "-n", "2",
                           "--temperature", "0", "--top-logprobs", "5", "--json",
                           "--device", device],
                          capture_output=True, text=True, timeout=240)


def main():
    tool, model = sys.argv[1], sys.argv[2]
    failed = []
    steps = {}
    for device in ("cpu", "npu-emu", "auto"):
        out = run(tool, model, device)
        if out.returncode != 0:
            failed.append("--device %s failed: %s" % (device, out.stderr))
            continue
        steps[device] = json.loads(out.stdout)["tokens"][0]
    if "cpu" in steps and "npu-emu" in steps:
        cpu, npu = steps["cpu"], steps["npu-emu"]
        if cpu["id"] not in [t[0] for t in npu["top"]]:
            failed.append("CPU token %d not in npu-emu's top 5 %r" % (cpu["id"], npu["top"]))
        if npu["id"] not in [t[0] for t in cpu["top"]]:
            failed.append("npu-emu token %d not in the CPU's top 5 %r" % (npu["id"], cpu["top"]))
    for device, want in (("npu", "device npu:"), ("gpu", "--device expects")):
        out = run(tool, model, device)
        if out.returncode != 2 or want not in out.stderr:
            failed.append("--device %s: exit %d, stderr %r" % (device, out.returncode, out.stderr))
    for msg in failed:
        print("check failed: " + msg)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
