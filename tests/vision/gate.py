#!/usr/bin/python3
"""Vision gate: our vision towers (Gemma 3's, Gemma 4's gemma4v) and image
prompts against llama.cpp (the oracle's complete-image command:
initMultimodal + media_paths).

For one text model, one mmproj and a set of real images (PNG and JPEG,
which llama.cpp's loader reads; WebP is checked against the PNG decode in
the image tests instead), each image goes into the same chat prompt on
both sides (the token ids come from our prompt builder; the oracle gets
them around llama.node's media marker, and what llama.cpp evaluated must
be those ids around as many image positions as we feed). Then free-running greedy, the
check vLLM uses: at every step while both outputs agree, our token must
be in the oracle's top 5 and the oracle's token in ours; the first
divergence is checked the same way and ends the comparison for that image.

With --exact (f32 and f16 weights) the argmax must also be identical at
every compared step unless the oracle's two best tokens are within
NEAR_TIE, and the log-probabilities of the tokens both top-5 lists share
must agree within LOGPROB_TOL. (llama.cpp rounds the encoder's GELU and,
with f16 weights, the activations to f16; measured differences: below
0.01 for PNG images over 8 steps, 0.05 for JPEG.) The oracle keeps its KV
cache in f16 like our engine.

Prints one line per image and "N passed, N failed" at the end.
"""

import argparse
import json
import os
import subprocess
import sys

N_PREDICT = 8
TOP = 5
NEAR_TIE = 5e-3
# Lossless images reach both encoders as the same pixels; a JPEG is decoded
# by libjpeg here and by stb_image in llama.cpp, whose pixels differ by a
# level here and there.
LOGPROB_TOL = {"png": 0.02, "jpeg": 0.08}
PROMPTS = ["Describe this image.", "What is in the picture? Answer in one word."]


def run(args, stdin=None):
    r = subprocess.run(args, input=stdin, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("%s failed (%d): %s" % (" ".join(args[:3]), r.returncode, r.stderr[-3000:]))
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--mmproj", required=True)
    ap.add_argument("--tool", required=True, help="vision-tool")
    ap.add_argument("--node", required=True)
    ap.add_argument("--oracle", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--exact", action="store_true")
    ap.add_argument("--logprob-tol", type=float, nargs=2, metavar=("PNG", "JPEG"),
                    help="with --exact: log-probability tolerances (default %s)" % LOGPROB_TOL)
    ap.add_argument("--image-begin", default="<start_of_image>", help="the text llama.cpp puts before the image")
    ap.add_argument("--image-end", default="<end_of_image>", help="and after it (gemma4v: <|image>, <image|>)")
    ap.add_argument("images", nargs="+")
    a = ap.parse_args()
    tol = dict(zip(("png", "jpeg"), a.logprob_tol)) if a.logprob_tol else LOGPROB_TOL
    os.makedirs(a.workdir, exist_ok=True)

    cases = []
    for i, image in enumerate(a.images):
        text = PROMPTS[i % len(PROMPTS)]
        p = json.loads(run([a.tool, "prompt", a.model, text]))
        fmt = "jpeg" if image.lower().endswith((".jpg", ".jpeg")) else "png"
        cases.append(dict(image=os.path.abspath(image), text=text, before=p["before"], after=p["after"], format=fmt))

    req = {"mmproj": os.path.abspath(a.mmproj), "n_ctx": 1024, "cache_type": "f16",
           "image_begin": a.image_begin, "image_end": a.image_end,
           "requests": [dict(before=c["before"], after=c["after"], image=c["image"], n_predict=N_PREDICT, n_probs=TOP)
                        for c in cases]}
    oracle = json.loads(run([a.node, a.oracle, "complete-image", a.model], json.dumps(req)))["results"]

    passed = failed = 0
    worst_lp = 0.0
    for c, o in zip(cases, oracle):
        name = os.path.basename(c["image"])
        if "error" in o:
            print("FAILED %s: oracle: %s" % (name, o["error"]))
            failed += 1
            continue
        gen = json.loads(run([a.tool, "generate", a.model, a.mmproj, c["image"],
                              ",".join(map(str, c["before"])), ",".join(map(str, c["after"])),
                              str(N_PREDICT), str(TOP)]))
        ours, n_image = gen["steps"], gen["n_image"]  # gemma4v: depends on the image
        problems = []
        # What llama.cpp evaluated: the same ids around as many image
        # positions (-1) as we feed, then the generated tokens.
        expected = c["before"] + [-1] * n_image + c["after"] + [s["token"] for s in o["steps"][:-1]]
        if o["evaluated"] != expected:
            problems.append("llama.cpp evaluated %s, expected %s" % (o["evaluated"], expected))
        compared = 0
        image_lp = 0.0
        for step, (us, them) in enumerate(zip(ours, o["steps"])):
            compared += 1
            our_ids = [t[0] for t in us["top"]]
            their_ids = [t["id"] for t in them["top"]]
            if us["token"] not in their_ids:
                problems.append("step %d: our %d not in the oracle's top %s" % (step, us["token"], their_ids))
            if them["token"] not in our_ids:
                problems.append("step %d: oracle's %d not in our top %s" % (step, them["token"], our_ids))
            if a.exact:
                lps = [t["logprob"] for t in them["top"]]
                tie = len(lps) > 1 and lps[0] - lps[1] < NEAR_TIE
                if us["token"] != them["token"] and not tie:
                    problems.append("step %d: argmax %d vs oracle %d" % (step, us["token"], them["token"]))
                theirs = {t["id"]: t["logprob"] for t in them["top"]}
                for tid, lp in us["top"]:
                    if tid in theirs:
                        d = abs(lp - theirs[tid])
                        image_lp = max(image_lp, d)
                        if d > tol[c["format"]]:
                            problems.append("step %d: token %d log-prob %.4f vs %.4f" % (step, tid, lp, theirs[tid]))
            if us["token"] != them["token"]:
                break  # the continuations no longer share a context
        worst_lp = max(worst_lp, image_lp)
        ok = not problems
        passed += ok
        failed += not ok
        print("%s %s (%r): %d steps compared%s, tokens %s"
              % ("ok    " if ok else "FAILED", name, c["text"], compared,
                 ", log-probabilities within %.2g" % image_lp if a.exact else "", [s["token"] for s in ours[:compared]]))
        for p in problems:
            print("    " + p)
    if a.exact:
        print("largest log-probability difference on shared top tokens: %.2g" % worst_lp)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
