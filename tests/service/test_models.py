#!/usr/bin/python3
"""Model discovery through the real bus, on generated stores laid out
exactly as users have them:

- an LM Studio folder (publisher/repo/FILE.gguf) and a Hugging Face
  download (gemma-3 model + mmproj-model-f16.gguf beside it), in one root;
- an Ollama store (manifests/registry.ollama.ai/library/NAME/TAG, blobs/
  sha256-HEX) with a text model and a vision model (projector layer), plus
  a manifest with a bad digest, in another root;
- an unsupported (mamba) file whose name sorts first, a symlink out of the
  root, a projector that fits no model.

Environment (set by tests/vision/meson.build): NPULLMD, NPULLM_CLIENT,
NPULLM_TEST_MODEL (llama), NPULLM_TEST_VISION_MODEL (gemma3),
NPULLM_TEST_MMPROJ, NPULLM_TEST_IMAGES.
"""

import configparser
import hashlib
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import gguf_patch  # noqa: E402
import npullm_testbus as tb  # noqa: E402
from npullm_testbus import ServiceTestCase, run_tap, variant_dict  # noqa: E402

GREEDY = {"temperature": ("d", 0.0), "max_tokens": ("u", 4)}
LMSTUDIO = "Llama-3.2-1B-Instruct-Q4_K_M"
HF_GEMMA = "gemma-3-4b-it-Q4_K_M"
MAMBA = "0-mamba"


def ollama_blob(store, src):
    """Places src as blobs/sha256-HEX; returns the digest."""
    h = hashlib.sha256()
    with open(src, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    tb.place_model(src, os.path.join(store, "blobs", "sha256-" + digest))
    return "sha256:" + digest


def ollama_manifest(store, name, tag, layers):
    d = os.path.join(store, "manifests", "registry.ollama.ai", "library", name)
    os.makedirs(d, exist_ok=True)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                   "digest": "sha256:" + "0" * 64, "size": 2},
        "layers": [{"mediaType": m, "digest": dg, "size": 1} for m, dg in layers],
    }
    with open(os.path.join(d, tag), "w") as f:
        json.dump(manifest, f)


class ModelsTest(ServiceTestCase):
    ARGS = ()

    @classmethod
    def make_model_dirs(cls, workdir):
        llama = tb.env_path("NPULLM_TEST_MODEL")
        gemma = tb.env_path("NPULLM_TEST_VISION_MODEL")
        mmproj = tb.env_path("NPULLM_TEST_MMPROJ")
        cls.images = tb.env_path("NPULLM_TEST_IMAGES")

        root = os.path.join(workdir, "models")
        lms = os.path.join(root, "lmstudio-community", "Llama-3.2-1B-Instruct-GGUF")
        hf = os.path.join(root, "gemma-3-4b-it-GGUF")
        other = os.path.join(root, "other")
        for d in (lms, hf, other):
            os.makedirs(d)
        tb.place_model(llama, os.path.join(lms, LMSTUDIO + ".gguf"))
        tb.place_model(gemma, os.path.join(hf, HF_GEMMA + ".gguf"))
        tb.place_model(mmproj, os.path.join(hf, "mmproj-model-f16.gguf"))
        # a projector with no model of its width or type in its folder
        tb.place_model(mmproj, os.path.join(other, "mmproj-lonely.gguf"))
        tb.place_model(llama, os.path.join(other, "textonly.gguf"))
        g = gguf_patch.GGUF(llama)
        g.set_kv("general.architecture", gguf_patch.STRING, b"mamba")
        g.write(os.path.join(root, MAMBA + ".gguf"))
        outside = os.path.join(workdir, "outside")
        os.makedirs(outside)
        tb.place_model(llama, os.path.join(outside, "escape.gguf"))
        os.symlink(os.path.join(outside, "escape.gguf"), os.path.join(root, "escape.gguf"))
        os.symlink(outside, os.path.join(root, "escape-dir"))

        store = os.path.join(workdir, "ollama")
        os.makedirs(os.path.join(store, "blobs"))
        text = ollama_blob(store, llama)
        vision = ollama_blob(store, gemma)
        proj = ollama_blob(store, mmproj)
        ollama_manifest(store, "llama3.2", "1b", [("application/vnd.ollama.image.model", text)])
        ollama_manifest(store, "gemma3", "4b", [("application/vnd.ollama.image.model", vision),
                                                 ("application/vnd.ollama.image.projector", proj)])
        ollama_manifest(store, "broken", "latest", [("application/vnd.ollama.image.model", "sha256:../../etc")])
        return [root, store]

    def models(self, c):
        return {m["name"]: m for m in c.call("ListModels", reply="(aa{sv})")[0]}

    def test_discovery(self):
        c = self.client()
        models = self.models(c)
        self.assertEqual(sorted(models), sorted([MAMBA, LMSTUDIO, HF_GEMMA, "textonly", "gemma3:4b", "llama3.2:1b"]))
        for name, m in models.items():
            self.assertEqual(m["supported"], name != MAMBA, m)
        self.assertEqual(models[LMSTUDIO]["architecture"], "llama")
        self.assertTrue(models[HF_GEMMA]["vision"])         # mmproj-model-f16.gguf, paired by metadata
        self.assertTrue(models["gemma3:4b"]["vision"])      # the manifest's projector layer
        self.assertFalse(models["llama3.2:1b"]["vision"])
        self.assertFalse(models["textonly"]["vision"])      # a llama model: no gemma3 projector fits it
        self.assertEqual(models["gemma3:4b"]["architecture"], "gemma3")

    def test_unsupported(self):
        c = self.client()
        m = self.models(c)[MAMBA]
        self.assertEqual(m["architecture"], "mamba")
        self.assertIn("mamba", m["reason"])
        self.assertIn("not supported", m["reason"])
        # never the default, although its name sorts first
        self.assertEqual(c.prop("DefaultModel"), LMSTUDIO)
        # ListModels says which model is the default and by which rule
        models = self.models(c)
        self.assertEqual([n for n, e in models.items() if "default_because" in e], [LMSTUDIO])
        self.assertIn("by directory order, then name", models[LMSTUDIO]["default_because"])
        self.assertTrue(all(isinstance(e["administrator"], bool) for e in models.values()))
        msg = self.assertDBusError("org.npullm.Error.NotSupported", c.generate, "hi",
                                   variant_dict({"model": ("s", MAMBA)}))
        self.assertIn("mamba", msg)
        self.assertDBusError("org.npullm.Error.NotSupported", c.call, "LoadModel", "(s)", (MAMBA,))
        r = self.run_client("models")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"(cannot be used: architecture 'mamba' is not supported", r.stdout)

    def test_generate_from_each_layout(self):
        c = self.client()
        for name in ("llama3.2:1b", LMSTUDIO):
            text, reason, stats = c.run("Hello", variant_dict(dict(GREEDY, model=("s", name))))
            self.assertEqual(reason, "length", stats)
            self.assertEqual(stats["model"], name)

    def test_describe_with_ollama_projector(self):
        r = self.run_client("--model", "gemma3:4b", "describe-image", "--max-tokens", "3", "--temperature", "0",
                            os.path.join(self.images, "rose.png"), timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_models_changed(self):
        c = self.client()
        self.models(c)
        c.signals.clear()
        tb.place_model(tb.env_path("NPULLM_TEST_MODEL"), os.path.join(self.model_dir, "fresh.gguf"))
        try:
            self.assertIn("fresh", self.models(c))
            self.assertTrue(c.wait(lambda: any(s[2] == "ModelsChanged" for s in c.signals), 10))
        finally:
            os.unlink(os.path.join(self.model_dir, "fresh.gguf"))
        self.assertNotIn("fresh", self.models(c))


class ShippedConfigTest(unittest.TestCase):
    """The shipped npullm.conf searches the directories docs/models.md
    says are searched by default (issue #34: its Directories= left out the
    Ollama stores, and a key set in the file replaces the built-in list)."""

    def test_directories_match_the_docs(self):
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        with open(os.path.join(root, "docs", "models.md")) as f:
            docs = f.read()
        sentence = re.search(r"The default list is (.*?)\(each", docs, re.S).group(1)
        documented = re.findall(r"`(/[^`]+)`", sentence)
        self.assertGreaterEqual(len(documented), 4, sentence)
        conf = configparser.ConfigParser(interpolation=None)
        conf.read(os.path.join(root, "data", "npullm.conf"))
        shipped = [d for d in conf.get("Models", "Directories", fallback="").split(";") if d]
        self.assertEqual(shipped, documented)


if __name__ == "__main__":
    sys.exit(run_tap("test_models"))
