#!/usr/bin/python3
"""org.npullm.Manager API: properties, ListModels, Complete, busctl,
validation of every argument (named errors), image descriptors, request
object privacy and the handle_token subscription pattern."""

import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from npullm_testbus import (GLib, Gio, ServiceTestCase, run_tap, variant_dict,  # noqa: E402
                            BUS_NAME, REQUEST_IFACE)

GREEDY = {"temperature": ("d", 0.0), "max_tokens": ("u", 8)}


class ApiTest(ServiceTestCase):
    CONFIG = {"Limits": {"MaxPromptBytes": "4096", "MaxMessages": "4", "MaxImageBytes": "1024"},
              "Models": {"MaxContext": "256"}}

    def test_properties(self):
        c = self.client()
        self.assertEqual(c.prop("Version"), "0.1.0")
        self.assertEqual(c.prop("Device"), "cpu")
        self.assertEqual(c.prop("DefaultModel"), "tiny")
        self.assertEqual(c.prop("ActiveRequests"), 0)
        self.assertEqual(c.prop("QueuedRequests"), 0)
        self.assertEqual(c.prop("IdleTimeout"), 300)
        self.assertIsInstance(c.prop("LoadedModels"), list)

    def test_list_models(self):
        c = self.client()
        models = c.call("ListModels", reply="(aa{sv})")[0]
        names = [m["name"] for m in models]
        # a file named as a projector is not a model; the broken file is
        # listed as not supported, with the reason
        self.assertEqual(names, ["broken", "tiny", "tiny2"])
        self.assertFalse(models[0]["supported"])
        self.assertIn("not a usable GGUF file", models[0]["reason"])
        self.assertNotIn("/", models[0]["reason"])
        models = models[1:]
        m = models[0]
        self.assertTrue(m["supported"])
        self.assertEqual(m["reason"], "")
        self.assertEqual(m["architecture"], "llama")
        self.assertEqual(m["quantization"], "f32")
        self.assertGreater(m["parameters"], 1000000)
        self.assertGreater(m["context_length"], 0)
        # tiny.mmproj.gguf is beside it but is no projector: paired by metadata, not by name
        self.assertFalse(m["vision"])
        self.assertFalse(models[1]["vision"])
        for key in ("loaded", "file_size"):
            self.assertIn(key, m)

    def test_complete_matches_stream(self):
        c = self.client()
        text, info = c.call("Complete", "(sa{sv})", ("Hello there", variant_dict(GREEDY)), "(sa{sv})")
        self.assertEqual(info["reason"], "length")
        self.assertEqual(info["generated_tokens"], 8)
        self.assertGreater(info["prompt_tokens"], 3)
        self.assertEqual(info["model"], "tiny")
        self.assertEqual(info["device"], "cpu")
        streamed, reason, stats = c.run("Hello there", variant_dict(GREEDY))
        self.assertEqual(streamed, text)
        self.assertEqual(reason, "length")
        for key in ("prompt_tokens", "generated_tokens", "time_to_first_token_ms", "tokens_per_second",
                    "device", "model"):
            self.assertIn(key, stats)

    def test_chat_and_raw(self):
        c = self.client()
        msgs = [{"role": GLib.Variant("s", "system"), "content": GLib.Variant("s", "Be brief.")},
                {"role": GLib.Variant("s", "user"), "content": GLib.Variant("s", "Hi")}]
        text, reason, stats = c.run(msgs, variant_dict(GREEDY), method="Chat")
        self.assertEqual(reason, "length")
        # the same conversation as Generate + system option gives the same text
        opts = dict(GREEDY, system=("s", "Be brief."))
        text2, _, _ = c.run("Hi", variant_dict(opts))
        self.assertEqual(text, text2)
        raw, reason, stats = c.run("Once upon a time", variant_dict(dict(GREEDY, raw=("b", True))))
        self.assertEqual(reason, "length")
        self.assertLess(stats["prompt_tokens"], 8)  # no template around it

    def test_busctl_complete_and_introspect(self):
        addr = "--address=" + self.bus.address
        out = subprocess.run(["busctl", addr, "--timeout=120", "call", BUS_NAME, "/org/npullm",
                              "org.npullm.Manager", "Complete", "sa{sv}", "Hello there", "2",
                              "max_tokens", "u", "8", "temperature", "d", "0"],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertTrue(out.stdout.startswith('sa{sv} "'), out.stdout)
        c = self.client()
        text, _ = c.call("Complete", "(sa{sv})", ("Hello there", variant_dict(GREEDY)), "(sa{sv})")
        self.assertIn(text.split("\n")[0][:8].replace('"', '\\"'), out.stdout)
        intro = subprocess.run(["busctl", addr, "introspect", BUS_NAME, "/org/npullm"],
                               capture_output=True, text=True, timeout=30)
        for member in ("Generate", "Chat", "DescribeImage", "Complete", "ListModels", "IdleTimeout"):
            self.assertIn(member, intro.stdout)
        prop = subprocess.run(["busctl", addr, "get-property", BUS_NAME, "/org/npullm", "org.npullm.Manager",
                               "Device"], capture_output=True, text=True, timeout=30)
        self.assertEqual(prop.stdout.strip(), 's "cpu"')

    def test_unknown_option_and_types(self):
        c = self.client()
        cases = [
            ({"bogus": ("s", "x")}, "bogus"),
            ({"temperature": ("s", "hot")}, "temperature"),
            ({"max_tokens": ("i", 5)}, "max_tokens"),
            ({"seed": ("u", 5)}, "seed"),
            ({"stop": ("s", "x")}, "stop"),
            ({"raw": ("s", "yes")}, "raw"),
            ({"temperature": ("d", -1.0)}, "temperature"),
            ({"temperature": ("d", float("nan"))}, "temperature"),
            ({"top_p": ("d", 0.0)}, "top_p"),
            ({"top_p": ("d", 1.5)}, "top_p"),
            ({"min_p": ("d", 2.0)}, "min_p"),
            ({"repeat_penalty": ("d", 0.0)}, "repeat_penalty"),
            ({"top_k": ("u", 5000000)}, "top_k"),
            ({"max_tokens": ("u", 0)}, "max_tokens"),
            ({"max_tokens": ("u", 100000)}, "max_tokens"),      # > context
            ({"max_tokens": ("u", 256)}, "max_tokens"),         # = context: no room for the prompt
            ({"priority": ("s", "urgent")}, "priority"),
            ({"stop": ("as", ["x"] * 17)}, "stop"),
            ({"stop": ("as", [""])}, "stop"),
            ({"stop": ("as", ["x" * 300])}, "stop"),
            ({"handle_token": ("s", "bad/token")}, "handle_token"),
            ({"handle_token": ("s", "x" * 65)}, "handle_token"),
            ({"model": ("s", "../etc/passwd")}, "model"),
            ({"system": ("s", "x" * 5000)}, "system"),
            ({"raw": ("b", True), "system": ("s", "x")}, "system"),
        ]
        for opts, key in cases:
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, "hi", variant_dict(opts))
            self.assertTrue(msg.split(": ", 1)[1].startswith(key), "%s: %s" % (opts, msg))
        self.assertEqual(c.prop("ActiveRequests"), 0)

    def test_option_text_cut_on_character(self):
        # Quoted client strings are cut to a bounded prefix: on a UTF-8
        # character boundary, or the error message is invalid UTF-8 (a GLib
        # critical in the daemon, a mangled error for the caller).
        c = self.client()
        for opts, key in [({"a" + "\u00e9" * 40: ("s", "x")}, "a\u00e9"),      # byte 64 inside a character
                          ({"model": ("s", "a" + "\u00e9" * 100)}, "model")]:  # byte 128 inside one
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, "hi", variant_dict(opts))
            self.assertTrue(msg.split(": ", 1)[1].startswith(key), msg)
            self.assertNotIn("\ufffd", msg)
        self.assertNotIn("CRITICAL", self.daemon.read_log())

    def test_float_options_checked_as_stored(self):
        # The engine keeps these as float: 1e-50 passes "> 0" as a double
        # but is 0 as a float, which the open lower bound excludes.
        c = self.client()
        for key in ("top_p", "repeat_penalty"):
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, "hi",
                                       variant_dict({key: ("d", 1e-50)}))
            self.assertTrue(msg.split(": ", 1)[1].startswith(key), msg)
        self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, "hi",
                             variant_dict({"temperature": ("d", 1e300)}))

    def test_system_counts_toward_prompt_limit(self):
        # MaxPromptBytes=4096: 3000 bytes of system and 3000 of content fit
        # each alone, not together.
        c = self.client()
        S = lambda v: GLib.Variant("s", v)  # noqa: E731
        system = variant_dict({"system": ("s", "s" * 3000)})
        msgs = [{"role": S("user"), "content": S("x" * 3000)}]
        msg = self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, msgs, system, method="Chat")
        self.assertTrue(msg.split(": ", 1)[1].startswith("messages"), msg)
        msg = self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, "x" * 3000, system)
        self.assertTrue(msg.split(": ", 1)[1].startswith("prompt"), msg)
        self.assertEqual(c.prop("ActiveRequests"), 0)

    def test_option_not_for_method(self):
        c = self.client()
        msgs = [{"role": GLib.Variant("s", "user"), "content": GLib.Variant("s", "Hi")}]
        self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, msgs,
                             variant_dict({"raw": ("b", True)}), method="Chat")
        self.assertDBusError("org.npullm.Error.InvalidArgument", c.call, "Complete", "(sa{sv})",
                             ("hi", variant_dict({"handle_token": ("s", "t1")})), "(sa{sv})")

    def test_bad_messages(self):
        c = self.client()
        S = lambda v: GLib.Variant("s", v)  # noqa: E731
        cases = [
            [],
            [{"role": S("wizard"), "content": S("hi")}],
            [{"role": S("user")}],
            [{"role": S("user"), "content": GLib.Variant("u", 1)}],
            [{"role": S("user"), "content": S("hi"), "extra": S("x")}],
            [{"role": S("user"), "content": S("hi")}] * 5,           # MaxMessages=4
            [{"role": S("user"), "content": S("x" * 5000)}],          # MaxPromptBytes
        ]
        for msgs in cases:
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, msgs, {}, method="Chat")
            self.assertTrue(msg.split(": ", 1)[1].startswith("messages"), msg)
        sys_msgs = [{"role": S("system"), "content": S("a")}, {"role": S("user"), "content": S("b")}]
        self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, sys_msgs,
                             variant_dict({"system": ("s", "again")}), method="Chat")

    def test_huge_prompt_and_models(self):
        c = self.client()
        msg = self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, "x" * 5000, {})
        self.assertIn("prompt", msg)
        self.assertDBusError("org.npullm.Error.NoSuchModel", c.generate, "hi",
                             variant_dict({"model": ("s", "nonexistent")}))
        self.assertDBusError("org.npullm.Error.NoSuchModel", c.generate, "hi",
                             variant_dict({"model": ("s", "tiny.mmproj")}))
        msg = self.assertDBusError("org.npullm.Error.NotSupported", c.generate, "hi",
                                   variant_dict({"model": ("s", "broken")}))
        self.assertIn("not a usable GGUF file", msg)
        self.assertDBusError("org.npullm.Error.NoSuchModel", c.call, "LoadModel", "(s)", ("nonexistent",))
        self.assertDBusError("org.npullm.Error.InvalidArgument", c.call, "LoadModel", "(s)", ("a/b",))

    def test_context_overflow(self):
        c = self.client()
        # 4000 bytes of words: far more tokens than MaxContext=256
        prompt = "lorem ipsum dolor sit amet " * 148
        self.assertDBusError("org.npullm.Error.ContextOverflow", c.call, "Complete", "(sa{sv})",
                             (prompt, {}), "(sa{sv})")
        text, reason, stats = c.run(prompt, {})
        self.assertEqual(reason, "error")
        self.assertEqual(stats["error_name"], "org.npullm.Error.ContextOverflow")
        self.assertEqual(text, "")
        # explicit max_tokens that does not fit with the prompt
        _, reason, stats = c.run("Hello " * 40, variant_dict({"max_tokens": ("u", 250)}))
        self.assertEqual(reason, "error")
        self.assertEqual(stats["error_name"], "org.npullm.Error.ContextOverflow")

    def describe(self, c, fd, prompt="What is this?", options=None):
        fds = Gio.UnixFDList.new()
        idx = fds.append(fd) if fd is not None else 0
        return c.call("DescribeImage", "(hsa{sv})", (idx, prompt, options or {}), "(o)", fd_list=fds)

    def test_describe_image_fds(self):
        c = self.client()
        img = os.path.join(self.workdir, "image.png")
        with open(img, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
        big = os.path.join(self.workdir, "big.png")
        with open(big, "wb") as f:
            f.write(b"\0" * 2000)
        fd = os.open(img, os.O_RDONLY)
        try:
            # no llama model has a projector (tiny.mmproj.gguf is none); the
            # image bytes are checked with a real one in test_vision.py
            for name in ("tiny", "tiny2"):
                self.assertDBusError("org.npullm.Error.NotSupported", self.describe, c, fd, "What?",
                                     variant_dict({"model": ("s", name)}))
        finally:
            os.close(fd)
        # no descriptor at the index
        self.assertDBusError("org.npullm.Error.InvalidArgument", self.describe, c, None)
        for path, flags in ((self.workdir, os.O_RDONLY | os.O_DIRECTORY), (img, os.O_WRONLY),
                            (big, os.O_RDONLY)):
            fd = os.open(path, flags)
            try:
                msg = self.assertDBusError("org.npullm.Error.InvalidArgument", self.describe, c, fd)
                self.assertIn("image", msg)
            finally:
                os.close(fd)
        a, b = socket.socketpair()
        try:
            self.assertDBusError("org.npullm.Error.InvalidArgument", self.describe, c, a.fileno())
        finally:
            a.close()
            b.close()
        # (pipes are read only for a model with a projector: test_vision.py test_pipes)

    def test_handle_token_pattern(self):
        """Subscribing to the precomputed path before calling sees every
        token: the stream equals Complete's text."""
        c = self.client()
        expected, _ = c.call("Complete", "(sa{sv})", ("Tell me", variant_dict(GREEDY)), "(sa{sv})")
        name = c.unique_name.lstrip(":").replace(".", "_")
        want = "/org/npullm/Request/c%s_tok1" % name
        got = []
        sub = c.conn.signal_subscribe(None, REQUEST_IFACE, "Token", want, None, Gio.DBusSignalFlags.NONE,
                                      lambda *a: got.append(a[5].unpack()[0]))
        path = c.generate("Tell me", variant_dict(dict(GREEDY, handle_token=("s", "tok1"))))
        self.assertEqual(path, want)
        self.assertTrue(c.wait(lambda: c.finished_of(path) is not None))
        c.conn.signal_unsubscribe(sub)
        self.assertEqual("".join(got), expected)
        # a token in use (the finished request lingers) is refused
        self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, "x",
                             variant_dict({"handle_token": ("s", "tok1")}))

    def test_request_privacy(self):
        owner = self.client()
        other = self.client()
        opts = variant_dict({"temperature": ("d", 0.0), "max_tokens": ("u", 200)})
        path = owner.generate("Count to one hundred", opts)
        self.assertTrue(owner.wait(lambda: len(owner.tokens_of(path)) > 0))
        node = path.rsplit("/", 1)[1]
        # the owner sees and reads it
        state = owner.call("Get", "(ss)", (REQUEST_IFACE, "State"), "(v)", path=path,
                           iface="org.freedesktop.DBus.Properties")[0]
        self.assertEqual(state, "running")
        intro = owner.call("Introspect", reply="(s)", path="/org/npullm/Request",
                           iface="org.freedesktop.DBus.Introspectable")[0]
        self.assertIn('"%s"' % node, intro)
        # another client cannot see, read or cancel it
        intro = other.call("Introspect", reply="(s)", path="/org/npullm/Request",
                           iface="org.freedesktop.DBus.Introspectable")[0]
        self.assertNotIn(node, intro)
        for args in (("Cancel", None, None, None), ("Get", "(ss)", (REQUEST_IFACE, "State"), "(v)"),
                     ("GetAll", "(s)", (REQUEST_IFACE,), "(a{sv})")):
            method, sig, vals, reply = args
            iface = REQUEST_IFACE if method == "Cancel" else "org.freedesktop.DBus.Properties"
            with self.assertRaises(GLib.Error):
                other.call(method, sig, vals, reply, path=path, iface=iface)
        self.assertEqual(other.tokens_of(path), [])
        owner.call("Cancel", path=path, iface=REQUEST_IFACE)
        self.assertTrue(owner.wait(lambda: owner.finished_of(path) is not None))
        self.assertEqual(owner.finished_of(path)[0], "cancelled")
        self.assertEqual([s for s in other.signals if s[0].startswith("/org/npullm/Request")], [])
        self.wait_idle(owner)

    def test_idle_timeout_property(self):
        c = self.client()
        # GDBus checks the type against the introspection data itself
        self.assertDBusError("org.freedesktop.DBus.Error.InvalidArgs", c.call, "Set", "(ssv)",
                             ("org.npullm.Manager", "IdleTimeout", GLib.Variant("s", "x")),
                             iface="org.freedesktop.DBus.Properties")
        with self.assertRaises(GLib.Error):
            c.call("Set", "(ssv)", ("org.npullm.Manager", "Device", GLib.Variant("s", "npu")),
                   iface="org.freedesktop.DBus.Properties")
        c.call("Set", "(ssv)", ("org.npullm.Manager", "IdleTimeout", GLib.Variant("u", 120)),
               iface="org.freedesktop.DBus.Properties")
        self.assertEqual(c.prop("IdleTimeout"), 120)
        c.call("Set", "(ssv)", ("org.npullm.Manager", "IdleTimeout", GLib.Variant("u", 300)),
               iface="org.freedesktop.DBus.Properties")


if __name__ == "__main__":
    sys.exit(run_tap("test_api"))
