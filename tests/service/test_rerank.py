#!/usr/bin/python3
"""Rerank through npullmd (docs/embeddings.md): the scores are
npl_rerank's (npullm-run --rerank on the same file), best first, top_n;
ListModels says "rerank"; bad input (no documents, an empty query, an
embedding or chat model for Rerank, a reranker for Embed, truncate off)
gives named errors and the daemon keeps serving; the polkit action is
org.npullm.embed; npullm-client rerank prints the same ranking."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npullm_testbus as tb  # noqa: E402
from npullm_testbus import run_tap, variant_dict  # noqa: E402

QUERY = "what does the fox jump over?"
DOCS = ["The quick brown fox jumps over the lazy dog.", "", "Crème brûlée", "東京タワー", "a " * 700]
ERR = "org.npullm.Error."


class RerankTest(tb.ServiceTestCase):
    ARGS = ("--default-model", "tiny")

    @classmethod
    def make_model_dirs(cls, workdir):
        d = tb.make_model_dir(workdir)
        tb.place_model(tb.env_path("NPULLM_TEST_RERANK_MODEL"), os.path.join(d, "ranker.gguf"))
        tb.place_model(tb.env_path("NPULLM_TEST_EMBED_MODEL"), os.path.join(d, "minilm.gguf"))
        return [d]

    def rerank(self, c, query, docs, **opts):
        return c.call("Rerank", "(sasa{sv})", (query, docs, variant_dict(opts)), "(a(ud)a{sv})", timeout=120000)

    def test_scores_are_the_engines(self):
        c = self.client()
        results, info = self.rerank(c, QUERY, DOCS)
        args = [tb.env_path("NPULLM_RUN"), tb.env_path("NPULLM_TEST_RERANK_MODEL"), "--json", "--rerank", QUERY]
        for d in DOCS:
            args += ["--document", d]
        want = json.loads(subprocess.run(args, capture_output=True, check=True, timeout=120).stdout)["scores"]
        self.assertEqual(sorted(i for i, _ in results), list(range(len(DOCS))))
        for i, score in results:
            self.assertLess(abs(score - want[i]), 1e-6)
        self.assertEqual([i for i, _ in results], sorted(range(len(DOCS)), key=lambda i: -want[i]))
        self.assertEqual(info["model"], "ranker")  # the default: the first reranker
        self.assertEqual(info["documents"], len(DOCS))
        self.assertEqual(info["truncated"], 1)
        top, _ = self.rerank(c, QUERY, DOCS, top_n=("u", 2), priority=("s", "background"))
        self.assertEqual(top, results[:2])
        # more documents than one engine step: the same scores as alone
        many = ["document number %d" % i for i in range(100)]
        res_many, info_many = self.rerank(c, QUERY, many, model=("s", "ranker"))
        alone, _ = self.rerank(c, QUERY, [many[99]])
        self.assertEqual(dict(res_many)[99], alone[0][1])
        self.assertGreaterEqual(info_many["passes"], 2)

    def test_capabilities(self):
        (models,) = self.client().call("ListModels", None, None, "(aa{sv})")
        caps = {m["name"]: m["capabilities"] for m in models}
        self.assertEqual(caps["ranker"], ["rerank"])
        self.assertEqual(caps["minilm"], ["embedding"])

    def test_bad_input(self):
        c = self.client()
        ia = ERR + "InvalidArgument"
        cases = [(QUERY, [], {}, ia, "documents: the list is empty"),
                 ("", ["x"], {}, ia, "query: empty"),
                 (QUERY, ["x"] * 3000, {}, ia, "documents: 3000 texts exceed the limit"),
                 (QUERY, ["x"], {"dimensions": ("u", 3)}, ia, "dimensions: not accepted by Rerank"),
                 (QUERY, ["x"], {"top_n": ("u", 0)}, ia, "top_n"),
                 (QUERY, ["x"], {"model": ("s", "minilm")}, ERR + "NotSupported",
                  "is not a reranker: it makes embeddings"),
                 (QUERY, ["x"], {"model": ("s", "tiny")}, ERR + "NotSupported", "is not a reranker: it generates"),
                 (QUERY, ["a " * 700], {"truncate": ("b", False)}, ERR + "ContextOverflow", "documents[0..0]")]
        for query, docs, opts, name, text in cases:
            msg = self.assertDBusError(name, self.rerank, c, query, docs, **opts)
            self.assertIn(text, msg)
        msg = self.assertDBusError(ERR + "NotSupported", c.call, "Embed", "(asa{sv})",
                                   (["x"], variant_dict({"model": ("s", "ranker")})), "(aada{sv})")
        self.assertIn("is a reranker", msg)
        results, _ = self.rerank(c, QUERY, ["still here"])
        self.assertEqual(len(results), 1)

    def test_polkit_action(self):
        c = self.client()
        self.polkit.allow(["org.npullm.generate"])
        try:
            self.assertDBusError(ERR + "NotAuthorized", self.rerank, c, QUERY, ["x"])
            self.polkit.allow(["org.npullm.embed"])
            self.assertEqual(len(self.rerank(c, QUERY, ["x"])[0]), 1)
        finally:
            self.polkit.mock("AllowUnknown", "(b)", (True,))

    def test_client_rerank(self):
        c = self.client()
        results, _ = self.rerank(c, QUERY, DOCS[:4])
        out = self.run_client("rerank", "--query", QUERY, *DOCS[:4])
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = [line.split("\t") for line in out.stdout.decode().split("\n")[:-1]]
        self.assertEqual([int(r[0]) for r in rows], [i for i, _ in results])
        self.assertEqual([r[2] for r in rows], [DOCS[i] for i, _ in results])
        for (i, score), row in zip(results, rows):
            self.assertLess(abs(float(row[1]) - score), 1e-6 * max(1, abs(score)))
        lines = [DOCS[0], DOCS[2], DOCS[3]]  # stdin: one per non-empty line
        best, _ = self.rerank(c, QUERY, lines, top_n=("u", 1))
        out = self.run_client("rerank", "--json", "--top-n", "1", "--query", QUERY, input="\n".join(lines).encode())
        self.assertEqual(out.returncode, 0, out.stderr)
        doc = json.loads(out.stdout)
        self.assertEqual([r["index"] for r in doc["results"]], [best[0][0]])
        self.assertEqual((doc["info"]["model"], doc["info"]["documents"]), ("ranker", 3))
        out = self.run_client("rerank", "x")
        self.assertEqual(out.returncode, 2)
        self.assertIn(b"--query", out.stderr)
        out = self.run_client("rerank", "--query", QUERY, "--model", "minilm", "x")
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertIn(b"not a reranker", out.stderr)
        for flag in ("--top-n", "--dimensions"):
            out = self.run_client("rerank", flag, "-1", "--query", QUERY, "x")
            self.assertEqual(out.returncode, 2, out.stderr)
            self.assertIn(flag.encode() + b" -1: expected a whole number of 1 or more", out.stderr)
        out = self.run_client("rerank", "--top-n", "5000", "--query", QUERY, "x")
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn(b"out of range", out.stderr)


if __name__ == "__main__":
    sys.exit(run_tap(__name__))
