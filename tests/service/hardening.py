"""Shared by the hardening tests (test_attack.py, test_fairness.py,
test_soak.py): a private bus + npullmd serving the vision test model, what
the daemon process holds (RSS, peak RSS, descriptors, threads), and
hostile images built on the fly."""

import os
import struct
import time
import zlib

import npullm_testbus as tb
from npullm_testbus import Gio, GLib, variant_dict  # noqa: F401
from test_vision import VisionServiceCase

GREEDY = {"temperature": ("d", 0.0), "max_tokens": ("u", 4)}
# Under ASan freed memory stays resident (its quarantine): RSS is not
# compared there (descriptors and threads still are).
SANITIZED = os.environ.get("NPULLM_TEST_SANITIZED") == "1"


class DaemonStats:
    """What the npullmd process holds, from /proc."""

    def __init__(self, pid):
        self.pid = pid

    def status(self):
        out = {}
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                key, _, value = line.partition(":")
                out[key] = value.split()
        return out

    def rss_kib(self):
        return int(self.status()["VmRSS"][0])

    def peak_kib(self):
        return int(self.status()["VmHWM"][0])

    def reset_peak(self):
        """VmHWM back to the current RSS (clear_refs 5)."""
        with open("/proc/%d/clear_refs" % self.pid, "w") as f:
            f.write("5")

    def fds(self):
        return len(os.listdir("/proc/%d/fd" % self.pid))

    def threads(self):
        return int(self.status()["Threads"][0])

    def snapshot(self):
        return {"rss": self.rss_kib(), "fds": self.fds(), "threads": self.threads()}


class VisionDaemonCase(VisionServiceCase):
    """ServiceTestCase with the vision model as default (vision.gguf with
    its projector, plain.gguf text only). After each test the daemon must
    be back to its baseline: descriptors, threads (GLib keeps a few idle
    pool threads for a while: THREAD_SLACK), RSS within RSS_SLACK_KIB."""

    FD_SLACK = 0
    THREAD_SLACK = 4
    RSS_SLACK_KIB = 64 * 1024

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.stats = DaemonStats(cls.daemon.proc.pid)
        # warm up: model loaded, image path and pools used once
        c = tb.Client(cls.bus)
        try:
            c.run("Hello", variant_dict(GREEDY))
            fd = os.open(os.path.join(cls.images, "rose.png"), os.O_RDONLY)
            try:
                path = describe(c, fd)
            finally:
                os.close(fd)
            c.wait(lambda: c.finished_of(path) is not None, 60)
        finally:
            c.close()
        time.sleep(0.5)
        cls.baseline = cls.stats.snapshot()

    def setUp(self):
        super().setUp()
        self.stats.reset_peak()

    def tearDown(self):
        super().tearDown()
        self.assert_back_to_baseline()

    def assert_back_to_baseline(self, timeout=20):
        base = self.baseline
        deadline = time.monotonic() + timeout
        while True:
            now = self.stats.snapshot()
            ok = (now["fds"] <= base["fds"] + self.FD_SLACK and
                  now["threads"] <= base["threads"] + self.THREAD_SLACK and
                  (SANITIZED or now["rss"] <= base["rss"] + self.RSS_SLACK_KIB))
            if ok or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertTrue(ok, "daemon not back to its baseline: %s, baseline %s" % (now, base))

    def assert_still_serving(self):
        c = tb.Client(self.bus)
        try:
            text, reason, stats = c.run("Hello", variant_dict(GREEDY))
            self.assertEqual(reason, "length", stats)
        finally:
            c.close()


def describe(client, fd, prompt="What is this?", options=None, extra_fds=()):
    fds = Gio.UnixFDList.new()
    idx = fds.append(fd)
    for e in extra_fds:
        fds.append(e)
    return client.call("DescribeImage", "(hsa{sv})", (idx, prompt, variant_dict(options or GREEDY)), "(o)",
                       fd_list=fds)[0]


def describe_async(client, fd, options=None, timeout=60000):
    """Starts DescribeImage; returns a dict that gets 'result' or 'error'."""
    box = {}
    fds = Gio.UnixFDList.new()
    idx = fds.append(fd)

    def done(conn, res):
        try:
            ret, _ = conn.call_with_unix_fd_list_finish(res)
            box["result"] = ret.unpack()
        except GLib.Error as e:
            box["error"] = e
    client.conn.call_with_unix_fd_list(tb.BUS_NAME, tb.MANAGER_PATH, tb.MANAGER_IFACE, "DescribeImage",
                                       GLib.Variant("(hsa{sv})", (idx, "x", variant_dict(options or GREEDY))),
                                       None, Gio.DBusCallFlags.NONE, timeout, fds, None, done)
    return box


# ---- images --------------------------------------------------------------------

def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_gray(width, height, extra_chunks=()):
    """A black 8-bit greyscale PNG (compresses to almost nothing, so a
    huge image is a small file), with extra chunks after IHDR."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    comp = zlib.compressobj(9)
    row = b"\0" * (width + 1)
    idat = b"".join(comp.compress(row) for _ in range(height)) + comp.flush()
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + b"".join(extra_chunks) +
            png_chunk(b"IDAT", idat) + png_chunk(b"IEND", b""))


def ztxt_chunk(megabytes):
    """A zTXt chunk that inflates to megabytes MiB of spaces."""
    return png_chunk(b"zTXt", b"Comment\0\0" + zlib.compress(b" " * (megabytes << 20), 9))
