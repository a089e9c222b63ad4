#!/usr/bin/python3
"""npullm-bridge against a real dbus-daemon (the project's bus policy), a
polkit mock and the real npullmd with the test models: curl for every
endpoint and error path, the security checks (another uid, foreign Host
and Origin, the bearer token), socket activation with idle exit, and the
official npm clients `ollama` and `openai` (tests/bridge/clients.mjs).

Environment (tests/bridge/meson.build): NPULLMD, NPULLM_CLIENT,
NPULLM_BRIDGE, NPULLM_TEST_MODEL, NPULLM_TEST_VISION_MODEL,
NPULLM_TEST_MMPROJ, NPULLM_TEST_IMAGES, NODE."""

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TESTS, "service"))
import npullm_testbus as tb  # noqa: E402
from npullm_testbus import ServiceTestCase, run_tap  # noqa: E402

NOBODY = 65534


def model_dir(workdir):
    """tiny, tiny2, broken from the service tests, plus vision + its projector
    and think (a Qwen 3 whose template opens the <think> block)."""
    d = tb.make_model_dir(workdir)
    tb.place_model(tb.env_path("NPULLM_TEST_QWEN_MODEL"), os.path.join(d, "think.gguf"))
    tb.place_model(tb.env_path("NPULLM_TEST_VISION_MODEL"), os.path.join(d, "vision.gguf"))
    tb.place_model(tb.env_path("NPULLM_TEST_MMPROJ"), os.path.join(d, "vision.mmproj.gguf"))
    return d


class Bridge:
    """npullm-bridge on a free loopback port, its stderr in a file."""

    def __init__(self, bus, workdir, args=(), name="bridge", wrap=(), preexec_fn=None):
        self.log_path = os.path.join(workdir, name + ".log")
        self.log = open(self.log_path, "w")
        env = dict(bus.env, G_MESSAGES_DEBUG="npullm-bridge", XDG_CONFIG_HOME=os.path.join(workdir, "config"))
        self.proc = subprocess.Popen(list(wrap) + [tb.env_path("NPULLM_BRIDGE"), "--address", bus.address] + list(args),
                                     env=env, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     preexec_fn=preexec_fn)
        line = self.proc.stdout.readline()
        if not line.startswith("npullm-bridge: listening on "):
            rc = self.stop()
            raise RuntimeError("npullm-bridge did not start (exit status %s): %r\n%s" % (rc, line, self.read_log()))
        self.url = line.split()[-1].rstrip("/")

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def fds(self):
        return len(os.listdir("/proc/%d/fd" % self.proc.pid))

    def read_log(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        rc = tb.stop_process(self.proc)
        self.proc.stdout.close()
        self.log.close()
        return rc


def wait_until(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def in_netns(setup="ip link set lo up"):
    """A command prefix that runs a program in a new network namespace
    (only its own loopback, set up by the shell commands @setup): the
    bridge's fixed default port collides with nothing there."""
    return ["unshare", "-n", "--", "sh", "-c", setup + ' && exec "$0" "$@"']


def netns_works():
    return subprocess.run(in_netns() + ["true"], capture_output=True).returncode == 0


# Run as some uid: sends a request whose body claims 1 TiB and streams
# zeros for up to 3 s; prints the bytes it got out and the answer's
# first line (empty when the bridge closed without one).
FLOOD = r"""
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection((host, port))
s.sendall(b"POST /api/generate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
          b"Content-Length: 1099511627776\r\n\r\n")
sent, chunk, end = 0, b"0" * 65536, time.monotonic() + 3
s.settimeout(3)
try:
    while time.monotonic() < end:
        sent += s.send(chunk)
except OSError:
    pass
try:
    answer = s.recv(65536).split(b"\r\n")[0].decode()
except OSError:
    answer = ""
print(sent, answer)
"""


def curl(url, path, body=None, headers=(), method=None, uid=None, raw_body=None, timeout=60, netns_of=None):
    """(status, text) of one request made by curl (as @uid when given)."""
    cmd = ["curl", "-sS", "-N", "-o", "-", "-w", "\n%{http_code}", "--max-time", str(timeout)]
    for h in headers:
        cmd += ["-H", h]
    if method:
        cmd += ["-X", method]
    data = raw_body if raw_body is not None else (json.dumps(body).encode() if body is not None else None)
    if data is not None:
        cmd += ["--data-binary", "@-", "-H", "Content-Type: application/json"]
    if netns_of is not None:
        cmd = ["nsenter", "-t", str(netns_of), "-n"] + cmd
    if uid is not None:
        cmd = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"] + cmd
    p = subprocess.run(cmd + [url + path], input=data, capture_output=True, timeout=timeout + 10)
    if p.returncode != 0:
        raise AssertionError("curl %s: %s" % (path, p.stderr.decode(errors="replace")))
    text, _, status = p.stdout.decode().rpartition("\n")
    return int(status), text


class BridgeTestCase(ServiceTestCase):
    """npullmd and npullm-bridge (cls.bridge) for the tests of a class."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        try:
            os.chmod(cls.workdir, 0o755)  # the other uid's curl runs in it
            cls.bridge = Bridge(cls.bus, cls.workdir, ["--listen", "127.0.0.1:0"])
        except BaseException:
            super().tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        rc = cls.bridge.stop()
        log = cls.bridge.read_log() if not cls.bridge.log.closed else open(cls.bridge.log_path).read()
        super().tearDownClass()
        if rc != 0 or "CRITICAL" in log or "WARNING" in log or "runtime error" in log or "Sanitizer" in log:
            raise AssertionError("npullm-bridge exited with %s; its log:\n%s" % (rc, log))


class BridgeTest(BridgeTestCase):
    CONFIG = {"Models": {"MaxContext": "4096", "DefaultMaxTokens": "8"}}
    make_model_dir = staticmethod(model_dir)

    def get(self, path, **kw):
        return curl(self.bridge.url, path, **kw)

    def post(self, path, body, **kw):
        return curl(self.bridge.url, path, body=body, **kw)

    def assertStatus(self, expected, reply, shape="ollama"):
        status, text = reply
        self.assertEqual(status, expected, text)
        doc = json.loads(text)
        if expected >= 400:
            if shape == "ollama":
                self.assertIsInstance(doc["error"], str)
            else:
                self.assertIsInstance(doc["error"]["message"], str)
        return doc

    def image_b64(self):
        with open(os.path.join(tb.env_path("NPULLM_TEST_IMAGES"), "rose.png"), "rb") as f:
            return base64.b64encode(f.read()).decode()

    # ---- Ollama ----

    def test_ollama_listing(self):
        self.assertRegex(self.assertStatus(200, self.get("/api/version"))["version"], r"^\d+\.\d+\.\d+$")
        tags = self.assertStatus(200, self.get("/api/tags"))
        names = sorted(m["name"] for m in tags["models"])
        self.assertEqual(names, ["think:latest", "tiny2:latest", "tiny:latest", "vision:latest"])
        tiny = [m for m in tags["models"] if m["name"] == "tiny:latest"][0]
        self.assertEqual(tiny["details"]["family"], "llama")
        self.assertEqual(tiny["details"]["format"], "gguf")
        self.assertGreater(tiny["size"], 0)
        show = self.assertStatus(200, self.post("/api/show", {"model": "vision:latest"}))
        self.assertEqual(show["capabilities"], ["completion", "vision"])
        self.assertEqual(show["model_info"]["general.architecture"], "gemma3")
        show = self.assertStatus(200, self.post("/api/show", {"name": "tiny"}))
        self.assertEqual(show["capabilities"], ["completion"])
        self.assertIn("llama.context_length", show["model_info"])
        self.assertStatus(404, self.post("/api/show", {"model": "nope:7b"}))
        self.assertStatus(400, self.post("/api/show", {"model": "broken"}))
        self.assertStatus(400, self.post("/api/show", {}))
        # loading (an empty prompt) shows in /api/ps; keep_alive 0 unloads
        load = self.assertStatus(200, self.post("/api/generate", {"model": "tiny2:latest"}))
        self.assertEqual((load["done"], load["done_reason"]), (True, "load"))
        ps = self.assertStatus(200, self.get("/api/ps"))
        self.assertIn("tiny2:latest", [m["name"] for m in ps["models"]])
        unload = self.assertStatus(200, self.post("/api/generate", {"model": "tiny2", "keep_alive": 0}))
        self.assertEqual(unload["done_reason"], "unload")
        ps = self.assertStatus(200, self.get("/api/ps"))
        self.assertNotIn("tiny2:latest", [m["name"] for m in ps["models"]])

    def test_ollama_generate_stream(self):
        status, text = self.post("/api/generate", {"model": "tiny", "prompt": "Once", "options": {"num_predict": 5}})
        self.assertEqual(status, 200, text)
        lines = [json.loads(line) for line in text.splitlines()]
        # the service sends a request's first token at once, later ones
        # coalesced (at most every 100 ms): one line per Token signal
        self.assertEqual([x["done"] for x in lines], [False] * (len(lines) - 1) + [True])
        self.assertGreaterEqual(len(lines), 2)
        end = lines[-1]
        self.assertEqual(end["done_reason"], "length")
        self.assertEqual(end["eval_count"], 5)
        self.assertGreater(end["prompt_eval_count"], 0)
        for key in ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration"):
            self.assertIsInstance(end[key], int)
        self.assertEqual(end["model"], "tiny")
        self.assertTrue(all("created_at" in x for x in lines))

    def test_ollama_not_streaming(self):
        body = {"model": "tiny:latest", "prompt": "Once", "stream": False, "system": "Be brief.",
                "options": {"num_predict": 3, "seed": 42, "temperature": 0.9, "top_k": 20, "top_p": 0.9,
                            "min_p": 0.05, "repeat_penalty": 1.1, "stop": ["\n\n"], "num_ctx": 2048}}
        a = self.assertStatus(200, self.post("/api/generate", body))
        b = self.assertStatus(200, self.post("/api/generate", body))
        self.assertEqual(a["response"], b["response"], "a seed makes it repeatable")
        self.assertEqual(a["eval_count"], 3)
        raw = self.assertStatus(200, self.post("/api/generate", {"model": "tiny", "prompt": "x", "raw": True,
                                                                 "stream": False, "options": {"num_predict": 2}}))
        self.assertLess(raw["prompt_eval_count"], a["prompt_eval_count"], "raw: no chat template")
        chat = self.assertStatus(200, self.post("/api/chat", {
            "model": "tiny", "stream": False, "options": {"num_predict": 2},
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                         {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Again"}]}))
        self.assertEqual(chat["message"]["role"], "assistant")
        self.assertEqual(chat["done_reason"], "length")

    def test_ollama_chat_stream_and_image(self):
        status, text = self.post("/api/chat", {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}]})
        self.assertEqual(status, 200, text)
        lines = [json.loads(line) for line in text.splitlines()]
        self.assertTrue(lines[-1]["done"])
        self.assertEqual(lines[-1]["eval_count"], 8)  # the daemon's DefaultMaxTokens
        self.assertEqual(lines[0]["message"]["role"], "assistant")
        img = self.assertStatus(200, self.post("/api/generate", {
            "model": "vision", "prompt": "Describe.", "images": [self.image_b64()], "stream": False,
            "options": {"num_predict": 2}}))
        self.assertGreater(img["prompt_eval_count"], 16)
        # images per message, sent again with every turn (Chat reuses them)
        b64 = self.image_b64()
        convo = {"model": "vision", "stream": False, "options": {"num_predict": 2}, "messages": [
            {"role": "user", "content": "What is this?", "images": [b64]},
            {"role": "assistant", "content": "A rose."},
            {"role": "user", "content": "And these?", "images": [b64, b64]}]}
        chat = self.assertStatus(200, self.post("/api/chat", convo))
        self.assertGreater(chat["prompt_eval_count"], 3 * 16)
        convo["messages"][1]["images"] = [b64]
        doc = self.assertStatus(400, self.post("/api/chat", convo))
        self.assertIn("not a user message", doc["error"])
        self.assertStatus(400, self.post("/api/generate", {"model": "tiny", "prompt": "Describe.",
                                                           "images": [self.image_b64()], "stream": False}))

    def test_ollama_errors(self):
        for path in ("/api/pull", "/api/push", "/api/create", "/api/copy", "/api/delete"):
            doc = self.assertStatus(501, self.post(path, {"model": "tiny"}))
            self.assertIn("does not serve", doc["error"])
        self.assertStatus(404, self.get("/api/nothing"))
        self.assertStatus(404, self.get("/"))
        self.assertStatus(405, self.get("/api/chat"))
        self.assertStatus(405, self.post("/api/tags", {}))
        self.assertStatus(404, self.post("/api/generate", {"model": "nope:1b", "prompt": "x"}))
        bad = [
            (b"{not json", "not valid JSON"),
            (b"[1, 2]", "JSON object"),
            (b"", "no JSON body"),
            (b"\xff\xfe", "not valid JSON"),
            (b'{"a": ' + b"[" * 200000 + b"]" * 200000 + b"}", "nests deeper than 64"),
            # a quote in a comment hid the nesting from the depth count
            (b'{"a": /* " */ ' + b"[" * 200000 + b"]" * 200000 + b"}", "comments are not JSON"),
            (b'{"model": "tiny", // x\n "prompt": "x"}', "comments are not JSON"),
            # json-glib decodes a lone surrogate to text that is not UTF-8
            (b'{"model": "tiny", "prompt": "a\\ud800b"}', "surrogate"),
            (b'{"model": "tiny", "prompt": "\\udc00"}', "surrogate"),
            (b'{"model": "tiny", "prompt": "\\ud800\\u0041"}', "surrogate"),
            (b'{"model": "tiny", "prompt": "\\ud800"}', "surrogate"),
        ]
        for raw, words in bad:
            doc = self.assertStatus(400, self.get("/api/chat", raw_body=raw, method="POST"))
            self.assertIn(words, doc["error"])
            doc = self.assertStatus(400, self.get("/api/generate", raw_body=raw, method="POST"))
            self.assertIn(words, doc["error"])
        # a real pair and a "/" inside a string are fine
        doc = self.assertStatus(404, self.get("/api/show", raw_body=b'{"model": "\\ud83d\\ude00/x"}', method="POST"))
        self.assertIn("\U0001F600/x", doc["error"])
        wrong_types = [
            ("/api/chat", {"model": 3, "messages": []}, '"model" must be a string'),
            ("/api/chat", {"model": "tiny", "messages": "hi"}, '"messages" must be an array'),
            ("/api/chat", {"model": "tiny", "messages": []}, "non-empty"),
            ("/api/chat", {"model": "tiny", "messages": [7]}, "must be an object"),
            ("/api/chat", {"model": "tiny", "messages": [{"role": "robot", "content": "x"}]}, "role"),
            ("/api/chat", {"model": "tiny", "stream": "yes", "messages": [{"role": "user", "content": "x"}]},
             '"stream" must be true or false'),
            ("/api/generate", {"model": "tiny", "prompt": 5}, '"prompt" must be a string'),
            ("/api/generate", {"model": "tiny", "prompt": "x", "options": {"temperature": "hot"}},
             '"temperature" must be a number'),
            ("/api/generate", {"model": "tiny", "prompt": "x", "options": {"top_k": 1.5}}, "whole number"),
            ("/api/generate", {"model": "tiny", "prompt": "x", "options": {"stop": [1]}}, '"stop"'),
            ("/api/generate", {"model": "tiny", "prompt": "x", "options": "fast"}, '"options" must be an object'),
            ("/api/generate", {"model": "tiny", "prompt": "x", "images": ["%%%"]}, "base64"),
            ("/api/generate", {"model": "tiny", "prompt": "x", "images": ["QQ==", "QQ=="]}, "one image"),
            ("/api/generate", {"model": "tiny", "prompt": "x", "format": "yaml"}, '"format" must be'),
            ("/api/generate", {"model": "tiny", "prompt": "x", "format": {"type": "nope"}}, "/type"),
            ("/api/generate", {"model": "tiny", "prompt": "x", "suffix": "y"}, "fill-in-the-middle"),
            ("/api/chat", {"model": "tiny", "messages": [{"role": "user", "content": "x"}],
                           "tools": [{"type": "function"}]}, "tools[0].function"),
        ]
        for path, body, words in wrong_types:
            doc = self.assertStatus(400, self.post(path, body))
            self.assertIn(words, doc["error"], body)
        # numbers out of range are refused, not dropped: 1e999 is infinity
        for raw, words in ((b'{"model": "tiny", "prompt": "x", "options": {"temperature": 1e999}}', "finite"),
                           (b'{"model": "tiny", "prompt": "x", "options": {"top_p": -1e999}}', "finite"),
                           (b'{"model": "tiny", "prompt": "x", "options": {"num_predict": -5}}', "-1 (no limit)"),
                           (b'{"model": "tiny", "prompt": "x", "options": {"num_predict": 1e999}}', "finite"),
                           (b'{"model": "tiny", "prompt": "x", "options": {"seed": -3}}', "-1 (random)")):
            doc = self.assertStatus(400, self.get("/api/generate", raw_body=raw, method="POST"))
            self.assertIn(words, doc["error"], raw)
        doc = self.assertStatus(400, self.get("/v1/completions", method="POST", raw_body=(
            b'{"model": "tiny", "prompt": "x", "temperature": 1e999}')), "openai")
        self.assertIn("finite", doc["error"]["message"])
        # Ollama's own -1 and -2 still mean what they mean there
        for options in ({"num_predict": -1, "seed": -1}, {"num_predict": -2}):
            r = self.assertStatus(200, self.post("/api/generate", {"model": "tiny", "prompt": "x", "stream": False,
                                                                   "options": options}))
            self.assertLessEqual(r["eval_count"], 8)  # the daemon's DefaultMaxTokens
        # a prompt the context cannot hold: a status, even when streaming
        # (the stream's headers wait for its first token)
        long_prompt = "word " * 9000
        doc = self.assertStatus(400, self.post("/api/generate", {"model": "tiny", "prompt": long_prompt}))
        self.assertIn("context holds", doc["error"])
        doc = self.assertStatus(400, self.post("/v1/completions", {"model": "tiny", "prompt": long_prompt,
                                                                   "stream": True}), "openai")
        self.assertIn("context holds", doc["error"]["message"])
        # a daemon-side range check names the option
        doc = self.assertStatus(400, self.post("/api/generate", {"model": "tiny", "prompt": "x",
                                                                 "options": {"temperature": -1}}))
        self.assertIn("temperature", doc["error"])
        big = b'{"model": "tiny", "prompt": "' + b"a" * (33 * 1024 * 1024) + b'"}'
        doc = self.assertStatus(400, self.get("/api/generate", raw_body=big, method="POST"))
        self.assertIn("larger than", doc["error"])
        status, text = self.get("/api/generate", raw_body=b'{"prompt":"x"}', method="POST",
                                headers=["Transfer-Encoding: chunked"])
        self.assertEqual(status, 400, text)

    # ---- OpenAI ----

    def test_openai(self):
        models = self.assertStatus(200, self.get("/v1/models"), "openai")
        self.assertEqual(models["object"], "list")
        self.assertEqual(sorted(m["id"] for m in models["data"]), ["think", "tiny", "tiny2", "vision"])
        self.assertEqual(self.assertStatus(200, self.get("/v1/models/tiny"), "openai")["id"], "tiny")
        self.assertStatus(404, self.get("/v1/models/nope"), "openai")
        r = self.assertStatus(200, self.post("/v1/chat/completions", {
            "model": "tiny", "max_tokens": 3, "messages": [{"role": "developer", "content": "Be brief."},
                                                           {"role": "user", "content": "Hi"}]}), "openai")
        self.assertEqual(r["choices"][0]["finish_reason"], "length")
        self.assertEqual(r["usage"]["completion_tokens"], 3)
        self.assertEqual(r["usage"]["total_tokens"], r["usage"]["prompt_tokens"] + 3)
        status, text = self.post("/v1/chat/completions", {
            "model": "tiny", "stream": True, "max_completion_tokens": 3, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]})
        self.assertEqual(status, 200, text)
        events = [e for e in text.split("\n\n") if e]
        self.assertTrue(all(e.startswith("data: ") for e in events), events)
        self.assertEqual(events[-1], "data: [DONE]")
        chunks = [json.loads(e[6:]) for e in events[:-1]]
        self.assertEqual(chunks[-1]["choices"], [])
        self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 3)
        self.assertEqual(chunks[-2]["choices"][0]["finish_reason"], "length")
        self.assertEqual(chunks[0]["choices"][0]["delta"]["role"], "assistant")
        status, text = self.post("/v1/completions", {"model": "tiny", "prompt": "Once", "stream": True,
                                                      "max_tokens": 2, "stop": "\n"})
        self.assertEqual(status, 200, text)
        self.assertTrue(text.rstrip().endswith("data: [DONE]"))
        c = self.assertStatus(200, self.post("/v1/completions", {"model": "tiny", "prompt": ["Once"],
                                                                 "max_tokens": 2, "seed": 1}), "openai")
        self.assertEqual(c["object"], "text_completion")
        img = self.assertStatus(200, self.post("/v1/chat/completions", {
            "model": "vision", "max_tokens": 2, "messages": [{"role": "user", "content": [
                {"type": "text", "text": "Describe."},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + self.image_b64()}}]}]}),
            "openai")
        self.assertGreater(img["usage"]["prompt_tokens"], 16)
        url = {"url": "data:image/png;base64," + self.image_b64()}
        two = self.assertStatus(200, self.post("/v1/chat/completions", {
            "model": "vision", "max_tokens": 2, "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": url}, {"type": "text", "text": "A?"}]},
                {"role": "assistant", "content": "A rose."},
                {"role": "user", "content": [{"type": "text", "text": "B?"}, {"type": "image_url", "image_url": url}]}]}),
            "openai")
        self.assertGreater(two["usage"]["prompt_tokens"], 2 * 16)

    def test_openai_errors(self):
        self.assertStatus(400, self.post("/v1/embeddings", {"model": "tiny", "input": "x"}), "openai")
        self.assertStatus(404, self.post("/v1/chat/completions", {"model": "nope", "messages": [
            {"role": "user", "content": "x"}]}), "openai")
        self.assertStatus(405, self.get("/v1/chat/completions"), "openai")
        bad = [
            ({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "n": 2}, '"n" must be 1'),
            ({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1}, "whole number"),
            ({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}, "a number"),
            ({"model": "tiny", "messages": [{"role": "user", "content": 5}]}, '"content"'),
            ({"model": "tiny", "messages": [{"role": "user", "content": [{"type": "audio"}]}]}, "audio"),
            ({"model": "tiny", "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]}, "data: URL"),
            ({"model": "tiny", "messages": [{"role": "user", "content": "x"}],
              "stream_options": {"include_usage": 1}}, "true or false"),
        ]
        for body, words in bad:
            doc = self.assertStatus(400, self.post("/v1/chat/completions", body), "openai")
            self.assertIn(words, doc["error"]["message"], body)
        doc = self.assertStatus(400, self.post("/v1/completions", {"model": "tiny", "prompt": 3}), "openai")
        self.assertIn('"prompt"', doc["error"]["message"])
        doc = self.assertStatus(400, self.get("/v1/completions", raw_body=b"{]", method="POST"), "openai")
        self.assertIn("not valid JSON", doc["error"]["message"])

    # ---- security ----

    def test_other_user_forbidden(self):
        if os.getuid() != 0:
            self.skipTest("needs root to run curl as another uid")
        for path in ("/api/tags", "/v1/models"):
            status, text = self.get(path, uid=NOBODY)
            self.assertEqual(status, 403, text)
            self.assertIn("serves uid %d only" % os.getuid(), text)
        status, text = curl(self.bridge.url, "/api/generate", body={"model": "tiny", "prompt": "x"}, uid=NOBODY)
        self.assertEqual(status, 403, text)

    def flood(self, uid=None):
        host, port = self.bridge.url.rsplit("/", 1)[1].split(":")
        cmd = [sys.executable, "-c", FLOOD, host, port]
        if uid is not None:
            cmd = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"] + cmd
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        sent, _, answer = p.stdout.strip().partition(" ")
        return int(sent), answer

    def test_bodies_refused_unread(self):
        """A body the bridge refuses is never read nor kept: another uid's
        connection is answered 403 and closed at once, before a byte of its
        request is read; this user's oversized body gets 400 and the
        connection is closed. The bridge's memory stays put."""
        before = self.bridge.rss_kib()
        runs = [(None, "400")]
        if os.getuid() == 0:
            runs.append((NOBODY, "403"))
        for uid, status in runs:
            sent, answer = self.flood(uid)
            self.assertIn(" " + status + " ", answer + " ", (uid, sent, answer))
            # the bridge drops at most 1 MiB after refusing; the kernel's
            # buffers hold a few MiB more before the sender stalls or is reset
            self.assertLess(sent, 64 << 20, (uid, sent))
        grown = self.bridge.rss_kib() - before
        print("# RSS after two 1 TiB bodies: %+d KiB" % grown)
        self.assertLess(grown, 16 * 1024)
        self.assertEqual(self.get("/api/version")[0], 200)

    def test_half_sent_connections(self):
        """Connections that never finish their request neither exhaust the
        connection cap nor the descriptors for good: the header timeout
        closes them, accepting resumes after EMFILE, and the bridge answers
        while they are there and after they left."""
        import resource

        def few_fds():
            resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))
        for limit, count, words in ((None, 80, "connections open: accepting more once one closes"),
                                    (few_fds, 60, "cannot accept connections for now")):
            b = Bridge(self.bus, self.workdir, ["--listen", "127.0.0.1:0", "--header-timeout", "2"],
                       "half-sent", preexec_fn=limit)
            try:
                self.assertEqual(curl(b.url, "/api/version")[0], 200)
                baseline = b.fds()
                host, port = b.url.rsplit("/", 1)[1].split(":")
                held = []
                for _ in range(count):
                    s = socket.create_connection((host, int(port)))
                    s.sendall(b"POST /api/generate HTTP/1.1\r\nHost: local")
                    held.append(s)
                try:
                    self.assertTrue(wait_until(lambda: words in b.read_log(), 20), b.read_log())
                    self.assertEqual(curl(b.url, "/api/version", timeout=60)[0], 200)
                finally:
                    for s in held:
                        s.close()
                self.assertEqual(curl(b.url, "/api/version")[0], 200)
                self.assertTrue(wait_until(lambda: b.fds() <= baseline + 1, 20), (b.fds(), baseline))
            finally:
                rc = b.stop()
                self.assertEqual(rc, 0, b.read_log())

    def test_ipv6_loopback(self):
        """The peer check on [::1] (the socket unit's second address)."""
        try:
            socket.socket(socket.AF_INET6).bind(("::1", 0))
        except OSError:
            self.skipTest("no IPv6 loopback here")
        b = Bridge(self.bus, self.workdir, ["--listen", "[::1]:0"], "ipv6")
        try:
            self.assertTrue(b.url.startswith("http://[::1]:"), b.url)
            self.assertEqual(curl(b.url, "/api/version")[0], 200)
            if os.getuid() == 0:
                self.assertEqual(curl(b.url, "/api/version", uid=NOBODY)[0], 403)
        finally:
            self.assertEqual(b.stop(), 0)

    def test_foreign_host_and_origin(self):
        port = self.bridge.url.rsplit(":", 1)[1]
        # another local web server (perhaps another user's) is a foreign origin too
        for h in ("Origin: http://evil.example", "Origin: null", "Origin: http://127.0.0.1.evil.example",
                  "Origin: http://localhost:8080", "Origin: http://127.0.0.1:3000", "Origin: http://[::1]:80",
                  "Origin: http://localhost", "Origin: https://localhost:" + port,
                  "Host: evil.example", "Host: evil.example:11434", "Host: 127.0.0.1.nip.io"):
            status, text = self.get("/api/tags", headers=[h])
            self.assertEqual(status, 403, h)
            self.assertIn("forbidden", text)
        status, text = self.post("/v1/chat/completions", {"model": "tiny", "messages": []},
                                 headers=["Origin: http://evil.example"])
        self.assertEqual(status, 403, text)
        self.assertIn("evil.example", json.loads(text)["error"]["message"])
        for h in ("Origin: http://localhost:" + port, "Origin: http://127.0.0.1:" + port,
                  "Host: localhost:11434", "Host: [::1]:11434"):
            self.assertEqual(self.get("/api/version", headers=[h])[0], 200, h)

    def test_token(self):
        token_file = os.path.join(self.workdir, "token")
        with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write("s3cret-token\n")
        b = Bridge(self.bus, self.workdir, ["--listen", "127.0.0.1:0", "--token-file", token_file], "token")
        try:
            self.assertEqual(curl(b.url, "/api/version")[0], 401)
            self.assertEqual(curl(b.url, "/api/version", headers=["Authorization: Bearer wrong"])[0], 401)
            self.assertEqual(curl(b.url, "/v1/models", headers=["Authorization: Bearer s3cret-token"])[0], 200)
        finally:
            self.assertEqual(b.stop(), 0)
        # the default file, in the user's config folder, is read when present
        conf = os.path.join(self.workdir, "config", "npullm")
        os.makedirs(conf, exist_ok=True)
        os.link(token_file, os.path.join(conf, "bridge-token"))
        b = Bridge(self.bus, self.workdir, ["--listen", "127.0.0.1:0"], "token-default")
        try:
            self.assertEqual(curl(b.url, "/api/version")[0], 401)
        finally:
            b.stop()
            os.unlink(os.path.join(conf, "bridge-token"))
        os.chmod(token_file, 0o644)
        p = self.run_bridge("--listen", "127.0.0.1:0", "--token-file", token_file)
        self.assertEqual(p.returncode, 1)
        self.assertIn("mode 0600", p.stderr)

    def run_bridge(self, *args):
        return subprocess.run([tb.env_path("NPULLM_BRIDGE"), "--address", self.bus.address] + list(args),
                              env=self.bus.env, capture_output=True, text=True, timeout=30)

    def test_listen_errors(self):
        port = self.bridge.url.rsplit(":", 1)[1]
        p = self.run_bridge("--listen", "127.0.0.1:" + port)
        self.assertEqual(p.returncode, 1)
        self.assertIn("cannot listen on 127.0.0.1:%s" % port, p.stderr)
        for spec in ("0.0.0.0:0", "192.0.2.1:80"):
            p = self.run_bridge("--listen", spec)
            self.assertEqual(p.returncode, 1)
            self.assertIn("loopback addresses only", p.stderr)
        p = self.run_bridge("--listen", "nonsense")
        self.assertEqual(p.returncode, 1)
        self.assertIn("HOST:PORT", p.stderr)
        p = subprocess.run([tb.env_path("NPULLM_BRIDGE"), "--address", "unix:path=/nonexistent", "--listen",
                            "127.0.0.1:0"], capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 1)
        self.assertIn("cannot reach npullmd", p.stderr)

    def test_default_start(self):
        """No --listen, no socket: 127.0.0.1:11434 and [::1]:11434, in a
        network namespace of its own, answering the real npm clients."""
        if not netns_works():
            self.skipTest("cannot make a network namespace here (needs root or user namespaces)")
        has_v6 = os.path.exists("/proc/sys/net/ipv6")
        b = Bridge(self.bus, self.workdir, [], "default", wrap=in_netns())
        try:
            urls = {b.url}
            if has_v6:
                urls.add(b.proc.stdout.readline().split()[-1].rstrip("/"))
            self.assertEqual(urls, {"http://127.0.0.1:11434", "http://[::1]:11434"} if has_v6
                             else {"http://127.0.0.1:11434"})
            for url in urls:
                self.assertEqual(curl(url, "/api/version", netns_of=b.proc.pid)[0], 200, url)
            node = os.environ.get("NODE")
            if node:
                p = subprocess.run(["nsenter", "-t", str(b.proc.pid), "-n", node, os.path.join(HERE, "clients.mjs"),
                                    "http://127.0.0.1:11434", os.path.join(tb.env_path("NPULLM_TEST_IMAGES"), "rose.png"),
                                    "ollama version,ollama chat stream,openai models,openai chat stream"],
                                   cwd=TESTS, capture_output=True, text=True, timeout=120)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertEqual(p.stdout.count("ok "), 4, p.stdout)
            # a second one finds the port taken: a clear error, status 1
            p = subprocess.run(["nsenter", "-t", str(b.proc.pid), "-n", tb.env_path("NPULLM_BRIDGE"), "--address",
                                self.bus.address], env=self.bus.env, capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("cannot listen on 127.0.0.1:11434: port 11434 is in use, likely by a running Ollama",
                          p.stderr)
        finally:
            rc = b.stop()
            self.assertEqual(rc, 0, b.read_log())
        self.assertNotIn("CRITICAL", b.read_log())
        # a host without IPv6 is served on 127.0.0.1 alone
        if has_v6:
            b = Bridge(self.bus, self.workdir, [], "default-v4",
                       wrap=in_netns("sysctl -qw net.ipv6.conf.lo.disable_ipv6=1 && ip link set lo up"))
            try:
                self.assertEqual(b.url, "http://127.0.0.1:11434")
                self.assertEqual(curl(b.url, "/api/version", netns_of=b.proc.pid)[0], 200)
            finally:
                rc = b.stop()
            self.assertEqual(rc, 0, b.read_log())
            self.assertIn("not listening on [::1]:11434", b.read_log())
            # [::1]:11434 taken while 127.0.0.1:11434 is free: named too
            hold = ("import socket, subprocess, sys; s = socket.socket(socket.AF_INET6); s.bind(('::1', 11434)); "
                    "s.listen(); sys.exit(subprocess.call(sys.argv[1:]))")
            p = subprocess.run(in_netns() + [sys.executable, "-c", hold, tb.env_path("NPULLM_BRIDGE"), "--address",
                                             self.bus.address], env=self.bus.env, capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("cannot listen on [::1]:11434: port 11434 is in use", p.stderr)

    def test_socket_activation_and_idle_exit(self):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        port = listener.getsockname()[1]
        fd = listener.fileno()

        def as_fd3():
            os.dup2(fd, 3)
        # LISTEN_PID must be the bridge's own pid: the shell execs it
        cmd = ["sh", "-c", 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"', tb.env_path("NPULLM_BRIDGE"),
               "--address", self.bus.address, "--idle-exit", "1"]
        # (close_fds would close fd 3 after preexec_fn made it)
        p = subprocess.Popen(cmd, env=self.bus.env, preexec_fn=as_fd3, close_fds=False, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        listener.close()
        try:
            self.assertIn("listening on http://127.0.0.1:%d" % port, p.stdout.readline())
            status, text = curl("http://127.0.0.1:%d" % port, "/api/generate",
                                body={"model": "tiny", "prompt": "x", "options": {"num_predict": 2}})
            self.assertEqual(status, 200, text)
            out, err = p.communicate(timeout=30)  # idle for 1 s: it exits by itself
            self.assertEqual(p.returncode, 0, err)
            self.assertIn("idle for 1 s", err)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()

    def test_close_while_waiting_cancels(self):
        """A client that closes its connection while waiting for a whole
        (non-streamed) answer cancels the daemon's request."""
        c = self.client()
        before = self.bridge.read_log().count("(the client disconnected)")
        host, port = self.bridge.url.rsplit("/", 1)[1].split(":")
        body = json.dumps({"model": "tiny", "prompt": "Go on", "stream": False,
                           "options": {"num_predict": 3000}}).encode()
        with socket.create_connection((host, int(port))) as s:
            s.sendall(b"POST /api/generate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            self.assertTrue(c.wait(lambda: c.prop("ActiveRequests") >= 1, 30), "the request did not start")
        self.assertTrue(c.wait(lambda: self.bridge.read_log().count("finished: cancelled (the client disconnected)")
                               > before, 30), self.bridge.read_log())
        self.wait_idle(c)
        self.assertEqual(self.get("/api/version")[0], 200)

    def test_units_verify(self):
        """The user units as installed (ExecStart pointed at the built
        program) pass systemd-analyze verify, and listen on loopback only."""
        analyze = shutil.which("systemd-analyze")
        if analyze is None:
            self.skipTest("systemd-analyze is not installed")
        d = os.path.join(self.workdir, "units")
        os.makedirs(d, exist_ok=True)
        with open(tb.env_path("NPULLM_BRIDGE_SERVICE")) as f:
            service = f.read()
        self.assertRegex(service, r"(?m)^ExecStart=/\S+/npullm-bridge$")
        service = re.sub(r"(?m)^ExecStart=.*$", "ExecStart=" + tb.env_path("NPULLM_BRIDGE"), service)
        with open(os.path.join(d, "npullm-bridge.service"), "w") as f:
            f.write(service)
        shutil.copy(tb.env_path("NPULLM_BRIDGE_SOCKET"), d)
        with open(tb.env_path("NPULLM_BRIDGE_SOCKET")) as f:
            listens = re.findall(r"(?m)^ListenStream=(.*)$", f.read())
        self.assertEqual(listens, ["127.0.0.1:11434", "[::1]:11434"])
        p = subprocess.run([analyze, "verify", "--man=no", "npullm-bridge.socket", "npullm-bridge.service"], cwd=d,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((p.returncode, p.stdout + p.stderr), (0, ""))

    # ---- the official npm clients ----

    def test_npm_clients(self):
        node = os.environ.get("NODE")
        if not node:
            self.skipTest("node is not installed")
        before = self.bridge.read_log().count("(the client disconnected)")
        p = subprocess.run([node, os.path.join(HERE, "clients.mjs"), self.bridge.url,
                            os.path.join(tb.env_path("NPULLM_TEST_IMAGES"), "rose.png")],
                           cwd=TESTS, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for case in ("ollama list", "ollama chat stream", "ollama generate stream", "ollama non-streaming",
                     "ollama image", "ollama format schema", "ollama chat tools", "ollama think", "ollama abort", "openai models", "openai chat stream", "openai non-streaming",
                     "openai image", "openai response_format json_schema", "openai tool_choice required",
                     "openai parallel tool calls", "openai named tool streamed", "openai tool round trip", "openai reasoning_content", "openai abort", "concurrent streams"):
            self.assertIn("ok " + case + "\n", p.stdout)
        # both aborted streams were cancelled in the daemon: Finished said
        # "cancelled" long before their 3000 tokens
        c = self.client()
        self.assertTrue(c.wait(lambda: self.bridge.read_log().count("finished: cancelled (the client disconnected)")
                               >= before + 2, 30), self.bridge.read_log())
        self.wait_idle(c)


    def test_npm_clients_reasoning_effort(self):
        """Ollama's think level and OpenAI's reasoning_effort reach the
        template (effort-clients.mjs); bad values are 400 in each API's shape."""
        node = os.environ.get("NODE")
        if not node:
            self.skipTest("node is not installed")
        p = subprocess.run([node, os.path.join(HERE, "effort-clients.mjs"), self.bridge.url],
                           cwd=TESTS, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for case in ("ollama think levels", "openai reasoning_effort"):
            self.assertIn("ok " + case + "\n", p.stdout)
        doc = self.assertStatus(400, self.post("/api/generate", {"model": "think", "prompt": "x", "think": 3}))
        self.assertIn('"think" must be true, false', doc["error"])
        doc = self.assertStatus(400, self.post("/v1/chat/completions", {
            "model": "think", "messages": [{"role": "user", "content": "x"}], "reasoning_effort": 1}), shape="openai")
        self.assertIn('"reasoning_effort" must be a string', doc["error"]["message"])

if __name__ == "__main__":
    sys.exit(run_tap("test_bridge"))
