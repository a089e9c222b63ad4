#!/usr/bin/python3
"""Rerank gate: npullm-run --rerank against llama.cpp (the oracle).

The oracle scores each pair "[CLS] query [SEP] document [SEP]" (with
--sep '</s></s>', XLM-RoBERTa's "<s> query </s></s> document </s>") with the
file's rank pooling (oracle.mjs rerank, one document at a time); npullm-run
scores all documents in one call (pairs packed into shared passes). Every
score must be within --tol of llama.cpp's (absolute, scaled up for scores
above 1 in magnitude) and the documents must come out in the same order.
llama.node's own rerank() starts each pair with a second [CLS]; its scores
are printed for information, not compared. A decoder reranker
(Qwen3-Reranker) is scored on its file's rerank prompt by both (llama.node's
rerank() ignores that prompt, so it is not asked); --docs
picks a few documents where each oracle load is slow (Qwen 3's 151k
vocabulary).

Exit status 0 only when every comparison holds."""

import argparse
import json
import subprocess
import sys

QUERY = "What does the quick brown fox jump over?"
DOCUMENTS = [
    "The quick brown fox jumps over the lazy dog.",
    "A fox is a small omnivorous mammal.",
    "Semantic search finds documents whose vectors are close to the query's vector.",
    "café au lait, s'il vous plaît! Crème brûlée.",
    "你好世界，这是一个测试。",
    "",
    "Numbers: 3.14159, 1,000,000 and 2024-01-15T10:30:00Z",
    "a",
    " ".join("sentence number %d talks about reranking and retrieval." % i for i in range(20)),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--npullm-run", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--oracle", required=True)
    ap.add_argument("--tol", type=float, default=2e-3)
    ap.add_argument("--docs", help="comma-separated indices of DOCUMENTS to use (default: all)")
    ap.add_argument("--sep", default="[SEP]",
                    help="the text between query and document for the oracle: [SEP] (WordPiece), </s></s> "
                         "(XLM-RoBERTa: <s> query </s></s> document </s>)")
    a = ap.parse_args()
    docs = [DOCUMENTS[int(i)] for i in a.docs.split(",")] if a.docs else DOCUMENTS

    p = subprocess.run([a.node, a.oracle, "rerank", a.model],
                       input=json.dumps({"query": QUERY, "documents": docs, "sep": a.sep}), capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit("oracle.mjs failed (exit %d)" % p.returncode)
    ref = json.loads(p.stdout)
    cmd = [a.npullm_run, a.model, "--json", "--rerank", QUERY]
    for d in docs:
        cmd += ["--document", d]
    q = subprocess.run(cmd, capture_output=True, text=True)
    if q.returncode != 0:
        sys.stderr.write(q.stderr)
        raise SystemExit("npullm-run failed (exit %d)" % q.returncode)
    got = json.loads(q.stdout)["scores"]
    failures = 0
    worst = 0.0
    for i, (r, g) in enumerate(zip(ref["scores"], got)):
        d = abs(r - g)
        worst = max(worst, d / max(1.0, abs(r)))
        ok = d <= a.tol * max(1.0, abs(r))
        failures += not ok
        own = "; llama.node rerank() %.6f" % ref["rerank"][i] if ref["rerank"] else ""
        print("%s doc %d: llama.cpp %.6f npullm %.6f (|diff| %.2g%s)" % ("ok  " if ok else "FAIL", i, r, g, d, own))
    if len(got) != len(ref["scores"]):
        print("FAIL: %d scores, llama.cpp %d" % (len(got), len(ref["scores"])))
        failures += 1
    # the same order, but for pairs closer than the tolerance (a tie either way)
    order_ref = sorted(range(len(docs)), key=lambda i: -ref["scores"][i])
    for x, y in zip(order_ref, order_ref[1:]):
        if ref["scores"][x] - ref["scores"][y] > 2 * a.tol * max(1.0, abs(ref["scores"][x])) and got[x] <= got[y]:
            print("FAIL: order: llama.cpp ranks doc %d above doc %d, npullm does not" % (x, y))
            failures += 1
    print("%d documents, worst relative difference %.2g (tolerance %g): %s"
          % (len(docs), worst, a.tol, "FAIL" if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
