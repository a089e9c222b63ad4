#!/usr/bin/python3
"""Two Unix users on one npullmd (issue #11): limits count per user over
all of its connections, and the queue is round-robin between users, so
while user A floods the queue from several connections, user B's request
is next in line after at most one of A's, and B's image goes through while
A is at its image limit. And the running slots are shared (issue #34): while
A's long generations hold every slot, B's request parks one of them and
streams at once; the parked one resumes with the same greedy output.

User B is `nobody`, run from this test (which must then run as root) in a
child process; without root the test is skipped."""

import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npullm_testbus as tb  # noqa: E402
from hardening import GREEDY, VisionDaemonCase, describe, describe_async, variant_dict  # noqa: E402
from npullm_testbus import run_tap  # noqa: E402

OTHER_UID = 65534
PER_USER = 12

# User B: one Generate (or DescribeImage of the file descriptor it
# inherits, given as its third argument), then its request's QueuePosition until it starts; prints
# {"position": first position seen, "reason": finish reason, "t_call", "t_first" (its first
# Token), "t_end": CLOCK_MONOTONIC seconds, comparable between processes} or
# {"error": D-Bus error name, "message": ...}.
CHILD = r'''
import json, sys, time
import gi
gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib
address, method = sys.argv[1], sys.argv[2]
conn = Gio.DBusConnection.new_for_address_sync(address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT |
    Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
finished = {}
def on_signal(c, sender, path, iface, member, params):
    if member == "Finished":
        finished[path] = params.unpack()[0]
conn.signal_subscribe(None, "org.npullm.Request", "Finished", None, None, Gio.DBusSignalFlags.NONE, on_signal)
first = {}
def on_token(c, sender, path, iface, member, params):
    first.setdefault(path, time.monotonic())
conn.signal_subscribe(None, "org.npullm.Request", "Token", None, None, Gio.DBusSignalFlags.NONE, on_token)
opts = {"temperature": GLib.Variant("d", 0.0), "max_tokens": GLib.Variant("u", 4)}
if sys.argv[4:] == ["--go-on-stdin"]:
    # the Python start-up is out of the way: the parent says when to call
    print("ready", flush=True)
    sys.stdin.readline()
t_call = time.monotonic()
try:
    if method == "DescribeImage":
        fds = Gio.UnixFDList.new()
        fds.append(int(sys.argv[3]))
        ret, _ = conn.call_with_unix_fd_list_sync("org.npullm", "/org/npullm", "org.npullm.Manager", method,
            GLib.Variant("(hsa{sv})", (0, "x", opts)), None, Gio.DBusCallFlags.NONE, 60000, fds, None)
    else:
        ret = conn.call_sync("org.npullm", "/org/npullm", "org.npullm.Manager", method,
            GLib.Variant("(sa{sv})", ("Hello", opts)), None, Gio.DBusCallFlags.NONE, 60000, None)
except GLib.Error as e:
    print(json.dumps({"error": Gio.DBusError.get_remote_error(e), "message": e.message}))
    sys.exit(0)
path = ret.unpack()[0]
position = None
deadline = time.monotonic() + 120
ctx = GLib.MainContext.default()
while path not in finished and time.monotonic() < deadline:
    while ctx.iteration(False):
        pass
    if position is None:
        props = conn.call_sync("org.npullm", path, "org.freedesktop.DBus.Properties", "GetAll",
            GLib.Variant("(s)", ("org.npullm.Request",)), None, Gio.DBusCallFlags.NONE, 10000, None)
        p = props.unpack()[0]
        if p["State"] != "queued":
            position = 0
        elif p["QueuePosition"] > 0:
            position = p["QueuePosition"]
    time.sleep(0.002)
print(json.dumps({"position": position, "reason": finished.get(path), "t_call": t_call, "t_first": first.get(path),
                  "t_end": time.monotonic()}))
'''


def other_user(case, method="Generate", image=None, before_call=None, while_waiting=None):
    """Runs CHILD as user B: once it is ready, before_call() runs, then B
    calls; while_waiting() is called until B's request ends."""
    fd = os.open(image, os.O_RDONLY) if image is not None else -1
    try:
        go = ["--go-on-stdin"] if before_call is not None else []
        proc = subprocess.Popen([sys.executable, "-c", CHILD, case.bus.address, method, str(fd)] + go,
                                user=OTHER_UID, group=OTHER_UID, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd="/", pass_fds=(fd,) if fd >= 0 else ())
        if before_call is not None:
            case.assertEqual(proc.stdout.readline(), b"ready\n", "user B's client did not start")
            before_call()
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        deadline = time.monotonic() + 180
        while proc.poll() is None and time.monotonic() < deadline:
            if while_waiting is not None:
                while_waiting()
            time.sleep(0.005)
        if proc.poll() is None:
            proc.kill()
        out, err = proc.communicate()
    finally:
        if fd >= 0:
            os.close(fd)
    case.assertEqual(proc.returncode, 0, err.decode(errors="replace"))
    return json.loads(out)


def require_root():
    if os.getuid() != 0:
        raise unittest.SkipTest("needs root to run user B as another uid")


class FairnessTest(VisionDaemonCase):
    CONFIG = {
        "Limits": {"MaxRunning": "1", "MaxQueued": "32", "MaxPerClient": "8", "MaxPerUser": str(PER_USER),
                   "MaxCallsPerUser": "16", "MaxImagesPerUser": "1", "MaxImagesInFlight": "4"},
    }

    @classmethod
    def setUpClass(cls):
        require_root()
        super().setUpClass()
        # user B must reach the bus socket
        os.chmod(cls.workdir, 0o755)

    def other_user(self, method="Generate", image=None):
        return other_user(self, method, image)

    def flood(self, n_clients, per_client, max_tokens):
        clients = [self.client() for _ in range(n_clients)]
        paths = []
        for c in clients:
            for _ in range(per_client):
                paths.append((c, c.generate("Tell me a long story", variant_dict(dict(
                    GREEDY, max_tokens=("u", max_tokens))))))
        return clients, paths

    def test_round_robin_and_per_user_limits(self):
        clients, paths = self.flood(3, PER_USER // 3, 120)
        # A's further connections buy nothing: the limit is per user
        extra = self.client()
        msg = self.assertDBusError("org.npullm.Error.Busy", extra.generate, "One more", variant_dict(GREEDY))
        self.assertIn("from this user", msg)
        self.assertIn("over 4 connections", msg)
        # B is not affected, and is next in line after at most one of A's
        b = self.other_user()
        self.assertNotIn("error", b, b)
        self.assertEqual(b["reason"], "length", b)
        self.assertIsNotNone(b["position"])
        self.assertLessEqual(b["position"], 2, "user B waited behind %d of A's requests" % (b["position"] - 1))
        for c, path in paths:
            c.pump()
            if c.finished_of(path) is None:
                c.call("Cancel", path=path, iface=tb.REQUEST_IFACE)
        for c, path in paths:
            self.assertTrue(c.wait(lambda: c.finished_of(path) is not None, 60))
        self.wait_idle(clients[0])
        self.assert_still_serving()

    def test_image_limit_per_user(self):
        a = self.client()
        r, w = os.pipe()
        os.write(w, b"\x89PNG")
        try:
            box = describe_async(a, r)
            os.close(r)
            a.pump(0.3)
            msg = self.assertDBusError("org.npullm.Error.Busy", self.describe_rose, self.client())
            self.assertIn("images being read from this user", msg)
            b = self.other_user("DescribeImage", self.image("rose.png"))
            self.assertNotIn("error", b, b)
            self.assertEqual(b["reason"], "length", b)
            self.assertEqual(box, {}, "A's stalled read finished")
        finally:
            os.close(w)
        self.assertTrue(a.wait(lambda: box, 30), "A's read did not end when its pipe closed")
        self.assertEqual(tb.dbus_error_name(box["error"]), "org.npullm.Error.InvalidArgument")
        self.assert_still_serving()

    def describe_rose(self, c):
        fd = os.open(self.image("rose.png"), os.O_RDONLY)
        try:
            return describe(c, fd)
        finally:
            os.close(fd)


class SlotSharingTest(tb.ServiceTestCase):
    """User A's four long generations fill all four running slots; user B's
    short request must not wait for one of them to end."""

    CONFIG = {"Limits": {"MaxRunning": "4", "MaxQueued": "8", "MaxPerUser": "8"}}
    LONG = 200
    # generous for a loaded 2-core CI machine, far below A's generations
    FIRST_TOKEN_BOUND_S = 20.0

    @classmethod
    def setUpClass(cls):
        require_root()
        super().setUpClass()
        os.chmod(cls.workdir, 0o755)

    def long_options(self):
        return variant_dict(dict(GREEDY, max_tokens=("u", self.LONG)))

    def test_new_user_gets_a_slot_and_parked_output_is_unchanged(self):
        prompts = ["Tell me a long story %d" % i for i in range(4)]
        a = self.client()
        # uninterrupted: A's four together, nobody else
        alone = {}
        paths = {p: a.generate(p, self.long_options()) for p in prompts}
        for p, path in paths.items():
            self.assertTrue(a.wait(lambda: a.finished_of(path) is not None, 240))
            alone[p] = "".join(a.tokens_of(path))
            self.assertEqual(a.finished_of(path)[0], "length")
        paths = {}
        ended = {}

        def start_a():
            paths.update({p: a.generate(p, self.long_options()) for p in prompts})
            self.assertTrue(a.wait(lambda: all(len(a.tokens_of(path)) > 0 for path in paths.values()), 60))

        def note_finishes():
            a.pump()
            for path in paths.values():
                if path not in ended and a.finished_of(path) is not None:
                    ended[path] = time.monotonic()
        b = other_user(self, before_call=start_a, while_waiting=note_finishes)
        self.assertNotIn("error", b, b)
        self.assertEqual(b["reason"], "length", b)
        self.assertIsNotNone(b["t_first"], b)
        wait = b["t_first"] - b["t_call"]
        print("# user B's first token after %.3f s, while A's four generations held every slot" % wait)
        self.assertEqual(ended, {}, "one of A's generations ended before B's request: B waited for it")
        self.assertLess(wait, self.FIRST_TOKEN_BOUND_S)
        for p, path in paths.items():
            self.assertTrue(a.wait(lambda: a.finished_of(path) is not None, 240))
            self.assertEqual(a.finished_of(path)[0], "length")
            self.assertEqual("".join(a.tokens_of(path)), alone[p], "the parked generation's output changed")
        self.wait_idle(a)


if __name__ == "__main__":
    sys.exit(run_tap("test_fairness"))
