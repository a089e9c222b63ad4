#!/usr/bin/python3
"""Two Unix users on one npullmd (issue #11): limits count per user over
all of its connections, and the queue is round-robin between users, so
while user A floods the queue from several connections, user B's request
is next in line after at most one of A's, and B's image goes through while
A is at its image limit.

User B is `nobody`, run from this test (which must then run as root) in a
child process; without root the test is skipped."""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npullm_testbus as tb  # noqa: E402
from hardening import GREEDY, VisionDaemonCase, describe, describe_async, variant_dict  # noqa: E402
from npullm_testbus import run_tap  # noqa: E402

OTHER_UID = 65534
PER_USER = 12

# User B: one Generate (or DescribeImage of the file descriptor it
# inherits, given as its third argument), then its request's QueuePosition until it starts; prints
# {"position": first position seen, "reason": finish reason} or
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
opts = {"temperature": GLib.Variant("d", 0.0), "max_tokens": GLib.Variant("u", 4)}
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
print(json.dumps({"position": position, "reason": finished.get(path)}))
'''


class FairnessTest(VisionDaemonCase):
    CONFIG = {
        "Limits": {"MaxRunning": "1", "MaxQueued": "32", "MaxPerClient": "8", "MaxPerUser": str(PER_USER),
                   "MaxCallsPerUser": "16", "MaxImagesPerUser": "1", "MaxImagesInFlight": "4"},
    }

    @classmethod
    def setUpClass(cls):
        if os.getuid() != 0:
            raise unittest.SkipTest("needs root to run user B as another uid")
        super().setUpClass()
        # user B must reach the bus socket
        os.chmod(cls.workdir, 0o755)

    def other_user(self, method="Generate", image=None):
        fd = os.open(image, os.O_RDONLY) if image is not None else -1
        try:
            r = subprocess.run([sys.executable, "-c", CHILD, self.bus.address, method, str(fd)], user=OTHER_UID,
                               group=OTHER_UID, capture_output=True, timeout=180, cwd="/",
                               pass_fds=(fd,) if fd >= 0 else ())
        finally:
            if fd >= 0:
                os.close(fd)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        return json.loads(r.stdout)

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


if __name__ == "__main__":
    sys.exit(run_tap("test_fairness"))
