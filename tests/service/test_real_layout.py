#!/usr/bin/python3
"""Files laid out as the published downloads (tests/fixtures/make-real-layout.py:
Mistral-7B-Instruct-v0.3, Phi-4-mini-instruct, Granite-3.3-2B-instruct,
SmolLM3-3B, DeepSeek-R1-Distill-Qwen-1.5B, Qwen3.5-4B, all Q4_K_M, and
gpt-oss-20b with its MXFP4 experts) through the service: ListModels lists
each as supported with its model card's parameter count, its context and
its dominant type (q4_K, mxfp4), and a greedy Generate on the
models NPULLM_REAL_LAYOUT_GENERATE names answers with its chat template (the
R1 distill's opens a <think> block: its tokens come as Thinking). A model
with a projector (Gemma 4 E2B and E4B with their gemma4v mmproj files)
lists the vision capability and answers a DescribeImage of a real image.

NPULLM_REAL_LAYOUTS: "name=path;..." of the generated files;
NPULLM_REAL_LAYOUT_MMPROJS: the same for projectors (placed beside their
model as NAME.mmproj.gguf); NPULLM_TEST_IMAGES: tests/vision/images.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
sys.dont_write_bytecode = True
import npullm_testbus as tb  # noqa: E402
from npullm_testbus import Gio, ServiceTestCase, run_tap, variant_dict  # noqa: E402
from real_layouts import LAYOUTS  # noqa: E402

# Loading repacks every matrix: one model at a time, each unloaded after
# its request; a short context keeps the KV caches small.
CONFIG = {"Models": {"IdleTimeout": "0", "MaxContext": "256"}}
GREEDY = {"temperature": ("d", 0.0), "max_tokens": ("u", 2)}


def layouts(var="NPULLM_REAL_LAYOUTS"):
    value = tb.env_path(var) if var == "NPULLM_REAL_LAYOUTS" else os.environ.get(var, "")
    return dict(item.split("=", 1) for item in value.split(";") if item)


# A small real image: the full-size tower's patches and the E2B/E4B prefill
# of its image rows stay within a test's time on 2 loaded cores
IMAGE = "rose-16.png"


def thinking_of(c, path):
    return "".join(p[0] for (sp, i, m, p) in c.signals if sp == path and m == "Thinking")


class RealLayoutTest(ServiceTestCase):
    CONFIG = CONFIG
    ARGS = ()

    @staticmethod
    def make_model_dir(workdir):
        d = os.path.join(workdir, "models")
        os.makedirs(d)
        for name, path in layouts().items():
            tb.place_model(path, os.path.join(d, name + ".gguf"))
        for name, path in layouts("NPULLM_REAL_LAYOUT_MMPROJS").items():
            tb.place_model(path, os.path.join(d, name + ".mmproj.gguf"))
        return d

    def test_listed_as_published(self):
        c = self.client()
        listed = {m["name"]: m for m in c.call("ListModels", reply="(aa{sv})")[0]}
        for name in layouts():
            L = LAYOUTS[name]
            with self.subTest(model=name):
                m = listed[name]
                self.assertTrue(m["supported"], m["reason"])
                self.assertEqual(m["reason"], "")
                self.assertEqual(m["architecture"], L["arch"])
                self.assertEqual(m["parameters"], L["params"])
                self.assertEqual(m["context_length"], L["ctx"])
                self.assertEqual(m["quantization"], L.get("quant", "q4_K"))
                self.assertIn("chat", m["capabilities"])
                if name in layouts("NPULLM_REAL_LAYOUT_MMPROJS"):
                    self.assertIn("vision", m["capabilities"])

    def test_generate(self):
        names = [n for n in os.environ.get("NPULLM_REAL_LAYOUT_GENERATE", "").split(",") if n]
        c = self.client()
        for name in names:
            with self.subTest(model=name):
                opts = variant_dict(dict(GREEDY, model=("s", name)))
                path = c.generate("Hi", opts)
                self.assertTrue(c.wait(lambda: c.finished_of(path) is not None, 600), name)
                reason, stats = c.finished_of(path)
                self.assertIn(reason, ("length", "stop"), stats)
                self.assertGreaterEqual(stats["generated_tokens"], 1)
                thinking = thinking_of(c, path)
                if name.startswith("deepseek-r1"):  # the template opens <think>
                    self.assertNotEqual(thinking, "", name)
                    self.assertEqual("".join(c.tokens_of(path)), "", name)
                else:
                    self.assertEqual(thinking, "", name)
                self.wait_idle(c, 60)

    def test_describe_image(self):
        c = self.client()
        for name in layouts("NPULLM_REAL_LAYOUT_MMPROJS"):
            with self.subTest(model=name):
                fds = Gio.UnixFDList.new()
                fd = os.open(os.path.join(tb.env_path("NPULLM_TEST_IMAGES"), IMAGE), os.O_RDONLY)
                try:
                    idx = fds.append(fd)
                    opts = variant_dict(dict(GREEDY, model=("s", name)))
                    path = c.call("DescribeImage", "(hsa{sv})", (idx, "What is this?", opts), "(o)", fd_list=fds)[0]
                finally:
                    os.close(fd)
                self.assertTrue(c.wait(lambda: c.finished_of(path) is not None, 600), name)
                reason, stats = c.finished_of(path)
                self.assertIn(reason, ("length", "stop"), stats)
                self.assertGreaterEqual(stats["generated_tokens"], 1)
                self.assertEqual(stats["model"], name)
                self.wait_idle(c, 60)


if __name__ == "__main__":
    sys.exit(run_tap(__name__))
