#!/usr/bin/python3
"""Embedding gate: npullm-run --embed against llama.cpp (the oracle).

Every text of the gate's list is embedded by llama.cpp (oracle.mjs embed,
one text at a time) and by npullm-run (all texts in one call, so they are
packed into shared forward passes: each must still see only its own
tokens). Each pair of vectors must have a cosine similarity of at least
--min-cos. Also checked: Matryoshka truncation (--dimensions) gives the
normalised prefix of the full vector.

Exit status 0 only when every comparison holds."""

import argparse
import json
import math
import subprocess
import sys

TEXTS = [
    "",
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Semantic search finds documents whose vectors are close to the query's vector.",
    "café au lait, s'il vous plaît! Crème brûlée.",
    "你好世界，这是一个测试。",
    "日本語のテキストとEnglish mixed",
    "unbelievably antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "C'est la vie... (really?) [yes] {no} <maybe> 50% $100 #tag @user",
    "emoji 😀 🎉 and symbols ♥ ★ → ©",
    "Numbers: 3.14159, 1,000,000 and 2024-01-15T10:30:00Z",
    "a",
    " ".join("sentence number %d talks about embeddings and retrieval." % i for i in range(30)),
]


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na > 0 and nb > 0 else 0.0


def ours(run, model, texts, extra=()):
    cmd = [run, model, "--json"] + list(extra)
    for t in texts:
        cmd += ["--embed", t]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit("npullm-run failed (exit %d)" % p.returncode)
    return json.loads(p.stdout)


def check_tokens(a, texts, answer, total):
    """Each text's ids from npullm-run --tokenize --raw (BOS as the model
    says, as npl_embed tokenizes) against llama.cpp's; their sum against
    the --embed call's count. Returns the number of mismatches."""
    bad = 0
    n = 0
    for t, ref in zip(texts, answer["tokens"]):
        want = ([answer["bos_id"]] if answer["add_bos"] else []) + ref
        p = subprocess.run([a.npullm_run, a.model, "--tokenize", t, "--raw", "--json"],
                           capture_output=True, text=True)
        got = json.loads(p.stdout) if p.returncode == 0 else None
        n += len(want)
        if got != want:
            print("  MISMATCH tokens of %r: %s, llama.cpp %s" % (t[:40], got, want))
            bad += 1
    if n != total:
        print("  MISMATCH --embed counted %d tokens, llama.cpp's texts have %d" % (total, n))
        bad += 1
    print("  tokens: %s over %d texts" % ("identical" if not bad else "DIFFERENT", len(texts)))
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--npullm-run", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--oracle", required=True)
    ap.add_argument("--min-cos", type=float, default=0.9999)
    ap.add_argument("--texts", default=None,
                    help="comma-separated indices of the texts to use (default all): a decoder without an "
                         "added token has no empty text, and a large vocabulary makes each oracle load slow")
    ap.add_argument("--check-tokens", action="store_true",
                    help="also compare each text's tokens with llama.cpp's (one npullm-run per text)")
    a = ap.parse_args()
    global TEXTS
    if a.texts:
        TEXTS = [TEXTS[int(i)] for i in a.texts.split(",")]

    p = subprocess.run([a.node, a.oracle, "embed", a.model], input=json.dumps({"texts": TEXTS}),
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit("oracle.mjs failed (exit %d)" % p.returncode)
    answer = json.loads(p.stdout)
    ref = answer["embeddings"]
    got = ours(a.npullm_run, a.model, TEXTS)
    vecs = got["embeddings"]
    failures = 0
    print("%s: %d texts, %d dimensions, pooling %s, %d tokens"
          % (a.model, len(TEXTS), got["dimensions"], got["pooling"], got["tokens"]))
    worst = 1.0
    for t, r, o in zip(TEXTS, ref, vecs):
        if len(r) != len(o):
            print("  MISMATCH %r: %d values, llama.cpp %d" % (t[:40], len(o), len(r)))
            failures += 1
            continue
        c = cosine(r, o)
        worst = min(worst, c)
        if c < a.min_cos:
            print("  MISMATCH %r: cosine %.6f < %g" % (t[:40], c, a.min_cos))
            failures += 1
    print("  cosine with llama.cpp: worst %.7f over %d texts" % (worst, len(TEXTS)))
    if a.check_tokens:
        failures += check_tokens(a, TEXTS, answer, got["tokens"])

    # Matryoshka: the first k values, renormalised.
    k = max(1, got["dimensions"] // 4)
    first = 1 if len(TEXTS) > 1 else 0
    cut = ours(a.npullm_run, a.model, TEXTS[first:first + 2], ["--dimensions", str(k)])["embeddings"]
    for full, short in zip(vecs[first:first + 2], cut):
        pre = full[:k]
        n = math.sqrt(sum(x * x for x in pre))
        if len(short) != k or max(abs(x / n - y) for x, y in zip(pre, short)) > 1e-5:
            print("  MISMATCH --dimensions %d is not the normalised prefix" % k)
            failures += 1
    print("FAIL: %d mismatches" % failures if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
