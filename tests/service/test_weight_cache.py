#!/usr/bin/python3
"""npullmd keeps the CPU's repacked weights in its cache directory
(systemd's CacheDirectory=, $CACHE_DIRECTORY): the first load writes
tiny.gguf.cpuw in the background (the unload waits for it and logs how it
went), a load after UnloadModel or an idle unload maps it, with
the same greedy output; [Engine] WeightCache=false keeps none. The daemon
logs what became of the cache at each load. The model is the Q4_0
fixture (f32 matrices are not repacked)."""

import os
import subprocess
import sys
import unittest
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from npullm_testbus import (ServiceTestCase, env_path, place_model, run_tap, variant_dict)  # noqa: E402

GREEDY = {"temperature": ("d", 0.0), "max_tokens": ("u", 6)}


class CacheDirTestCase(ServiceTestCase):
    """A daemon with CACHE_DIRECTORY set to a fresh directory, serving the
    Q4_0 fixture as tiny.gguf."""
    CACHE_DIRECTORY = ()

    @staticmethod
    def make_model_dir(workdir):
        d = os.path.join(workdir, "models")
        os.makedirs(d, exist_ok=True)
        place_model(env_path("NPULLM_TEST_Q4_MODEL"), os.path.join(d, "tiny.gguf"))
        return d

    def cache_lines(self):
        return [line for line in self.daemon.read_log().splitlines() if "model tiny: weight cache" in line]

    def wait_log(self, pred, timeout=60):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred(self.daemon.read_log()):
                return True
            time.sleep(0.05)
        return False


class WeightCacheTest(CacheDirTestCase):
    def test_reload_maps_the_cache(self):
        c = self.client()
        first, reason, _ = c.run("Hello there", variant_dict(GREEDY))
        self.assertEqual(reason, "length")
        path = os.path.join(self.cache_dir, "tiny.gguf.cpuw")
        self.assertIn("; writing %s in the background" % path, self.cache_lines()[-1])
        c.call("UnloadModel", "(s)", ("tiny",))  # waits for the write, logs it
        self.assertIn("; wrote " + path, self.cache_lines()[-1])
        self.assertEqual(sorted(os.listdir(self.cache_dir)), ["tiny.gguf.cpuw"])
        c.call("LoadModel", "(s)", ("tiny",))
        self.assertIn("mapped", self.cache_lines()[-1])
        second, _, _ = c.run("Hello there", variant_dict(GREEDY))
        self.assertEqual(second, first)
        self.assertEqual(len(self.cache_lines()), 3)
        self.assertEqual(sorted(os.listdir(self.cache_dir)), ["tiny.gguf.cpuw"])


class WeightCacheIdleTest(CacheDirTestCase):
    CONFIG = {"Models": {"IdleTimeout": "1"}}

    def test_idle_unload_then_reload_maps_the_cache(self):
        c = self.client()
        first, _, _ = c.run("Once upon a time", variant_dict(GREEDY))
        self.assertTrue(self.wait_log(lambda log: "unloading model tiny" in log))
        second, _, _ = c.run("Once upon a time", variant_dict(GREEDY))
        self.assertEqual(second, first)
        lines = self.cache_lines()
        self.assertEqual(len(lines), 3, lines)
        self.assertIn("in the background", lines[0])  # first load
        self.assertIn("; wrote", lines[1])  # its unload
        self.assertIn("mapped", lines[2])  # the second load


class WeightCacheOffTest(CacheDirTestCase):
    CONFIG = {"Engine": {"Threads": "2", "PrefillChunk": "32", "WeightCache": "false"}}

    def test_no_cache_written(self):
        c = self.client()
        c.run("Hello there", variant_dict(GREEDY))
        self.assertEqual(os.listdir(self.cache_dir), [])
        self.assertEqual(self.cache_lines(), [])


class WeightCacheConfigTest(unittest.TestCase):
    def test_bad_value_is_refused(self):
        with tempfile.NamedTemporaryFile("w", suffix=".conf") as f:
            f.write("[Engine]\nWeightCache=maybe\n")
            f.flush()
            out = subprocess.run([env_path("NPULLMD"), "--config", f.name], capture_output=True, text=True,
                                 timeout=10)
        self.assertEqual(out.returncode, 2)
        self.assertIn("WeightCache must be true or false", out.stderr)


if __name__ == "__main__":
    sys.exit(run_tap("test_weight_cache"))
