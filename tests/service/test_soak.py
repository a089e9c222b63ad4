#!/usr/bin/python3
"""A short soak (issue #11): clients making Generate, Chat and
DescribeImage calls, cancelling, and disconnecting in the middle of
streams and image reads, for NPULLM_SOAK_SECONDS (120 by default; longer
by setting it). Throughout, a property read must answer within
NPULLM_SOAK_LATENCY_MS (100 by default); afterwards the daemon must be
back to its baseline (descriptors, threads, RSS) and still serving.

The clients are processes running this file with --worker KIND."""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npullm_testbus as tb  # noqa: E402
from hardening import GREEDY, VisionDaemonCase, describe, describe_async, variant_dict  # noqa: E402
from npullm_testbus import GLib, run_tap  # noqa: E402

KINDS = ["generate", "chat", "describe", "cancel", "disconnect", "stalled-image"]
# Errors a worker may meet under load: the limits answering.
EXPECTED = {"org.npullm.Error.Busy"}


def worker(kind, seconds, address, image):
    """One client process: repeats its kind of call until time is up;
    prints {"ops": n, "errors": {name: count}}."""
    os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = address
    bus = type("Bus", (), {"address": address, "connect": tb.PrivateBus.connect})()
    ops, errors = 0, {}
    end = time.monotonic() + seconds
    c = tb.Client(bus)
    i = 0
    while time.monotonic() < end:
        i += 1
        opts = variant_dict(dict(GREEDY, max_tokens=("u", 3 + i % 12)))
        try:
            if kind == "generate":
                c.run("Count to %d" % i, opts)
            elif kind == "chat":
                msgs = [{"role": GLib.Variant("s", "user"), "content": GLib.Variant("s", "Hi %d" % i)}]
                c.run(msgs, opts, method="Chat")
            elif kind == "describe":
                fd = os.open(image, os.O_RDONLY)
                try:
                    path = describe(c, fd, options=dict(GREEDY))
                finally:
                    os.close(fd)
                c.wait(lambda: c.finished_of(path) is not None, 60)
            elif kind == "cancel":
                path = c.generate("Tell me a story", variant_dict(dict(GREEDY, max_tokens=("u", 64))))
                c.pump(0.01 * (i % 5))
                c.call("Cancel", path=path, iface=tb.REQUEST_IFACE)
                c.wait(lambda: c.finished_of(path) is not None, 60)
            elif kind == "disconnect":
                c.generate("Tell me a story", variant_dict(dict(GREEDY, max_tokens=("u", 64))))
                c.pump(0.01 * (i % 5))
                c.close()
                c = tb.Client(bus)
            elif kind == "stalled-image":
                r, w = os.pipe()
                os.write(w, b"\x89PNG\r\n")
                describe_async(c, r)
                os.close(r)
                c.pump(0.05 + 0.01 * (i % 10))
                c.close()
                os.close(w)
                c = tb.Client(bus)
            ops += 1
        except GLib.Error as e:
            name = tb.dbus_error_name(e) or e.message
            errors[name] = errors.get(name, 0) + 1
            time.sleep(0.02)
        if len(c.signals) > 1000:
            c.signals.clear()
    c.close()
    print(json.dumps({"ops": ops, "errors": errors}))


class SoakTest(VisionDaemonCase):
    CONFIG = {
        "Limits": {"MaxRunning": "4", "MaxQueued": "16", "MaxPerClient": "4", "MaxPerUser": "24",
                   "MaxCallsPerUser": "24", "MaxImagesPerUser": "4", "MaxImagesInFlight": "4"},
        "Models": {"MaxContext": "512"},
    }
    RSS_SLACK_KIB = 96 * 1024

    def test_soak(self):
        seconds = float(os.environ.get("NPULLM_SOAK_SECONDS", "120"))
        latency_limit = float(os.environ.get("NPULLM_SOAK_LATENCY_MS", "100"))
        image = self.image("rose.png")
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", kind, str(seconds),
                                   self.bus.address, image], stdout=subprocess.PIPE, env=self.bus.env)
                 for kind in KINDS]
        c = self.client()
        worst = 0.0
        peak = dict(self.baseline)
        try:
            while any(p.poll() is None for p in procs):
                t0 = time.monotonic()
                c.prop("ActiveRequests")
                c.prop("LoadedModels")
                worst = max(worst, (time.monotonic() - t0) * 1000 / 2)
                now = self.stats.snapshot()
                peak = {k: max(peak[k], now[k]) for k in peak}
                time.sleep(0.25)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        results = {}
        for kind, p in zip(KINDS, procs):
            out, _ = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, kind)
            results[kind] = json.loads(out)
        print("# soak %.0f s: %s; worst property read %.1f ms; peak %s; baseline %s"
              % (seconds, results, worst, peak, self.baseline))
        for kind, r in results.items():
            self.assertGreater(r["ops"], 0, "%s made no progress: %s" % (kind, r))
            unexpected = set(r["errors"]) - EXPECTED
            self.assertFalse(unexpected, "%s: %s" % (kind, r["errors"]))
        self.assertLess(worst, latency_limit, "a property read took %.1f ms" % worst)
        self.wait_idle(c)
        self.assert_still_serving()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5])
        sys.exit(0)
    sys.exit(run_tap("test_soak"))
