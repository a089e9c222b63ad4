#!/usr/bin/python3
"""Lifecycle: idle unloading gives memory back and the next request
reloads; IdleTimeout 0; exit on idle; startup errors."""

import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from npullm_testbus import (GLib, Npullmd, PrivateBus, ServiceTestCase, env_path, make_model_dir,  # noqa: E402
                            run_tap, variant_dict, wait_for_name, BUS_NAME)

OPTS = variant_dict({"temperature": ("d", 0.0), "max_tokens": ("u", 4)})


class IdleUnloadTest(ServiceTestCase):
    CONFIG = {"Models": {"IdleTimeout": "1"}}

    def test_idle_unload_returns_memory(self):
        c = self.client()
        baseline = self.daemon.rss_kib()
        text, reason, _ = c.run("hi", OPTS)
        loaded = self.daemon.rss_kib()
        self.assertEqual(c.prop("LoadedModels"), ["tiny"])
        self.assertTrue(c.wait(lambda: c.prop("LoadedModels") == [], 10), "model not unloaded")
        time.sleep(0.2)
        unloaded = self.daemon.rss_kib()
        print("# RSS: %d KiB idle, %d KiB loaded, %d KiB after idle unload" % (baseline, loaded, unloaded))
        self.assertGreater(loaded - baseline, 30000)  # the weights were resident
        sanitized = b"libasan" in subprocess.run(["ldd", self.npullmd_path], capture_output=True).stdout
        if not sanitized:  # ASan's allocator keeps freed memory in quarantine
            self.assertLess(unloaded - baseline, (loaded - baseline) * 0.2 + 4096)
        # the next request loads it again ("loading" state) and gives the same text
        path = c.generate("hi", OPTS)
        self.assertTrue(c.wait(lambda: c.finished_of(path) is not None))
        states = [s[3][1].get("State") for s in c.signals
                  if s[0] == path and s[2] == "PropertiesChanged"]
        self.assertIn("loading", states)
        self.assertEqual("".join(c.tokens_of(path)), text)

    def test_idle_timeout_zero(self):
        c = self.client()
        c.call("Set", "(ssv)", ("org.npullm.Manager", "IdleTimeout", GLib.Variant("u", 0)),
               iface="org.freedesktop.DBus.Properties")
        try:
            c.run("hi", OPTS)
            self.assertTrue(c.wait(lambda: c.prop("LoadedModels") == [], 3))
        finally:
            c.call("Set", "(ssv)", ("org.npullm.Manager", "IdleTimeout", GLib.Variant("u", 1)),
                   iface="org.freedesktop.DBus.Properties")


class ExitOnIdleTest(unittest.TestCase):
    def private_bus(self):
        """A workdir and a private bus in it, both gone when the test ends."""
        workdir = self.enterContext(tempfile.TemporaryDirectory(prefix="npullm-test-", ignore_cleanup_errors=True))
        bus = PrivateBus(workdir)
        self.addCleanup(bus.stop)
        return workdir, bus

    def test_exit_on_idle(self):
        workdir, bus = self.private_bus()
        d = Npullmd(bus, env_path("NPULLMD"), [make_model_dir(workdir)], {}, ["--exit-on-idle", "1"])
        rc = d.proc.wait(10)
        self.assertEqual(rc, 0)
        self.assertIn("idle for 1 s, exiting", d.read_log())

    def test_startup_errors(self):
        npullmd = env_path("NPULLMD")
        # (--device npu: no NPU on the test machines, discovery says why)
        for args, needle in ((["--device", "npu"], "npullmd: device npu: "),
                             (["--device", "gpu"], "expected auto, cpu"),
                             (["--config", "/nonexistent/npullm.conf"], "nonexistent"),
                             (["--idle-timeout", "-5"], "non-negative")):
            out = subprocess.run([npullmd] + args, capture_output=True, text=True, timeout=10)
            self.assertEqual(out.returncode, 2, args)
            self.assertIn(needle, out.stderr, args)
        with tempfile.NamedTemporaryFile("w", suffix=".conf") as f:
            f.write("[Limits]\nMaxRunning=0\n")
            f.flush()
            out = subprocess.run([npullmd, "--config", f.name], capture_output=True, text=True, timeout=10)
            self.assertEqual(out.returncode, 2)
            self.assertIn("MaxRunning", out.stderr)

    def test_name_already_owned(self):
        workdir, bus = self.private_bus()
        models = make_model_dir(workdir)
        first = Npullmd(bus, env_path("NPULLMD"), [models])
        second = subprocess.run([env_path("NPULLMD"), "--model-dir", models], env=bus.env,
                                capture_output=True, text=True, timeout=10)
        self.assertEqual(second.returncode, 1)
        self.assertIn("cannot own org.npullm", second.stderr)
        self.assertTrue(wait_for_name(first.conn, BUS_NAME))
        self.assertEqual(first.stop(), 0)


if __name__ == "__main__":
    sys.exit(run_tap("test_lifecycle"))
