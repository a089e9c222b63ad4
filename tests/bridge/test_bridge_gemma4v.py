#!/usr/bin/python3
"""Images on Gemma 4 through npullm-bridge (issue 32): a Gemma 4 model
paired with its gemma4v projector (g4.gguf, g4.mmproj.gguf) behind a real
dbus-daemon, npullmd and npullm-bridge; the official npm clients `ollama`
(/api/generate and /api/chat with `images`) and `openai` (`image_url`
content parts, streamed and not) send a real PNG and a real JPEG
(tests/bridge/image-clients.mjs), then curl checks that the daemon still
serves. The daemon's prefill chunk (32, npullm_testbus's configuration)
is smaller than the image's rows, which go through the model in one step.

Environment (tests/bridge/meson.build): NPULLMD, NPULLM_CLIENT,
NPULLM_BRIDGE, NPULLM_TEST_MODEL, NPULLM_TEST_G4_MODEL,
NPULLM_TEST_G4_MMPROJ, NPULLM_TEST_G4_IMAGE_ROWS (the PNG's rows with
that projector), NPULLM_TEST_IMAGES, NODE."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TESTS, "service"))
sys.path.insert(0, HERE)
import npullm_testbus as tb  # noqa: E402
from npullm_testbus import run_tap  # noqa: E402
from test_bridge import BridgeTestCase, curl  # noqa: E402

PNG = "rose-204x192.png"
JPEG = "rose.jpg"


class BridgeGemma4VisionTest(BridgeTestCase):
    ARGS = ("--default-model", "tiny")

    @staticmethod
    def make_model_dir(workdir):
        d = tb.make_model_dir(workdir)
        tb.place_model(tb.env_path("NPULLM_TEST_G4_MODEL"), os.path.join(d, "g4.gguf"))
        tb.place_model(tb.env_path("NPULLM_TEST_G4_MMPROJ"), os.path.join(d, "g4.mmproj.gguf"))
        return d

    def test_npm_clients_images(self):
        node = os.environ.get("NODE")
        if not node:
            self.skipTest("node is not installed")
        images = tb.env_path("NPULLM_TEST_IMAGES")
        p = subprocess.run([node, os.path.join(HERE, "image-clients.mjs"), self.bridge.url, "g4",
                            os.path.join(images, PNG), os.path.join(images, JPEG),
                            os.environ["NPULLM_TEST_G4_IMAGE_ROWS"]],
                           cwd=TESTS, capture_output=True, text=True, timeout=800)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for case in ("ollama show vision", "ollama generate png", "ollama chat jpeg stream", "openai image_url png",
                     "openai image_url jpeg stream"):
            self.assertIn("ok " + case + "\n", p.stdout)
        # the daemon serves on: a text request to the same model
        status, text = curl(self.bridge.url, "/api/generate", body={
            "model": "g4", "prompt": "Hello", "stream": False, "options": {"num_predict": 2}}, timeout=600)
        self.assertEqual(status, 200, text)
        self.assertEqual(json.loads(text)["eval_count"], 2)
        self.wait_idle(self.client())


if __name__ == "__main__":
    sys.exit(run_tap("test_bridge_gemma4v"))
