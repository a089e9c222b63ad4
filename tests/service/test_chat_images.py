#!/usr/bin/python3
"""Images in Chat through the real bus (issue #16): a user message may
carry images (`"images": ah`, descriptors with the call, checked like
DescribeImage's); a follow-up turn about the same image reuses its
positions from the KV pool (Finished `cached_tokens` covers them and
`encoded_images` is 0: the vision tower did not run) with exactly the
text a request without reuse gives. Errors: more images than the cap,
handles that do not name the descriptors, a socket, an image on an
assistant message, and images for a text-only model.

Environment: as tests/service/test_vision.py (tests/vision/meson.build)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npullm_testbus as tb  # noqa: E402
from npullm_testbus import GLib, Gio, run_tap, variant_dict  # noqa: E402
from test_vision import VisionServiceCase  # noqa: E402

GREEDY = {"temperature": ("d", 0.0), "max_tokens": ("u", 6)}
MAX_CHAT_IMAGES = 8  # NPP_MAX_CHAT_IMAGES


def message(role, content, images=None):
    m = {"role": GLib.Variant("s", role), "content": GLib.Variant("s", content)}
    if images is not None:
        m["images"] = GLib.Variant("ah", images)
    return m


class ChatImagesTest(VisionServiceCase):
    CONFIG = {"Models": {"MaxContext": "512"}}

    def chat(self, c, messages, fds=(), options=None):
        """messages: (role, content, [index into fds, ...] or None)."""
        fd_list = Gio.UnixFDList.new()
        for fd in fds:
            fd_list.append(fd)
        msgs = [message(r, t, imgs) for (r, t, imgs) in messages]
        return c.call("Chat", "(aa{sv}a{sv})", (msgs, variant_dict(options or GREEDY)), "(o)",
                      fd_list=fd_list if fds else None)[0]

    def chat_files(self, c, messages, names, options=None):
        fds = [os.open(self.image(n), os.O_RDONLY) for n in names]
        try:
            return self.chat(c, messages, fds, options)
        finally:
            for fd in fds:
                os.close(fd)

    def finish(self, c, path, timeout=120):
        self.assertTrue(c.wait(lambda: c.finished_of(path) is not None, timeout), "request did not finish")
        reason, stats = c.finished_of(path)
        self.assertEqual(reason, "length", stats)
        return "".join(c.tokens_of(path)), stats

    def test_follow_up_reuses_the_image(self):
        c = self.client()
        c.call("ForgetCache")
        turn1 = [("user", "What is this?", [0])]
        text1, s1 = self.finish(c, self.chat_files(c, turn1, ["rose.png"]))
        self.assertEqual(s1["encoded_images"], 1)
        self.assertEqual(s1["cached_tokens"], 0)
        self.assertGreater(s1["prompt_tokens"], 16)
        # the same turn as DescribeImage: the same prompt, the same text
        fd = os.open(self.image("rose.png"), os.O_RDONLY)
        try:
            fds = Gio.UnixFDList.new()
            idx = fds.append(fd)
            path = c.call("DescribeImage", "(hsa{sv})", (idx, "What is this?", variant_dict(GREEDY)), "(o)",
                          fd_list=fds)[0]
        finally:
            os.close(fd)
        text_d, s_d = self.finish(c, path)
        self.assertEqual(text_d, text1)
        self.assertEqual(s_d["prompt_tokens"], s1["prompt_tokens"])
        self.assertEqual(s_d["encoded_images"], 0, "the whole prompt was cached")

        turn2 = turn1 + [("assistant", text1, None), ("user", "And what colour is it?", None)]
        text2, s2 = self.finish(c, self.chat_files(c, turn2, ["rose.png"]))
        self.assertEqual(s2["encoded_images"], 0, s2)
        # the first turn's prompt, its image rows included, came from the cache
        self.assertGreaterEqual(s2["cached_tokens"], s1["prompt_tokens"], s2)
        # without the cache: the tower runs again, the text is the same
        c.call("ForgetCache")
        text2b, s2b = self.finish(c, self.chat_files(c, turn2, ["rose.png"]))
        self.assertEqual(s2b["cached_tokens"], 0)
        self.assertEqual(s2b["encoded_images"], 1)
        self.assertEqual(text2b, text2)
        self.assertEqual(s2b["prompt_tokens"], s2["prompt_tokens"])
        # another image in the same place: its positions are not reused
        _, s3 = self.finish(c, self.chat_files(c, turn2, ["logo.png"]))
        self.assertEqual(s3["encoded_images"], 1)
        self.assertLess(s3["cached_tokens"], s1["prompt_tokens"] - 16)
        self.wait_idle(c)

    def test_several_images(self):
        c = self.client()
        c.call("ForgetCache")
        convo = [("system", "Be brief.", None), ("user", "Compare these.", [0, 1]),
                 ("assistant", "They differ.", None), ("user", "And this one?", [2])]
        text, s = self.finish(c, self.chat_files(c, convo, ["rose.png", "logo.png", "wizard.jpg"]))
        self.assertEqual(s["encoded_images"], 3)
        self.assertGreater(s["prompt_tokens"], 3 * 16)
        # the handles may name the descriptors in any order
        swapped = [("system", "Be brief.", None), ("user", "Compare these.", [1, 0]),
                   ("assistant", "They differ.", None), ("user", "And this one?", [2])]
        text_b, s_b = self.finish(c, self.chat_files(c, swapped, ["logo.png", "rose.png", "wizard.jpg"]))
        self.assertEqual(text_b, text)
        self.assertEqual(s_b["encoded_images"], 0)
        # the client: chat --image FILE (shown with the first user turn)
        r = self.run_client("--stats", "chat", "--max-tokens", "6", "--temperature", "0", "--image",
                            self.image("rose.png"), input=b"What is this?\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"1 image(s) encoded", r.stderr)
        c2 = self.chat_files(c, [("user", "What is this?", [0])], ["rose.png"])
        self.assertEqual(r.stdout.decode().strip(), self.finish(c, c2)[0].strip())
        r = self.run_client("generate", "--image", self.image("rose.png"), "Hi")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"--image is for chat", r.stderr)
        self.wait_idle(c)

    def test_errors(self):
        c = self.client()
        rose = os.open(self.image("rose.png"), os.O_RDONLY)
        try:
            # a text-only model
            msg = self.assertDBusError("org.npullm.Error.NotSupported", self.chat, c,
                                       [("user", "What is this?", [0])], [rose],
                                       dict(GREEDY, model=("s", "plain")))
            self.assertIn("no vision projector", msg)
            # more images than the cap, passed or only named
            many = [rose] * (MAX_CHAT_IMAGES + 1)
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", self.chat, c,
                                       [("user", "x", list(range(len(many))))], many)
            self.assertIn("at most %d file descriptors" % MAX_CHAT_IMAGES, msg)
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", self.chat, c,
                                       [("user", "x", [0] * (MAX_CHAT_IMAGES + 1))])
            self.assertIn("more than %d images" % MAX_CHAT_IMAGES, msg)
            # handles that name nothing, the same descriptor twice, or too few
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", self.chat, c, [("user", "x", [0])])
            self.assertIn("no file descriptor", msg)
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", self.chat, c, [("user", "x", [0, 0])],
                                       [rose, rose])
            self.assertIn("same descriptor", msg)
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", self.chat, c, [("user", "x", [5])], [rose])
            self.assertIn("does not name", msg)
            # descriptors without handles
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", self.chat, c, [("user", "x", None)], [rose])
            self.assertIn("takes no file descriptor", msg)
            # an image on an assistant message, of the wrong type
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", self.chat, c,
                                       [("user", "x", None), ("assistant", "y", [0])], [rose])
            self.assertIn("only user messages", msg)
            bad = [{"role": GLib.Variant("s", "user"), "content": GLib.Variant("s", "x"),
                    "images": GLib.Variant("as", ["rose.png"])}]
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", c.call, "Chat", "(aa{sv}a{sv})",
                                       (bad, variant_dict(GREEDY)), "(o)")
            self.assertIn("images", msg)
        finally:
            os.close(rose)
        # a socket, and a file that is no image
        a, b = __import__("socket").socketpair()
        try:
            self.assertDBusError("org.npullm.Error.InvalidArgument", self.chat, c, [("user", "x", [0])], [a.fileno()])
        finally:
            a.close()
            b.close()
        path = os.path.join(self.workdir, "text.txt")
        with open(path, "wb") as f:
            f.write(b"hello, I am not an image\n")
        fd = os.open(path, os.O_RDONLY)
        try:
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", self.chat, c, [("user", "x", [0])], [fd])
            self.assertIn("not a PNG, JPEG or WebP", msg)
        finally:
            os.close(fd)
        text, reason, stats = c.run("Hello", variant_dict(GREEDY))
        self.assertEqual(reason, "length", stats)
        self.wait_idle(c)


if __name__ == "__main__":
    sys.exit(run_tap("test_chat_images"))
