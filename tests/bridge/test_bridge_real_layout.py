#!/usr/bin/python3
"""The large real-layout files (tests/fixtures/make-real-layout.py:
gpt-oss-20b with its MXFP4 experts and harmony template, Qwen3-30B-A3B)
streamed through a real dbus-daemon, npullmd and npullm-bridge: for each
model, `npullm-client --json chat` prints token/thinking events before its
finished event (`generate --raw` at least two: no template, token by
token), and the official npm clients `ollama` and `openai`
(stream-clients.mjs) get their streamed chunks; gpt-oss with reasoning
effort low (--reasoning-effort, Ollama's think level, OpenAI's
reasoning_effort). Greedy and a few tokens: random weights may end early,
but never before one streamed piece, and the counts agree (each piece at
least one token; the three paths render the same prompt). The model is
loaded once for the three paths and unloaded after; the daemon's peak RSS
(VmHWM) is printed as a TAP diagnostic.

Environment (tests/bridge/meson.build): NPULLMD, NPULLM_CLIENT,
NPULLM_BRIDGE, NPULLM_TEST_MODEL, NODE, NPULLM_REAL_LAYOUTS
("name=path;..."), NPULLM_REAL_LAYOUT_EFFORTS ("name=level;...")."""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TESTS, "service"))
sys.path.insert(0, HERE)
import npullm_testbus as tb  # noqa: E402
from npullm_testbus import run_tap  # noqa: E402
from test_bridge import BridgeTestCase  # noqa: E402

MAX_TOKENS = 6


def pairs(var):
    return dict(item.split("=", 1) for item in os.environ.get(var, "").split(";") if item)


class BridgeRealLayoutTest(BridgeTestCase):
    # one model at a time, kept loaded for its three paths (unloaded
    # explicitly); a short context keeps its KV cache small
    CONFIG = {"Models": {"IdleTimeout": "1800", "MaxContext": "512"}}
    ARGS = ("--default-model", "tiny")

    @staticmethod
    def make_model_dir(workdir):
        d = tb.make_model_dir(workdir)
        for name, path in pairs("NPULLM_REAL_LAYOUTS").items():
            tb.place_model(path, os.path.join(d, name + ".gguf"))
        return d

    def peak_rss_mib(self, reset=False):
        """npullmd's VmHWM; reset: start the next peak from here."""
        with open("/proc/%d/status" % self.daemon.proc.pid) as f:
            peak = next((int(ln.split()[1]) // 1024 for ln in f if ln.startswith("VmHWM:")), 0)
        if reset:
            with open("/proc/%d/clear_refs" % self.daemon.proc.pid, "w") as f:
                f.write("5")
        return peak

    def client_stream(self, name, *args, input=None, least=1):
        """npullm-client --json ARGS: at least @least non-empty token or
        thinking events before the finished one, agreeing with its stats."""
        out = self.run_client("--json", *args, "-m", name, "--temperature", "0", "-n", str(MAX_TOKENS), input=input,
                              timeout=900)
        self.assertEqual(out.returncode, 0, out.stderr)
        events = [json.loads(ln) for ln in out.stdout.decode().splitlines()]
        kinds = [e["event"] for e in events]
        self.assertIn("finished", kinds, kinds)
        end = kinds.index("finished")
        pieces = [e for e in events[:end] if e["event"] in ("token", "thinking") and e["text"]]
        stats = events[end]["stats"]
        self.assertGreaterEqual(len(pieces), least, events)
        self.assertLessEqual(len(pieces), stats["generated_tokens"], events)
        self.assertLessEqual(stats["generated_tokens"], MAX_TOKENS)
        if events[end]["reason"] == "length":
            self.assertEqual(stats["generated_tokens"], MAX_TOKENS)
        else:
            self.assertEqual(events[end]["reason"], "stop", events[end])
        return stats["prompt_tokens"], "%d pieces (%s) of %d tokens, %s" % (
            len(pieces), "".join(e["event"][0] for e in pieces), stats["generated_tokens"], events[end]["reason"])

    def npm_streams(self, name, effort):
        node = os.environ.get("NODE")
        if not node:
            self.skipTest("node is not installed")
        p = subprocess.run([node, os.path.join(HERE, "stream-clients.mjs"), self.bridge.url, name,
                            str(MAX_TOKENS)] + ([effort] if effort else []),
                           cwd=TESTS, capture_output=True, text=True, timeout=900)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        results = {}
        for line in p.stdout.splitlines():
            case, _, summary = line[len("ok "):].partition(" {")
            results[case] = json.loads("{" + summary)
        self.assertEqual(sorted(results), ["ollama chat stream", "openai chat stream"], p.stdout)
        return results

    def test_streams(self):
        efforts = pairs("NPULLM_REAL_LAYOUT_EFFORTS")
        for name in pairs("NPULLM_REAL_LAYOUTS"):
            with self.subTest(model=name):
                start = time.monotonic()
                effort = efforts.get(name)
                flags = ["--reasoning-effort", effort, "--think"] if effort else []
                prompt, pieces = self.client_stream(name, "chat", *flags, input=b"Hi\n")
                loaded = time.monotonic()
                # token by token: raw text has no chat template (gpt-oss's
                # harmony header holds a random model's text until a
                # <|message|> that may never come)
                raw = self.client_stream(name, "generate", "--raw", "Hi", least=2)[1]
                results = self.npm_streams(name, effort)
                # one chat template, one prompt, whichever way it came
                for case, r in results.items():
                    self.assertEqual(r["prompt"], prompt, (case, r))
                out = self.run_client("unload", name, timeout=120)
                self.assertEqual(out.returncode, 0, out.stderr)
                npm = ", ".join("%s %d pieces of %d tokens" % (case.split()[0], r["pieces"], r["generated"])
                                for case, r in sorted(results.items()))
                print("# %s: client chat %.0f s (load included; %s), then raw generate (%s) and the npm clients"
                      " %.0f s (%s), npullmd VmHWM %d MiB" % (name, loaded - start, pieces, raw,
                                                               time.monotonic() - loaded, npm,
                                                               self.peak_rss_mib(reset=True)), flush=True)
        self.wait_idle(self.client(), 60)


if __name__ == "__main__":
    sys.exit(run_tap("test_bridge_real_layout"))
