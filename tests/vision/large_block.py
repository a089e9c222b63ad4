#!/usr/bin/env python3
"""An image whose rows outnumber the prefill chunk (issue 32): its rows
attend to each other, so they go through the model in one step, which the
model's working rows must hold (npl_model_params.block_rows = the
projector's max_tokens). For each image, vision-tool's greedy generation
with the default prefill chunk (the path vision.gate.* checks against
llama.cpp) must equal the same with a prefill chunk of --chunk rows: the
same tokens, log-probabilities within --tol. At least one image must give
more rows than the default chunk (256), so that path is covered too.
Prints one line per image."""
import argparse
import json
import os
import subprocess
import sys

DEFAULT_CHUNK = 256


def generate(a, image, before, after, chunk):
    env = dict(os.environ)
    env.pop("NPULLM_TEST_PREFILL_CHUNK", None)
    if chunk:
        env["NPULLM_TEST_PREFILL_CHUNK"] = str(chunk)
    out = subprocess.run([a.tool, "generate", a.model, a.mmproj, image, before, after, str(a.steps), "5"],
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("FAILED %s (chunk %s): %s" % (os.path.basename(image), chunk or "default", out.stderr.strip()))
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--mmproj", required=True)
    ap.add_argument("--chunk", type=int, default=16)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("images", nargs="+")
    a = ap.parse_args()
    p = json.loads(subprocess.run([a.tool, "prompt", a.model, "Describe this image."], capture_output=True,
                                  text=True, check=True).stdout)
    before, after = ",".join(map(str, p["before"])), ",".join(map(str, p["after"]))
    failed, most = 0, 0
    for image in a.images:
        ref = generate(a, image, before, after, 0)
        small = generate(a, image, before, after, a.chunk)
        n = ref["n_image"]
        most = max(most, n)
        worst, problems = 0.0, []
        if small["n_image"] != n:
            problems.append("%d image rows, %d with the default chunk" % (small["n_image"], n))
        if n <= a.chunk:
            problems.append("%d image rows do not exceed the chunk of %d" % (n, a.chunk))
        for i, (x, y) in enumerate(zip(ref["steps"], small["steps"])):
            if x["token"] != y["token"] or [t for t, _ in x["top"]] != [t for t, _ in y["top"]]:
                problems.append("step %d: top tokens %s, %s with the default chunk" % (
                    i, [t for t, _ in y["top"]], [t for t, _ in x["top"]]))
                break
            worst = max([worst] + [abs(u - v) for (_, u), (_, v) in zip(x["top"], y["top"])])
        if worst > a.tol:
            problems.append("log-probabilities differ by %.3g (tolerance %g)" % (worst, a.tol))
        name = os.path.basename(image)
        if problems:
            failed += 1
            print("FAILED %s: %s" % (name, "; ".join(problems)))
        else:
            print("ok %s: %d image rows in one step, chunk %d and %d agree within %.2g over %d steps" % (
                name, n, a.chunk, DEFAULT_CHUNK, worst, a.steps))
    if most <= DEFAULT_CHUNK:
        failed += 1
        print("FAILED: no image gives more than %d rows (the most: %d)" % (DEFAULT_CHUNK, most))
    print("%d passed, %d failed" % (len(a.images) - failed if failed <= len(a.images) else 0, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
