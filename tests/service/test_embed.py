#!/usr/bin/python3
"""Embed through npullmd (docs/embeddings.md): the vectors are npl_embed's
(npullm-run --embed on the same file), dimensions and truncate, the info;
ListModels' capabilities for an embedding model in a folder and in an
Ollama store; bad input (empty list, empty text, 100k texts, a 10 MiB
text, a chat model for Embed and an embedding model for Generate, Chat
and Complete, invalid UTF-8 from npullm-client) gives named errors and the
daemon keeps serving; the org.npullm.embed polkit action is checked."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npullm_testbus as tb  # noqa: E402
from npullm_testbus import GLib, run_tap, variant_dict  # noqa: E402
from test_models import ollama_blob, ollama_manifest  # noqa: E402

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Crème brûlée, s'il vous plaît!", "東京タワー",
         "semantic search for desktop files", "a " * 700]
EMBED = "org.npullm.Error."
# a gemma-embedding file (EmbeddingGemma's architecture), when meson made one
GEMMA = os.environ.get("NPULLM_TEST_GEMMA_EMBED_MODEL")


def run_engine(model, texts, *extra):
    """npl_embed's vectors for texts, all in one call (npullm-run --embed)."""
    args = [tb.env_path("NPULLM_RUN"), model, "--json"] + list(extra)
    for t in texts:
        args += ["--embed", t]
    out = subprocess.run(args, capture_output=True, check=True, timeout=120)
    return json.loads(out.stdout)["embeddings"]


class EmbedTest(tb.ServiceTestCase):
    ARGS = ("--default-model", "tiny")

    @classmethod
    def make_model_dirs(cls, workdir):
        d = tb.make_model_dir(workdir)
        tb.place_model(tb.env_path("NPULLM_TEST_EMBED_MODEL"), os.path.join(d, "minilm.gguf"))
        if GEMMA:  # after minilm in name order: minilm stays Embed's default
            tb.place_model(GEMMA, os.path.join(d, "vecgemma.gguf"))
        store = os.path.join(workdir, "ollama")
        os.makedirs(os.path.join(store, "blobs"))
        digest = ollama_blob(store, tb.env_path("NPULLM_TEST_EMBED_MODEL"))
        ollama_manifest(store, "all-minilm", "latest", [("application/vnd.ollama.image.model", digest)])
        return [d, store]

    def embed(self, c, texts, **opts):
        return c.call("Embed", "(asa{sv})", (texts, variant_dict(opts)), "(aada{sv})", timeout=120000)

    def test_vectors_are_the_engines(self):
        c = self.client()
        vecs, info = self.embed(c, TEXTS, model=("s", "minilm"))
        want = run_engine(tb.env_path("NPULLM_TEST_EMBED_MODEL"), TEXTS)
        self.assertEqual(len(vecs), len(TEXTS))
        for got, ref in zip(vecs, want):
            self.assertEqual(len(got), 64)
            self.assertLess(max(abs(a - b) for a, b in zip(got, ref)), 1e-6)
            self.assertAlmostEqual(sum(a * a for a in got), 1.0, places=5)
        self.assertEqual(info["model"], "minilm")
        self.assertEqual(info["dimensions"], 64)
        self.assertEqual(info["pooling"], "mean")
        self.assertEqual(info["truncated"], 1)  # the 700-word text, context 512
        self.assertGreater(info["prompt_tokens"], 512)
        self.assertGreater(info["total_time_ms"], 0)
        # the default model of Embed is the first embedding model (the
        # folder's, the first root); the Ollama store's; Matryoshka
        self.assertEqual(self.embed(c, ["x"])[1]["model"], "minilm")
        vecs16, info16 = self.embed(c, TEXTS[:2], model=("s", "all-minilm:latest"), dimensions=("u", 16),
                                    priority=("s", "background"))
        self.assertEqual(info16["model"], "all-minilm:latest")
        want16 = run_engine(tb.env_path("NPULLM_TEST_EMBED_MODEL"), TEXTS[:2], "--dimensions", "16")
        for got, ref in zip(vecs16, want16):
            self.assertEqual(len(got), 16)
            self.assertLess(max(abs(a - b) for a, b in zip(got, ref)), 1e-6)
        # more texts than one engine step: the same vectors as alone
        many = ["text number %d about things" % i for i in range(150)]
        vecs_many, info_many = self.embed(c, many, model=("s", "minilm"))
        self.assertEqual(len(vecs_many), 150)
        alone, _ = self.embed(c, [many[149]], model=("s", "minilm"))
        self.assertLess(max(abs(a - b) for a, b in zip(alone[0], vecs_many[149])), 1e-6)
        self.assertGreaterEqual(info_many["passes"], 3)

    def test_capabilities(self):
        c = self.client()
        (models,) = c.call("ListModels", None, None, "(aa{sv})")
        by_name = {m["name"]: m for m in models}
        for name in ("minilm", "all-minilm:latest"):
            self.assertTrue(by_name[name]["supported"], by_name[name])
            self.assertEqual(by_name[name]["capabilities"], ["embedding"])
        self.assertEqual(by_name["tiny"]["capabilities"], ["completion", "chat"])
        self.assertEqual(by_name["broken"]["capabilities"], [])
        self.assertEqual(c.prop("DefaultModel"), "tiny")

    def test_gemma_embedding(self):
        if not GEMMA:
            self.skipTest("no gemma-embedding fixture")
        c = self.client()
        (models,) = c.call("ListModels", None, None, "(aa{sv})")
        m = {m["name"]: m for m in models}["vecgemma"]
        self.assertTrue(m["supported"], m)
        self.assertEqual(m["capabilities"], ["embedding"])
        vecs, info = self.embed(c, TEXTS[:3], model=("s", "vecgemma"))
        for got, ref in zip(vecs, run_engine(GEMMA, TEXTS[:3])):
            self.assertLess(max(abs(a - b) for a, b in zip(got, ref)), 1e-6)
        self.assertEqual((info["model"], info["dimensions"], info["pooling"]), ("vecgemma", 64, "mean"))

    def test_bad_input(self):
        c = self.client()
        ia = EMBED + "InvalidArgument"
        cases = [([], {}, ia, "texts: the list is empty"),
                 (["ok", ""], {}, ia, "texts[1]: empty text"),
                 (["x"] * 100000, {}, ia, "texts: 100000 texts exceed the limit of 2048"),
                 (["y" * (10 << 20)], {}, ia, "texts[0]: 10485760 bytes exceed the limit"),
                 (["z" * (1 << 20)] * 9, {}, ia, "bytes in all exceed the limit"),
                 (["hi"], {"model": ("s", "tiny")}, EMBED + "NotSupported", "is not an embedding model"),
                 (["hi"], {"model": ("s", "nope")}, EMBED + "NoSuchModel", "nope"),
                 (["hi"], {"max_tokens": ("u", 3)}, ia, "max_tokens: not accepted by Embed"),
                 (["hi"], {"dimensions": ("u", 0)}, ia, "dimensions"),
                 (["hi"], {"model": ("s", "minilm"), "dimensions": ("u", 65)}, ia,
                  "dimensions: 65 is more than the model's 64"),
                 (["a " * 700], {"model": ("s", "minilm"), "truncate": ("b", False)},
                  EMBED + "ContextOverflow", "texts[0..0]")]
        for texts, opts, name, text in cases:
            msg = self.assertDBusError(name, self.embed, c, texts, **opts)
            self.assertIn(text, msg)
        S = lambda v: GLib.Variant("s", v)  # noqa: E731
        for method, arg in (("Generate", "hi"), ("Complete", "hi"),
                            ("Chat", [{"role": S("user"), "content": S("hi")}])):
            sig = "(aa{sv}a{sv})" if method == "Chat" else "(sa{sv})"
            msg = self.assertDBusError(EMBED + "NotSupported", c.call, method, sig,
                                       (arg, variant_dict({"model": ("s", "minilm")})))
            self.assertIn("is an embedding model", msg)
        # still serving both kinds
        vecs, _ = self.embed(c, ["still here"], model=("s", "minilm"))
        self.assertEqual(len(vecs[0]), 64)
        text, _ = c.call("Complete", "(sa{sv})", ("hi", variant_dict({"max_tokens": ("u", 2)})), "(sa{sv})")
        self.wait_idle(c)

    def test_polkit_action(self):
        c = self.client()
        self.polkit.allow(["org.npullm.generate"])
        try:
            self.assertDBusError(EMBED + "NotAuthorized", self.embed, c, ["hi"])
            self.polkit.allow(["org.npullm.embed"])
            vecs, _ = self.embed(c, ["hi"])
            self.assertEqual(len(vecs), 1)
        finally:
            self.polkit.mock("AllowUnknown", "(b)", (True,))

    def test_client_embed(self):
        out = self.run_client("embed", "--model", "minilm", "--dimensions", "8", "one", "two")
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = out.stdout.decode().split("\n")[:-1]
        self.assertEqual(len(rows), 2)
        self.assertEqual(len(rows[0].split()), 8)
        out = self.run_client("embed", "--json", input=b"from stdin\n")
        self.assertEqual(out.returncode, 0, out.stderr)
        doc = json.loads(out.stdout)
        self.assertEqual(len(doc["embeddings"]), 1)
        self.assertEqual(doc["info"]["dimensions"], 64)
        out = self.run_client("embed", input=b"bad \xff utf-8")
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn(b"UTF-8", out.stderr)
        out = self.run_client("embed", "--model", "tiny", "x")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn(b"not an embedding model", out.stderr)


class EmbedQueueTest(tb.ServiceTestCase):
    """One running slot: an Embed waits in the queue behind a generation
    (the same queue and slots), and runs once the slot is free."""
    CONFIG = {"Limits": {"MaxRunning": "1"}, "Models": {"MaxContext": "4096"}}

    @classmethod
    def make_model_dirs(cls, workdir):
        d = tb.make_model_dir(workdir)
        tb.place_model(tb.env_path("NPULLM_TEST_EMBED_MODEL"), os.path.join(d, "minilm.gguf"))
        return [d]

    def test_waits_for_the_slot(self):
        c = self.client()
        path = c.generate("Go on", variant_dict({"max_tokens": ("u", 3000)}))
        self.assertTrue(c.wait(lambda: len(c.tokens_of(path)) > 0, 60))
        box = c.call_async("Embed", "(asa{sv})", (["queued text"], variant_dict({"priority": ("s", "background")})))
        self.assertTrue(c.wait(lambda: c.prop("QueuedRequests") == 1, 30), box)
        self.assertNotIn("result", box)
        c.call("Cancel", path=path, iface="org.npullm.Request")
        self.assertTrue(c.wait(lambda: box, 60))
        self.assertEqual(len(box["result"][0]), 1, box)
        self.assertEqual(c.finished_of(path)[0], "cancelled")
        self.wait_idle(c)


if __name__ == "__main__":
    sys.exit(run_tap(__name__))
