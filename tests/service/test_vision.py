#!/usr/bin/python3
"""DescribeImage through the real bus: a Gemma 3 model with its vision
projector beside it streams a description like Generate (npullm-client
describe-image, from a file or a pipe); text-only models say NotSupported;
corrupt, truncated, enormous or oversized images give InvalidArgument and
the daemon keeps serving; a broken projector fails the image call, not
the model.

Environment (set by tests/vision/meson.build): NPULLMD, NPULLM_CLIENT,
NPULLM_TEST_MODEL (llama, text only), NPULLM_TEST_VISION_MODEL (gemma3,
or the architecture NPULLM_TEST_VISION_ARCH names: gemma4 with a gemma4v
projector), NPULLM_TEST_MMPROJ (its projector), NPULLM_TEST_IMAGES (a
folder of images)."""

import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import gguf_patch  # noqa: E402
import npullm_testbus as tb  # noqa: E402
from npullm_testbus import GLib, Gio, ServiceTestCase, run_tap, variant_dict  # noqa: E402

GREEDY = {"temperature": ("d", 0.0), "max_tokens": ("u", 6)}
MAX_IMAGE_BYTES = 200000


def vision_model_dir(workdir):
    """vision.gguf + vision.mmproj.gguf, plain.gguf (text only), and in a
    folder of its own badproj.gguf + a projector whose metadata matches
    but one of whose tensors is missing (paired, fails to load)."""
    d = os.path.join(workdir, "models")
    os.makedirs(os.path.join(d, "bad"), exist_ok=True)
    gemma = tb.env_path("NPULLM_TEST_VISION_MODEL")
    mmproj = tb.env_path("NPULLM_TEST_MMPROJ")
    tb.place_model(gemma, os.path.join(d, "vision.gguf"))
    tb.place_model(mmproj, os.path.join(d, "vision.mmproj.gguf"))
    tb.place_model(tb.env_path("NPULLM_TEST_MODEL"), os.path.join(d, "plain.gguf"))
    tb.place_model(gemma, os.path.join(d, "bad", "badproj.gguf"))
    g = gguf_patch.GGUF(mmproj)
    g.tensors = [t for t in g.tensors if t["name"] != "v.blk.0.attn_q.weight"]
    g.write(os.path.join(d, "bad", "badproj.mmproj.gguf"))
    return d


class VisionServiceCase(ServiceTestCase):
    """npullmd serving vision_model_dir(), vision by default; the test
    images at hand."""
    ARGS = ("--default-model", "vision")
    make_model_dir = staticmethod(vision_model_dir)

    @classmethod
    def setUpClass(cls):
        cls.images = tb.env_path("NPULLM_TEST_IMAGES")
        super().setUpClass()

    def image(self, name):
        return os.path.join(self.images, name)

    def write(self, name, data):
        path = os.path.join(self.workdir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path


class VisionTest(VisionServiceCase):
    CONFIG = {"Limits": {"MaxImageBytes": str(MAX_IMAGE_BYTES)}, "Models": {"MaxContext": "512"}}

    def describe(self, c, fd, prompt="What is this?", options=None):
        fds = Gio.UnixFDList.new()
        idx = fds.append(fd)
        return c.call("DescribeImage", "(hsa{sv})", (idx, prompt, variant_dict(options or GREEDY)), "(o)",
                      fd_list=fds)[0]

    def describe_file(self, c, path, **kw):
        fd = os.open(path, os.O_RDONLY)
        try:
            return self.describe(c, fd, **kw)
        finally:
            os.close(fd)

    def finish(self, c, path, timeout=60):
        self.assertTrue(c.wait(lambda: c.finished_of(path) is not None, timeout), "request did not finish")
        reason, stats = c.finished_of(path)
        return "".join(c.tokens_of(path)), reason, stats

    def assert_still_serving(self, c):
        text, reason, stats = c.run("Hello", variant_dict(GREEDY))
        self.assertEqual(reason, "length", stats)

    # ---- tests -------------------------------------------------------------------

    def test_list_models(self):
        c = self.client()
        models = {m["name"]: m for m in c.call("ListModels", reply="(aa{sv})")[0]}
        self.assertEqual(sorted(models), ["badproj", "plain", "vision"])
        self.assertTrue(models["vision"]["vision"])
        self.assertFalse(models["plain"]["vision"])
        self.assertEqual(models["vision"]["architecture"], os.environ.get("NPULLM_TEST_VISION_ARCH", "gemma3"))
        self.assertIn("vision", models["vision"]["capabilities"])

    def test_describe_streams(self):
        c = self.client()
        path = self.describe_file(c, self.image("rose.png"))
        text, reason, stats = self.finish(c, path)
        self.assertEqual(reason, "length", stats)
        self.assertEqual(stats["generated_tokens"], 6)
        # <bos><start_of_turn>user\n\n\n<start_of_image> + 16 image rows +
        # <end_of_image>\n\nWhat is this?<end_of_turn>\n<start_of_turn>model\n
        self.assertGreater(stats["prompt_tokens"], 16 + 8)
        self.assertEqual(stats["model"], "vision")
        self.assertGreater(len(text), 0)
        # greedy: the same image gives the same text, a different one differs
        path2 = self.describe_file(c, self.image("rose.png"))
        self.assertEqual(self.finish(c, path2)[0], text)
        texts = set()
        for name in ("rose.png", "logo.png", "wizard.jpg", "tall.png"):
            texts.add(self.finish(c, self.describe_file(c, self.image(name)))[0])
        self.assertGreater(len(texts), 1, "the image does not change the description")
        self.wait_idle(c)

    def test_formats_and_empty_prompt(self):
        c = self.client()
        for name in ("rose.jpg", "rose-lossless.webp", "rose-alpha.png", "rose-cmyk.jpg"):
            text, reason, stats = self.finish(c, self.describe_file(c, self.image(name), prompt=""))
            self.assertEqual(reason, "length", "%s: %s" % (name, stats))
        # the lossless WebP is the PNG's pixels: same description
        png = self.finish(c, self.describe_file(c, self.image("rose.png")))[0]
        webp = self.finish(c, self.describe_file(c, self.image("rose-lossless.webp")))[0]
        self.assertEqual(png, webp)

    def test_client_file_and_pipe(self):
        r = self.run_client("describe-image", "--max-tokens", "5", "--temperature", "0", self.image("rose.png"),
                            "What is this?")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(len(r.stdout.strip()), 0)
        with open(self.image("rose.png"), "rb") as f:
            data = f.read()
        # through a pipe: stdin is passed as the descriptor
        piped = subprocess.run("cat %s | %s --address %s describe-image --max-tokens 5 --temperature 0 - 'What is this?'"
                               % (self.image("rose.png"), self.client_path, self.bus.address),
                               shell=True, capture_output=True, timeout=60, env=self.bus.env)
        self.assertEqual(piped.returncode, 0, piped.stderr)
        self.assertEqual(piped.stdout, r.stdout)
        # and through stdin redirected from the file
        redirected = self.run_client("describe-image", "--max-tokens", "5", "--temperature", "0", "-",
                                     "What is this?", input=data)
        self.assertEqual(redirected.returncode, 0, redirected.stderr)
        self.assertEqual(redirected.stdout, r.stdout)

    def test_text_only_model(self):
        c = self.client()
        opts = dict(GREEDY, model=("s", "plain"))
        msg = self.assertDBusError("org.npullm.Error.NotSupported", self.describe_file, c, self.image("rose.png"),
                                   options=opts)
        self.assertIn("plain", msg)
        r = self.run_client("--model", "plain", "describe-image", self.image("rose.png"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"has no vision projector", r.stderr)

    def test_bad_images(self):
        c = self.client()
        with open(self.image("rose.png"), "rb") as f:
            png = f.read()
        huge = bytearray(png)
        huge[16:24] = struct.pack(">II", 60000, 60000)
        corrupt = bytearray(png)
        for i in range(60, len(corrupt) - 20, 7):
            corrupt[i] ^= 0x5A
        cases = {
            "garbage.png": (b"\x89PNG\r\n\x1a\n" + b"\0" * 100, "png"),
            "truncated.png": (png[: len(png) // 2], "truncated"),
            "corrupt.png": (bytes(corrupt), "png"),
            "huge.png": (bytes(huge), "exceeds the limit"),
            "text.txt": (b"hello, I am not an image\n", "not a PNG, JPEG or WebP"),
            "big.png": (png + b"\0" * MAX_IMAGE_BYTES, "bytes, expected 1 to"),
        }
        for name, (data, needle) in cases.items():
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", self.describe_file, c,
                                       self.write(name, data))
            self.assertIn(needle, msg, name)
        with open(self.image("rose.jpg"), "rb") as f:
            jpg = f.read()
        msg = self.assertDBusError("org.npullm.Error.InvalidArgument", self.describe_file, c,
                                   self.write("truncated.jpg", jpg[:-200]))
        self.assertIn("jpeg", msg)
        r = self.run_client("--json", "describe-image", self.write("t.png", png[:300]))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"org.npullm.Error.InvalidArgument", r.stdout)
        self.assert_still_serving(c)
        self.wait_idle(c)

    def test_pipes(self):
        c = self.client()
        # an empty pipe (writer closed)
        r, w = os.pipe()
        os.close(w)
        try:
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", self.describe, c, r)
            self.assertIn("empty", msg)
        finally:
            os.close(r)
        # more than MaxImageBytes through a pipe: refused at the cap
        r, w = os.pipe()
        writer = subprocess.Popen(["sh", "-c", "head -c %d /dev/zero" % (MAX_IMAGE_BYTES * 3)], stdout=w)
        os.close(w)
        try:
            box = {}
            fds = Gio.UnixFDList.new()
            idx = fds.append(r)
            try:
                c.call("DescribeImage", "(hsa{sv})", (idx, "x", variant_dict(GREEDY)), "(o)", fd_list=fds)
            except GLib.Error as e:
                box["error"] = e
            self.assertEqual(tb.dbus_error_name(box.get("error")), "org.npullm.Error.InvalidArgument")
            self.assertIn("more than %d bytes" % MAX_IMAGE_BYTES, box["error"].message)
        finally:
            os.close(r)
            writer.kill()
            writer.wait()
        # sockets and directories are still refused up front
        a, b = __import__("socket").socketpair()
        try:
            self.assertDBusError("org.npullm.Error.InvalidArgument", self.describe, c, a.fileno())
        finally:
            a.close()
            b.close()
        self.assert_still_serving(c)

    def test_broken_projector(self):
        c = self.client()
        # its metadata is sound (paired, the image preprocessed for it), a
        # tensor is missing: the request fails when the tower loads
        path = self.describe_file(c, self.image("rose.png"), options=dict(GREEDY, model=("s", "badproj")))
        text, reason, stats = self.finish(c, path)
        self.assertEqual(reason, "error")
        self.assertEqual(stats["error_name"], "org.npullm.Error.ModelLoadFailed")
        self.assertIn("vision projector", stats["error"])
        # the model itself serves text
        text, reason, stats = c.run("Hello", variant_dict(dict(GREEDY, model=("s", "badproj"))))
        self.assertEqual(reason, "length", stats)

    def test_cancel_and_system(self):
        c = self.client()
        path = self.describe_file(c, self.image("wizard.jpg"), options=dict(GREEDY, max_tokens=("u", 200)))
        c.call("Cancel", path=path, iface=tb.REQUEST_IFACE)
        text, reason, stats = self.finish(c, path)
        self.assertIn(reason, ("cancelled", "length"))
        opts = dict(GREEDY, system=("s", "Answer in French."))
        text, reason, stats = self.finish(c, self.describe_file(c, self.image("rose.png"), options=opts))
        self.assertEqual(reason, "length", stats)
        msg = self.assertDBusError("org.npullm.Error.InvalidArgument", self.describe_file, c,
                                   self.image("rose.png"), options=dict(GREEDY, raw=("b", True)))
        self.assertIn("raw", msg)
        self.wait_idle(c)


if __name__ == "__main__":
    sys.exit(run_tap("test_vision"))
