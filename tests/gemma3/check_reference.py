#!/usr/bin/python3
"""The engine against reference.py on sequences mixing tokens and rows fed
as embeddings, causal and bidirectional (npl_prefill_embeddings), on f32
gemma3 models: every logits vector the engine computes must match the
reference within TOLERANCE and have the same argmax.

  check_reference.py --probe EMBD_PROBE --model M.gguf --workdir DIR CASE
"""

import argparse
import os
import subprocess
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
sys.path.insert(0, os.path.join(HERE, "..", "common"))

import numpy as np  # noqa: E402

import reference  # noqa: E402

# Largest |logit difference| accepted, relative to the largest |logit| of
# the reference (logits have a standard deviation of about 4 on these
# models). Measured: up to 1.2e-4 (float sums, and the f16 rounding of K
# and V falling on either side of a half-way point, against float64).
TOLERANCE = 5e-4

# name -> (prefill chunk, context, script), script items:
#   ("tokens", n) | ("embd", n, "causal"|"bidir") | ("decode", n)
CASES = {
    # Window 8, 16-row chunks, a 64-position context: the local layers keep
    # a ring of 23 positions, which wraps; a bidirectional block longer
    # than the window.
    "swa8-ring": (16, 64, [("tokens", 10), ("embd", 12, "bidir"), ("tokens", 5), ("decode", 3),
                           ("embd", 6, "causal"), ("decode", 2), ("embd", 1, "bidir"), ("decode", 1)]),
    # The same sequence in a full cache (no ring) with 256-row chunks.
    "swa8-full": (256, 64, [("tokens", 10), ("embd", 12, "bidir"), ("tokens", 5), ("decode", 3),
                            ("embd", 6, "causal"), ("decode", 2), ("embd", 1, "bidir"), ("decode", 1)]),
    # An image-sized block: 20 text tokens, 256 bidirectional rows, text.
    "image-block": (256, 512, [("tokens", 20), ("embd", 256, "bidir"), ("tokens", 10), ("decode", 4)]),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("case", choices=sorted(CASES))
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    chunk, ctx, items = CASES[a.case]

    m = reference.Model(a.model)
    rng = np.random.default_rng(7)
    rows = []          # first-layer input, row by row
    blocks = []        # bidirectional (start, end)
    want = []          # rows whose logits the engine reports
    lines = []
    for k, item in enumerate(items):
        kind, n = item[0], item[1]
        start = len(rows)
        if kind in ("tokens", "decode"):
            ids = [2] if start == 0 else []
            ids += [int(t) for t in rng.integers(1000, 200000, size=n - len(ids))]
            rows.extend(reference.token_rows(m, ids))
            lines.append("%s %s" % (kind, " ".join(map(str, ids))))
            want.extend([start + n - 1] if kind == "tokens" else range(start, start + n))
        else:
            e = rng.standard_normal((n, m.n_embd)).astype(np.float32)
            path = os.path.join(a.workdir, "embd%d.f32" % k)
            e.astype("<f4").tofile(path)
            rows.extend(e.astype(np.float64))
            lines.append("embd %s %d %s" % (path, n, item[2]))
            if item[2] == "bidir":
                blocks.append((start, start + n))
            want.append(start + n - 1)
    script = os.path.join(a.workdir, "script.txt")
    with open(script, "w") as f:
        f.write("\n".join(lines) + "\n")
    out = os.path.join(a.workdir, "logits.f32")
    p = subprocess.run([a.probe, a.model, script, out, "--prefill-chunk", str(chunk), "--ctx", str(ctx),
                        "--threads", "2"], capture_output=True, text=True)
    if p.returncode != 0:
        print("FAIL embd-probe: %s" % p.stderr.strip())
        return 1
    ours = np.fromfile(out, dtype="<f4").reshape(-1, m.n_vocab)
    ref = reference.forward(m, np.asarray(rows), blocks, want)
    if ours.shape != ref.shape:
        print("FAIL %d logits vectors from the engine, %d expected" % (ours.shape[0], ref.shape[0]))
        return 1

    failed = 0
    for i, r in enumerate(want):
        diff = float(np.max(np.abs(ours[i] - ref[i])))
        scale = float(np.max(np.abs(ref[i])))
        same = int(np.argmax(ours[i])) == int(np.argmax(ref[i]))
        ok = diff <= TOLERANCE * scale and same
        failed += not ok
        print("%s row %3d: max |dlogit| %.2e (%.1e of max |logit|), argmax %s" % (
            "ok  " if ok else "FAIL", r, diff, diff / scale, "same" if same else "differs"))
    # A bidirectional block must change what follows it: otherwise this
    # test could not tell the two modes apart.
    if blocks:
        causal = reference.forward(m, np.asarray(rows), [], want)
        moved = float(np.max(np.abs(causal[-1] - ref[-1])))
        ok = moved > 100 * TOLERANCE * float(np.max(np.abs(ref[-1])))
        failed += not ok
        print("%s bidirectional vs causal reference, last row: max |dlogit| %.2e" % ("ok  " if ok else "FAIL", moved))
    print("%d checks, %d failed" % (len(want) + bool(blocks), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
