#!/usr/bin/python3
"""npullmd on the emulated NPU (--device npu-emu): whole requests run
through the NPU runtime and report it (Device, DeviceStatus, the
Finished stats, npullm-client status); a conversation's next turn
reuses the previous turn's KV cache kept on the device (cached_tokens)
and gives the text a request without reuse gives; --device auto on a machine
without an NPU picks the CPU and logs one line naming the reason; an
explicit --device npu that cannot be used stops the daemon at start."""

import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from npullm_testbus import (ServiceTestCase, env_path, run_tap, variant_dict)  # noqa: E402

GREEDY = {"temperature": ("d", 0.0), "max_tokens": ("u", 6)}


class NpuEmuTest(ServiceTestCase):
    ARGS = ("--default-model", "tiny", "--device", "npu-emu")

    def test_properties(self):
        c = self.client()
        self.assertEqual(c.prop("Device"), "npu-emu")
        self.assertIn("emulated NPU", c.prop("DeviceStatus"))

    def test_request_runs_on_the_device(self):
        c = self.client()
        text, reason, stats = c.run("Hello there", variant_dict(GREEDY))
        self.assertEqual(reason, "length")
        self.assertEqual(stats["generated_tokens"], 6)
        self.assertGreater(stats["prompt_tokens"], 3)
        self.assertEqual(stats["device"], "npu-emu")
        # greedy on the device is deterministic
        text2, info = c.call("Complete", "(sa{sv})", ("Hello there", variant_dict(GREEDY)), "(sa{sv})")
        self.assertEqual(text2, text)
        self.assertEqual(info["device"], "npu-emu")

    def test_concurrent_requests_batch(self):
        c = self.client()
        alone, _, _ = c.run("Once upon a time", variant_dict(GREEDY))
        paths = [c.generate(p, variant_dict(GREEDY)) for p in ("Once upon a time", "The sea", "Hi")]
        self.assertTrue(c.wait(lambda: all(c.finished_of(p) is not None for p in paths), 120))
        for p in paths:
            self.assertEqual(c.finished_of(p)[0], "length")
        # a sequence decoded in a batch gets what it gets alone
        self.assertEqual("".join(c.tokens_of(paths[0])), alone)
        self.wait_idle(c)

    def test_next_turn_reuses_the_device_cache(self):
        c = self.client()
        self.assertEqual(c.call("ForgetCache"), ())
        first = "Once upon a time, in a land far away, there lived"
        text1, _, stats1 = c.run(first, variant_dict(GREEDY))
        self.assertEqual(stats1["cached_tokens"], 0)
        second = first + text1 + " And then the story went on."
        text2, _, stats2 = c.run(second, variant_dict(GREEDY))
        self.assertEqual(stats2["device"], "npu-emu")
        self.assertGreater(stats2["cached_tokens"], 0, stats2)
        self.assertLess(stats2["cached_tokens"], stats2["prompt_tokens"])
        # the same turn with nothing cached: the same text
        self.assertEqual(c.call("ForgetCache"), ())
        text2b, _, stats2b = c.run(second, variant_dict(GREEDY))
        self.assertEqual(stats2b["cached_tokens"], 0)
        self.assertEqual(text2b, text2)

    def test_no_weight_cache_beside_the_models(self):
        """Without systemd's CacheDirectory the daemon keeps no NPU weight
        cache: it never writes into a model directory."""
        c = self.client()
        c.run("Hello", variant_dict(GREEDY))
        self.assertEqual(glob.glob(os.path.join(self.model_dir, "*.q4nx*")), [])

    def test_client_status(self):
        out = self.run_client("status")
        self.assertEqual(out.returncode, 0, out.stderr)
        fields = dict(line.split(None, 1) for line in out.stdout.decode().splitlines() if " " in line)
        self.assertEqual(fields.get("Device"), "npu-emu")
        self.assertIn("emulated NPU", fields.get("DeviceStatus", ""))


class NpuEmuCacheDirectoryTest(ServiceTestCase):
    """With CACHE_DIRECTORY (systemd's CacheDirectory=) the repacked
    weights are kept there, named after the model file."""
    ARGS = ("--default-model", "tiny", "--device", "npu-emu")
    CACHE_DIRECTORY = ("/nonexistent/second",)

    def test_weights_cached_in_cache_directory(self):
        c = self.client()
        text, reason, stats = c.run("Hello there", variant_dict(GREEDY))
        self.assertEqual(stats["device"], "npu-emu")
        self.assertEqual(os.listdir(self.cache_dir), ["tiny.gguf.q4nx"])
        self.assertEqual(glob.glob(os.path.join(self.model_dir, "*.q4nx*")), [])


class AutoTest(ServiceTestCase):
    ARGS = ("--default-model", "tiny", "--device", "auto")

    def test_auto_falls_back_to_cpu(self):
        c = self.client()
        self.assertEqual(c.prop("Device"), "cpu")
        status = c.prop("DeviceStatus")
        self.assertTrue(status.startswith("auto: NPU not used ("), status)
        _, reason, stats = c.run("Hello", variant_dict(GREEDY))
        self.assertEqual(stats["device"], "cpu")
        log = self.daemon.read_log().splitlines()
        fallback = [l for l in log if "device auto: using the CPU: " in l]
        self.assertEqual(len(fallback), 1, log)
        # DeviceStatus goes on with the power policy ("; power: ...")
        self.assertIn(status.split("; power: ")[0], fallback[0])


class ExplicitNpuTest(ServiceTestCase):
    # The daemon is started by the test itself.
    @classmethod
    def setUpClass(cls):
        cls.npullmd_path = env_path("NPULLMD")

    @classmethod
    def tearDownClass(cls):
        pass

    def test_unusable_npu_is_a_startup_error(self):
        # Decided before the bus is touched.
        out = subprocess.run([self.npullmd_path, "--session", "--device", "npu"],
                             capture_output=True, text=True, timeout=30,
                             env=dict(os.environ, DBUS_SESSION_BUS_ADDRESS="unix:path=/nonexistent"))
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("npullmd: device npu: ", out.stderr)


if __name__ == "__main__":
    sys.exit(run_tap("test_npu_emu"))
