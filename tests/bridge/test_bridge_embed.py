#!/usr/bin/python3
"""Embeddings through npullm-bridge and npullmd (docs/bridge.md): curl on
/api/embed, /api/embeddings and /v1/embeddings (input string and array,
dimensions, truncate, encoding_format float and base64, the vectors equal
to npullm-run --embed's), their errors (a chat model, empty input, a
wrong type, invalid UTF-8, a token array) with the daemon still serving,
/api/show and /api/tags capabilities; /v1/rerank (and llama.cpp's
aliases) with a reranker, its scores npullm-run --rerank's, top_n, its
errors; then the npm clients `ollama` (embed, embeddings) and `openai`
(embeddings.create float and base64, a batch of 64 texts) and node's
fetch on /v1/rerank in tests/bridge/embed-clients.mjs."""
import base64
import json
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TESTS, "service"))
sys.path.insert(0, HERE)
import npullm_testbus as tb  # noqa: E402
from npullm_testbus import run_tap  # noqa: E402
from test_bridge import BridgeTestCase, curl  # noqa: E402
from test_embed import run_engine  # noqa: E402


def close(a, b, tol=1e-6):
    return len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) < tol


class BridgeEmbedTest(BridgeTestCase):
    ARGS = ("--default-model", "tiny")

    @staticmethod
    def make_model_dir(workdir):
        d = tb.make_model_dir(workdir)
        tb.place_model(tb.env_path("NPULLM_TEST_EMBED_MODEL"), os.path.join(d, "minilm.gguf"))
        tb.place_model(tb.env_path("NPULLM_TEST_RERANK_MODEL"), os.path.join(d, "ranker.gguf"))
        return d

    def post(self, path, body=None, raw=None):
        status, text = curl(self.bridge.url, path, body=body, raw_body=raw)
        return status, json.loads(text)

    def error_of(self, status, doc, openai=False):
        return doc["error"]["message"] if openai else doc["error"]

    def test_endpoints(self):
        texts = ["hello world", "Grüße aus München"]
        want = run_engine(tb.env_path("NPULLM_TEST_EMBED_MODEL"), texts)
        st, doc = self.post("/api/embed", {"model": "minilm", "input": texts, "keep_alive": "5m"})
        self.assertEqual(st, 200, doc)
        self.assertEqual(doc["model"], "minilm")
        self.assertTrue(all(close(a, b) for a, b in zip(doc["embeddings"], want)))
        self.assertGreater(doc["prompt_eval_count"], 4)
        self.assertGreater(doc["total_duration"], 0)
        st, doc = self.post("/api/embed", {"model": "minilm", "input": "hello world", "dimensions": 8})
        self.assertEqual((st, len(doc["embeddings"]), len(doc["embeddings"][0])), (200, 1, 8))
        st, doc = self.post("/api/embeddings", {"model": "minilm:latest", "prompt": "hello world"})
        self.assertEqual(st, 200, doc)
        self.assertTrue(close(doc["embedding"], want[0]))  # NAME:latest is also NAME
        st, doc = self.post("/v1/embeddings", {"model": "minilm", "input": texts})
        self.assertEqual(st, 200, doc)
        self.assertEqual([d["index"] for d in doc["data"]], [0, 1])
        self.assertTrue(close(doc["data"][1]["embedding"], want[1]))
        self.assertEqual(doc["usage"]["prompt_tokens"], doc["usage"]["total_tokens"])
        st, doc = self.post("/v1/embeddings", {"model": "minilm", "input": texts[1], "encoding_format": "base64",
                                              "dimensions": 16})
        self.assertEqual(st, 200, doc)
        raw = base64.b64decode(doc["data"][0]["embedding"])
        vec = struct.unpack("<16f", raw)
        self.assertAlmostEqual(sum(x * x for x in vec), 1.0, places=5)
        # default model: the first embedding model
        st, doc = self.post("/api/embed", {"input": "x"})
        self.assertEqual((st, doc["model"]), (200, "minilm"))

    def test_errors(self):
        cases = [("/api/embed", {"model": "tiny", "input": "x"}, 400, "not an embedding model"),
                 ("/api/embed", {"model": "minilm", "input": ""}, 400, "empty text"),
                 ("/api/embed", {"model": "minilm", "input": []}, 400, "the list is empty"),
                 ("/api/embed", {"model": "minilm", "input": 3}, 400, "must be a string"),
                 ("/api/embed", {"model": "minilm", "input": "a " * 700, "truncate": False}, 400, "context"),
                 ("/api/embed", {"model": "nope", "input": "x"}, 404, "nope"),
                 ("/api/embeddings", {"model": "minilm", "prompt": ["x"]}, 400, "must be a string"),
                 ("/v1/embeddings", {"model": "minilm", "input": [[1, 2]]}, 400, "token arrays"),
                 ("/v1/embeddings", {"model": "minilm", "input": "x", "encoding_format": "int8"}, 400, "base64"),
                 ("/v1/embeddings", {"model": "minilm", "input": "x", "dimensions": -1}, 400, "whole number")]
        for path, body, status, text in cases:
            st, doc = self.post(path, body)
            self.assertEqual(st, status, (path, body, doc))
            self.assertIn(text, self.error_of(st, doc, path.startswith("/v1")))
        st, doc = self.post("/api/embed", raw=b'{"model": "minilm", "input": "bad \xff utf-8"}')
        self.assertEqual(st, 400, doc)
        for method in ("/api/generate", "/api/chat"):
            body = {"model": "minilm", "prompt": "x", "messages": [{"role": "user", "content": "x"}],
                    "stream": False}
            st, doc = self.post(method, body)
            self.assertEqual(st, 400, doc)
            self.assertIn("is an embedding model", doc["error"])
        st, doc = self.post("/api/embed", {"model": "minilm", "input": "still serving"})
        self.assertEqual(st, 200, doc)

    def test_rerank(self):
        query, docs = "what does the fox jump over?", ["The quick brown fox", "", "Crème brûlée", "東京タワー"]
        args = [tb.env_path("NPULLM_RUN"), tb.env_path("NPULLM_TEST_RERANK_MODEL"), "--json", "--rerank", query]
        for d in docs:
            args += ["--document", d]
        want = json.loads(subprocess.run(args, capture_output=True, check=True, timeout=120).stdout)["scores"]
        order = sorted(range(len(docs)), key=lambda i: -want[i])
        st, doc = self.post("/v1/rerank", {"model": "ranker", "query": query, "documents": docs})
        self.assertEqual(st, 200, doc)
        self.assertEqual((doc["model"], doc["object"]), ("ranker", "list"))
        self.assertEqual([r["index"] for r in doc["results"]], order)
        for r in doc["results"]:
            self.assertLess(abs(r["relevance_score"] - want[r["index"]]), 1e-6)
        self.assertGreater(doc["usage"]["prompt_tokens"], 8)
        self.assertEqual(doc["usage"]["prompt_tokens"], doc["usage"]["total_tokens"])
        # llama.cpp's server's aliases, top_n as it takes it (0: none, more
        # than the documents: all); no model is the first reranker
        for path, top_n, n in (("/rerank", 2, 2), ("/v1/reranking", 0, 0), ("/reranking", 9, 4)):
            st, doc = self.post(path, {"query": query, "documents": docs, "top_n": top_n})
            self.assertEqual((st, doc["model"]), (200, "ranker"), (path, doc))
            self.assertEqual([r["index"] for r in doc["results"]], order[:n], path)

    def test_rerank_errors(self):
        q = "query"
        cases = [({"model": "ranker", "documents": ["x"]}, 400, "\"query\" must be a string"),
                 ({"model": "ranker", "query": q}, 400, "\"documents\" must be an array"),
                 ({"model": "ranker", "query": q, "documents": []}, 400, "the list is empty"),
                 ({"model": "ranker", "query": "", "documents": ["x"]}, 400, "query: empty"),
                 ({"model": "ranker", "query": q, "documents": [{"text": "x"}]}, 400, "[0] must be a string"),
                 ({"model": "ranker", "query": q, "documents": ["x"], "top_n": -1}, 400, "whole number"),
                 ({"model": "minilm", "query": q, "documents": ["x"]}, 400, "not a reranker"),
                 ({"model": "tiny", "query": q, "documents": ["x"]}, 400, "not a reranker"),
                 ({"model": "nope", "query": q, "documents": ["x"]}, 404, "nope")]
        for body, status, text in cases:
            st, doc = self.post("/v1/rerank", body)
            self.assertEqual(st, status, (body, doc))
            self.assertIn(text, doc["error"]["message"])
        st, doc = self.post("/v1/rerank", raw=b'{"query": "q", "documents": ["bad \xff utf-8"]}')
        self.assertEqual(st, 400, doc)
        st, doc = self.post("/api/embed", {"model": "ranker", "input": "x"})
        self.assertEqual(st, 400, doc)
        self.assertIn("is a reranker", doc["error"])
        st, doc = self.post("/v1/rerank", {"query": q, "documents": ["still serving"]})
        self.assertEqual((st, len(doc["results"])), (200, 1))

    def test_capabilities(self):
        st, doc = self.post("/api/show", {"model": "minilm"})
        self.assertEqual((st, doc["capabilities"]), (200, ["embedding"]))
        st, doc = self.post("/api/show", {"model": "ranker"})
        self.assertEqual((st, doc["capabilities"]), (200, ["rerank"]))
        st, doc = self.post("/api/show", {"model": "tiny"})
        self.assertEqual(doc["capabilities"], ["completion"])
        status, text = curl(self.bridge.url, "/api/tags")
        caps = {m["name"]: m["capabilities"] for m in json.loads(text)["models"]}
        self.assertEqual(caps["minilm:latest"], ["embedding"])
        self.assertEqual(caps["tiny:latest"], ["completion"])

    def test_npm_clients(self):
        node = os.environ.get("NODE")
        if not node:
            self.skipTest("node is not installed")
        p = subprocess.run([node, os.path.join(HERE, "embed-clients.mjs"), self.bridge.url], cwd=TESTS,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for case in ("ollama embed", "ollama embeddings", "openai float", "openai base64", "batch of 64",
                     "errors", "rerank with fetch"):
            self.assertIn("ok " + case + "\n", p.stdout)


if __name__ == "__main__":
    sys.exit(run_tap("test_bridge_embed"))
