#!/usr/bin/python3
"""Streaming and arbitration: npullm-client (text, JSON, chat REPL, Ctrl-C),
Cancel, a client killed mid-stream, unicast signals, queue limits, eight
concurrent clients against their solo outputs, and the D-Bus vs engine
token rate."""

import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from npullm_testbus import (GLib, Gio, ServiceTestCase, env_path, run_tap,  # noqa: E402
                            variant_dict, REQUEST_IFACE)

LONG = {"temperature": ("d", 0.0), "max_tokens": ("u", 3000)}


class StreamingTest(ServiceTestCase):
    CONFIG = {"Limits": {"MaxRunning": "8", "MaxQueued": "2", "MaxPerClient": "8"}}

    def test_client_text_and_json(self):
        c = self.client()
        expected, _ = c.call("Complete", "(sa{sv})", ("Hello", variant_dict(
            {"temperature": ("d", 0.0), "max_tokens": ("u", 10)})), "(sa{sv})")
        out = self.run_client("generate", "--temperature", "0", "--max-tokens", "10", "Hello")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.decode(), expected + ("" if expected.endswith("\n") else "\n"))
        out = self.run_client("--json", "generate", "--temperature", "0", "-n", "10", "Hello")
        self.assertEqual(out.returncode, 0, out.stderr)
        events = [json.loads(line) for line in out.stdout.decode().splitlines()]
        self.assertEqual(events[0]["event"], "request")
        self.assertEqual(events[-1]["event"], "finished")
        self.assertEqual(events[-1]["reason"], "length")
        self.assertEqual(events[-1]["stats"]["generated_tokens"], 10)
        text = "".join(e["text"] for e in events if e["event"] == "token")
        self.assertEqual(text, expected)
        self.assertIn("running", [e.get("state") for e in events if e["event"] == "state"])
        # prompt from stdin
        out = self.run_client("generate", "--temperature", "0", "-n", "10", "-", input=b"Hello")
        self.assertEqual(out.stdout.decode().rstrip("\n"), expected.rstrip("\n"))

    def test_client_exit_codes(self):
        self.assertEqual(self.run_client("frobnicate").returncode, 2)
        self.assertEqual(self.run_client("generate", "--bogus-option", "x").returncode, 2)
        self.assertEqual(self.run_client("generate", "--temperature", "-3", "hi").returncode, 2)
        out = self.run_client("generate", "--model", "nonexistent", "hi")
        self.assertEqual(out.returncode, 5, out.stderr)
        self.assertIn(b"no model named", out.stderr)
        out = self.run_client("cancel", "/org/npullm/Request/999999")
        self.assertNotEqual(out.returncode, 0)
        out = self.run_client("--json", "models")
        self.assertEqual(out.returncode, 0)
        models = [json.loads(line) for line in out.stdout.decode().splitlines()]
        self.assertEqual([m["name"] for m in models], ["broken", "tiny", "tiny2"])
        out = self.run_client("status")
        self.assertEqual(out.returncode, 0)
        self.assertRegex(out.stdout.decode(), r"Device\s+cpu")
        out = self.run_client("--json", "status")
        self.assertEqual(out.returncode, 0)
        status = json.loads(out.stdout)
        self.assertEqual(status["Device"], "cpu")
        self.assertIn("LoadedModels", status)

    def test_chat_repl_pipe(self):
        out = self.run_client("--json", "chat", "--temperature", "0", "-n", "6",
                              input=b"Hello\n\nHow are you?\n")
        self.assertEqual(out.returncode, 0, out.stderr)
        events = [json.loads(line) for line in out.stdout.decode().splitlines()]
        finished = [e for e in events if e["event"] == "finished"]
        self.assertEqual(len(finished), 2)
        # the second turn carried the whole history: a longer prompt
        self.assertGreater(finished[1]["stats"]["prompt_tokens"], finished[0]["stats"]["prompt_tokens"] + 6)
        # the same two turns through the API give the same replies
        c = self.client()
        S = lambda v: GLib.Variant("s", v)  # noqa: E731
        opts = variant_dict({"temperature": ("d", 0.0), "max_tokens": ("u", 6)})
        first, _, _ = c.run([{"role": S("user"), "content": S("Hello")}], opts, method="Chat")
        second, _, _ = c.run([{"role": S("user"), "content": S("Hello")},
                              {"role": S("assistant"), "content": S(first)},
                              {"role": S("user"), "content": S("How are you?")}], opts, method="Chat")
        tokens = [[], []]
        turn = 0
        for e in events:
            if e["event"] == "token":
                tokens[turn].append(e["text"])
            elif e["event"] == "finished":
                turn += 1
        self.assertEqual("".join(tokens[0]), first)
        self.assertEqual("".join(tokens[1]), second)

    def start_streaming_client(self, *extra):
        proc = subprocess.Popen([self.client_path, "--address", self.bus.address, "--json", "generate",
                                 "--temperature", "0", "-n", "3000"] + list(extra) + ["Tell a long story"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.bus.env)
        while True:
            line = proc.stdout.readline()
            self.assertTrue(line, "client ended before streaming")
            if json.loads(line)["event"] == "token":
                return proc

    def test_ctrl_c_cancels(self):
        c = self.client()
        proc = self.start_streaming_client()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 130, err)
        last = json.loads(out.decode().splitlines()[-1])
        self.assertEqual(last["event"], "finished")
        self.assertEqual(last["reason"], "cancelled")
        self.wait_idle(c, 5)

    def test_killed_client_frees_request(self):
        c = self.client()
        proc = self.start_streaming_client()
        self.assertEqual(c.prop("ActiveRequests"), 1)
        t0 = time.monotonic()
        proc.kill()
        proc.wait()
        self.wait_idle(c, 5)
        print("# request freed %.0f ms after the client was killed" % ((time.monotonic() - t0) * 1000))

    def test_cancel_method(self):
        c = self.client()
        path = c.generate("Tell a long story", variant_dict(LONG))
        self.assertTrue(c.wait(lambda: len(c.tokens_of(path)) >= 2))
        c.call("Cancel", path=path, iface=REQUEST_IFACE)
        self.assertTrue(c.wait(lambda: c.finished_of(path) is not None, 5))
        reason, stats = c.finished_of(path)
        self.assertEqual(reason, "cancelled")
        self.assertLess(stats["generated_tokens"], 3000)
        self.wait_idle(c, 5)

    def test_unicast_signals(self):
        """A second connection with an ordinary and an eavesdropping match on
        the Request interface sees nothing of another client's request."""
        owner = self.client()
        spy = self.client()
        seen = []
        for rule in ("type='signal',interface='org.npullm.Request'",
                     "type='signal',interface='org.npullm.Request',eavesdrop='true'",
                     "type='signal',sender='org.npullm'"):
            try:
                spy.call("AddMatch", "(s)", (rule,), path="/org/freedesktop/DBus", iface="org.freedesktop.DBus",
                         reply=None)
            except GLib.Error:
                pass  # the bus may refuse eavesdropping outright
        filt = spy.conn.add_filter(lambda conn, msg, incoming: (
            seen.append(msg.get_path()) if incoming and msg.get_interface() == REQUEST_IFACE else None) or msg)
        text, reason, _ = owner.run("Hello", variant_dict({"temperature": ("d", 0.0), "max_tokens": ("u", 12)}))
        self.assertEqual(reason, "length")
        self.assertGreater(len(text), 0)
        spy.pump(0.3)
        spy.conn.remove_filter(filt)
        self.assertEqual(seen, [])
        self.assertEqual([s for s in spy.signals if s[1] == REQUEST_IFACE], [])

    def test_queue_full_is_busy(self):
        c = self.client()
        paths = [c.generate("Tell a long story", variant_dict(LONG)) for _ in range(8)]
        self.assertTrue(c.wait(lambda: c.prop("ActiveRequests") == 8))
        c2 = self.client()
        queued = [c2.generate("Tell a long story", variant_dict(LONG)) for _ in range(2)]
        self.assertTrue(c.wait(lambda: c.prop("QueuedRequests") == 2, 5),
                        "queued: %s, finished: %s" % (c.prop("QueuedRequests"),
                                                      [c.finished_of(p) for p in paths]))
        # positions arrive from the engine thread shortly after the call
        position = lambda: c2.call("Get", "(ss)", (REQUEST_IFACE, "QueuePosition"), "(v)",  # noqa: E731
                                   path=queued[1], iface="org.freedesktop.DBus.Properties")[0]
        self.assertTrue(c2.wait(lambda: position() == 2, 5))
        other = self.client()
        self.assertDBusError("org.npullm.Error.Busy", other.generate, "x", {})
        self.assertDBusError("org.npullm.Error.Busy", other.call, "Complete", "(sa{sv})", ("x", {}), "(sa{sv})")
        for p in paths:
            c.call("Cancel", path=p, iface=REQUEST_IFACE)
        for p in queued:
            c2.call("Cancel", path=p, iface=REQUEST_IFACE)
        self.wait_idle(c, 10)
        self.assertTrue(c2.wait(lambda: all(c2.finished_of(p) for p in queued), 5))
        self.assertEqual([c.finished_of(p)[0] for p in paths], ["cancelled"] * 8)
        self.assertEqual([c2.finished_of(p)[0] for p in queued], ["cancelled"] * 2)

    def test_per_client_limit(self):
        c = self.client()
        paths = [c.generate("Tell a long story", variant_dict(LONG)) for _ in range(8)]
        self.assertDBusError("org.npullm.Error.Busy", c.generate, "x", {})
        for p in paths:
            c.call("Cancel", path=p, iface=REQUEST_IFACE)
        self.wait_idle(c, 10)

    def test_interactive_before_background(self):
        c = self.client()
        running = [c.generate("Tell a long story", variant_dict(LONG)) for _ in range(8)]
        self.assertTrue(c.wait(lambda: c.prop("ActiveRequests") == 8))
        c2 = self.client()
        bg = c2.generate("x", variant_dict({"priority": ("s", "background"), "max_tokens": ("u", 2)}))
        fg = c2.generate("x", variant_dict({"priority": ("s", "interactive"), "max_tokens": ("u", 2)}))
        pos = lambda p: c2.call("Get", "(ss)", (REQUEST_IFACE, "QueuePosition"), "(v)", path=p,  # noqa: E731
                                iface="org.freedesktop.DBus.Properties")[0]
        self.assertTrue(c2.wait(lambda: pos(fg) == 1 and pos(bg) == 2, 5))
        for p in running:
            c.call("Cancel", path=p, iface=REQUEST_IFACE)
        # the interactive request finishes first
        self.assertTrue(c2.wait(lambda: c2.finished_of(fg) and c2.finished_of(bg), 20))
        order = [s[0] for s in c2.signals if s[2] == "Finished"]
        self.assertEqual(order, [fg, bg])
        self.wait_idle(c, 10)

    def test_eight_concurrent_clients_match_solo(self):
        prompts = ["Tell me about %s" % w for w in
                   ("cats", "the sea", "rust", "bread", "mountains", "music", "rain", "stars")]
        args = ["--json", "generate", "--temperature", "0", "-n", "20"]
        solo = []
        for p in prompts:
            out = self.run_client(*args, p)
            self.assertEqual(out.returncode, 0, out.stderr)
            solo.append(out.stdout.decode())
        procs = [subprocess.Popen([self.client_path, "--address", self.bus.address] + args + [p],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.bus.env)
                 for p in prompts]
        together = [p.communicate(timeout=120) for p in procs]
        text = lambda out: "".join(json.loads(l)["text"] for l in out.splitlines()  # noqa: E731,E741
                                   if json.loads(l)["event"] == "token")
        for i, (out, err) in enumerate(together):
            self.assertEqual(procs[i].returncode, 0, err)
            self.assertEqual(text(out.decode()), text(solo[i]), prompts[i])
            self.assertEqual(json.loads(out.decode().splitlines()[-1])["stats"]["generated_tokens"], 20)

    def test_throughput_vs_engine(self):
        """Prints the ratio of the token rate seen through D-Bus to the
        engine's own (npullm-run, same model and settings). No timing
        assertion: the machine is shared."""
        run = env_path("NPULLM_RUN")
        model = env_path("NPULLM_TEST_MODEL")
        n = 120
        out = subprocess.run([run, model, "--prompt", "Tell a long story", "-n", str(n), "--temperature", "0",
                              "--threads", "2", "--json"], capture_output=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        engine = json.loads(out.stdout)
        engine_tps = engine["timings"]["gen_tps"]
        c = self.client()
        path = c.generate("Tell a long story", variant_dict({"temperature": ("d", 0.0), "max_tokens": ("u", n)}))
        first = [None]
        self.assertTrue(c.wait(lambda: (first.__setitem__(0, first[0] or (time.monotonic() if c.tokens_of(path)
                                                                              else None)) or
                                        c.finished_of(path) is not None), 120))
        end = time.monotonic()
        reason, stats = c.finished_of(path)
        text = "".join(c.tokens_of(path))
        self.assertEqual(text, engine["text"])
        observed = (stats["generated_tokens"] - 1) / max(end - first[0], 1e-6)
        print("# engine (npullm-run): %.1f tokens/s; through D-Bus: %.1f tokens/s observed by the client, "
              "%.1f reported by the daemon; ratio %.2f" % (engine_tps, observed, stats["tokens_per_second"],
                                                          observed / engine_tps))


if __name__ == "__main__":
    sys.exit(run_tap("test_streaming"))
