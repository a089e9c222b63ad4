#!/usr/bin/python3
"""The power policy's phase split (docs/desktop.md) on the emulated NPU:
power-profiles-daemon and UPower mocks; on performance and mains the
requests prefill on npu-emu and decode on the CPU, their KV cache moved
once (PowerPolicy, DeviceStatus and each request's stats say so), a
request the switch meets halfway moves at its next step and finishes, and
leaving performance (or going on battery) sends decoding back to the
device; [Power] PerformanceDecode takes cpu or npu. The model is the
Q4_0 fixture: both devices hold the same 4-bit codes (docs/npu.md)."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from npullm_testbus import GLib, env_path, run_tap, variant_dict  # noqa: E402
from test_desktop import PowerMockTestCase  # noqa: E402
from test_weight_cache import CacheDirTestCase  # noqa: E402

PPD = "net.hadess.PowerProfiles"
GREEDY = {"temperature": ("d", 0.0), "max_tokens": ("u", 6)}
SPLIT = "npu-emu prefill, cpu decode"


class PhaseSplitTest(PowerMockTestCase):
    ARGS = ("--default-model", "tiny", "--device", "npu-emu")
    CONFIG = {"Engine": {"Threads": "2"}}

    make_model_dir = staticmethod(CacheDirTestCase.make_model_dir)  # the Q4_0 fixture

    def phases(self, stats):
        return (stats["prefill_device"], stats["decode_device"], stats["kv_moves"])

    def test_performance_on_mains_splits(self):
        c = self.client()
        self.ppd.set(PPD, "ActiveProfile", GLib.Variant("s", "balanced"))
        self.assertEqual(self.policy_becomes(c, "balanced, on mains"),
                         "balanced, on mains: 2 of 2 threads, background requests run, "
                         "idle models unload after 300 s")
        _, reason, stats = c.run("Hello there", variant_dict(GREEDY))
        self.assertEqual(reason, "length")
        self.assertEqual(self.phases(stats), ("npu-emu", "npu-emu", 0))

        # a request the switch meets halfway moves at its next step
        path = c.generate("a long story", variant_dict(dict(GREEDY, max_tokens=("u", 120))))
        self.assertTrue(c.wait(lambda: len(c.tokens_of(path)) > 0, 60))
        self.ppd.set(PPD, "ActiveProfile", GLib.Variant("s", "performance"))
        self.assertEqual(self.policy_becomes(c, "performance, on mains"),
                         "performance, on mains: 2 of 2 threads, %s, background requests run, "
                         "idle models unload after 300 s" % SPLIT)
        self.assertIsNone(c.finished_of(path), "the request ended before the switch")
        self.assertTrue(c.prop("DeviceStatus").endswith("; power: " + c.prop("PowerPolicy")))
        self.assertTrue(c.wait(lambda: c.finished_of(path) is not None, 120))
        reason, stats = c.finished_of(path)
        self.assertEqual((reason, stats["generated_tokens"]), ("length", 120))
        self.assertEqual(self.phases(stats), ("npu-emu", "cpu", 1))

        # the next request splits from its first decode step
        _, reason, stats = c.run("Hello there", variant_dict(GREEDY))
        self.assertEqual((reason, self.phases(stats)), ("length", ("npu-emu", "cpu", 1)))
        self.assertEqual(stats["device"], "npu-emu")

        # on battery, and back to balanced: decoding on the device again
        self.upower.set("org.freedesktop.UPower", "OnBattery", GLib.Variant("b", True))
        self.assertNotIn(SPLIT, self.policy_becomes(c, "performance, on battery"))
        _, _, stats = c.run("Good morning", variant_dict(GREEDY))
        self.assertEqual(self.phases(stats), ("npu-emu", "npu-emu", 0))
        self.upower.set("org.freedesktop.UPower", "OnBattery", GLib.Variant("b", False))
        self.assertIn(SPLIT, self.policy_becomes(c, "performance, on mains"))
        self.ppd.set(PPD, "ActiveProfile", GLib.Variant("s", "balanced"))
        self.assertNotIn(SPLIT, self.policy_becomes(c, "balanced, on mains"))
        _, _, stats = c.run("Good evening", variant_dict(GREEDY))
        self.assertEqual(self.phases(stats), ("npu-emu", "npu-emu", 0))


class PhaseSplitConfigTest(unittest.TestCase):
    def test_bad_value_stops_the_start(self):
        workdir = tempfile.mkdtemp(prefix="npullm-split-conf-")
        self.addCleanup(shutil.rmtree, workdir, True)
        conf = os.path.join(workdir, "npullm.conf")
        with open(conf, "w") as f:
            f.write("[Power]\nPerformanceDecode=gpu\n")
        out = subprocess.run([env_path("NPULLMD"), "--config", conf], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("[Power] PerformanceDecode=gpu: expected cpu or npu", out.stderr)


if __name__ == "__main__":
    sys.exit(run_tap("test_phase_split"))
