#!/usr/bin/python3
"""A short soak (issue #11): clients making Generate, Chat and
DescribeImage calls, cancelling, and disconnecting in the middle of
streams and image reads, for NPULLM_SOAK_SECONDS (120 by default; longer
by setting it). Throughout, a property read must answer within
NPULLM_SOAK_LATENCY_MS (100 by default); afterwards the daemon must be
back to its baseline (descriptors, threads, RSS) and still serving.

Three Unix users share the daemon (issue #34): this test's user, `nobody`
and `daemon` (or `bin`, `sys`), each running some of the kinds; the third
also runs an npullm-bridge whose HTTP clients (Ollama and OpenAI
endpoints) go alongside the D-Bus ones. Only the limits' Busy (HTTP 429)
may answer; the bridge too must end with its descriptors and threads back
to where they were. Without root everything runs as this test's user.

The clients are processes running this file with --worker KIND."""

import http.client
import json
import os
import pwd
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npullm_testbus as tb  # noqa: E402
from hardening import GREEDY, DaemonStats, VisionDaemonCase, describe, describe_async, variant_dict  # noqa: E402
from npullm_testbus import GLib, run_tap  # noqa: E402

# each kind of client and the user (index into SoakTest.users) running it
KINDS = [("generate", 0), ("chat", 1), ("describe", 2), ("cancel", 0), ("disconnect", 1), ("stalled-image", 2),
         ("http", 2)]
# nobody, and a Debian base system account (the bus refuses a uid without
# an account: it cannot look up its groups)
OTHER_USERS = ("nobody", ("daemon", "bin", "sys"))


def other_uids():
    uids = []
    for names in OTHER_USERS:
        for name in (names,) if isinstance(names, str) else names:
            try:
                uids.append(pwd.getpwnam(name).pw_uid)
                break
            except KeyError:
                continue
    return uids if len(uids) == len(OTHER_USERS) else None


# Errors a worker may meet under load: the limits answering.
EXPECTED = {"org.npullm.Error.Busy", "HTTP 429"}


def http_request(url, i):
    """One request to the bridge at url, cycling through a streamed Ollama
    generate, an OpenAI chat completion and the model list: None when it
    went through, else what went wrong."""
    host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
    n = 3 + i % 12
    if i % 3 == 0:
        method, path, body = "POST", "/api/generate", {"model": "vision", "prompt": "Count to %d" % i,
                                                       "options": {"temperature": 0, "num_predict": n}}
    elif i % 3 == 1:
        method, path, body = "POST", "/v1/chat/completions", {
            "model": "vision", "messages": [{"role": "user", "content": "Hi %d" % i}], "temperature": 0,
            "max_tokens": n}
    else:
        method, path, body = "GET", "/api/tags", None
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Content-Type": "application/json"} if body is not None else {})
        reply = conn.getresponse()
        text = reply.read().decode()
    except (OSError, http.client.HTTPException) as e:
        return "%s: %s" % (path, type(e).__name__)
    finally:
        conn.close()
    if reply.status != 200:
        return "HTTP %d" % reply.status
    last = json.loads(text.strip().splitlines()[-1])
    if path == "/api/generate" and not last.get("done"):
        return "%s: the stream ended early" % path
    if path == "/v1/chat/completions" and last["choices"][0]["finish_reason"] != "length":
        return "%s: finish_reason %s" % (path, last["choices"][0]["finish_reason"])
    return None


def worker(kind, seconds, address, image):
    """One client process: repeats its kind of call until time is up;
    prints {"ops": n, "errors": {name: count}}. For "http", address is
    the bridge's URL."""
    if kind == "http":
        ops, errors = 0, {}
        end = time.monotonic() + seconds
        i = 0
        while time.monotonic() < end:
            i += 1
            error = http_request(address, i)
            if error is None:
                ops += 1
            else:
                errors[error] = errors.get(error, 0) + 1
                time.sleep(0.02)
        print(json.dumps({"ops": ops, "errors": errors}))
        return
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
    BRIDGE_THREAD_SLACK = 4

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # the other users' clients must reach the bus socket
        others = other_uids() if os.getuid() == 0 else None
        cls.users = [None] + others if others else [None] * 3
        os.chmod(cls.workdir, 0o755)

    def as_user(self, user):
        """Popen arguments running a process as users[user]."""
        uid = self.users[user]
        return {} if uid is None else {"user": uid, "group": uid, "extra_groups": [], "cwd": "/"}

    def start_bridge(self, user):
        """npullm-bridge as users[user] on a free loopback port: (process,
        its URL, its log file)."""
        log = open(os.path.join(self.workdir, "soak-bridge.log"), "w")
        env = dict(self.bus.env, XDG_CONFIG_HOME=os.path.join(self.workdir, "bridge-config"))
        proc = subprocess.Popen([tb.env_path("NPULLM_BRIDGE"), "--address", self.bus.address, "--listen",
                                 "127.0.0.1:0"], env=env, stdout=subprocess.PIPE, stderr=log, text=True,
                                **self.as_user(user))
        line = proc.stdout.readline()
        if not line.startswith("npullm-bridge: listening on "):
            rc = tb.stop_process(proc)
            log.close()
            with open(log.name) as f:
                self.fail("npullm-bridge did not start (exit status %s): %r\n%s" % (rc, line, f.read()))
        return proc, line.split()[-1].rstrip("/"), log

    def test_soak(self):
        seconds = float(os.environ.get("NPULLM_SOAK_SECONDS", "120"))
        latency_limit = float(os.environ.get("NPULLM_SOAK_LATENCY_MS", "100"))
        image = self.image("rose.png")
        if not os.environ.get("NPULLM_BRIDGE"):
            print("# no npullm-bridge built (libsoup missing): D-Bus clients only")
            self.soak(seconds, latency_limit, image, None, None)
            return
        bridge, url, bridge_log = self.start_bridge(2)
        bridge_stats = DaemonStats(bridge.pid)
        try:
            # warm up, as the bridge's user (it answers no other)
            warm = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "http", "1", url, image],
                                  stdout=subprocess.PIPE, env=self.bus.env, timeout=120, **self.as_user(2))
            self.assertEqual(json.loads(warm.stdout)["errors"], {}, "the bridge does not answer")
            bridge_base = bridge_stats.snapshot()
            self.soak(seconds, latency_limit, image, url, bridge_stats)
            self.assert_bridge_back(bridge_stats, bridge_base)
        finally:
            rc = tb.stop_process(bridge)
            bridge.stdout.close()
            bridge_log.close()
        with open(bridge_log.name) as f:
            log = f.read()
        self.assertEqual(rc, 0, log)
        for bad in ("CRITICAL", "WARNING", "runtime error", "Sanitizer"):
            self.assertNotIn(bad, log)

    def soak(self, seconds, latency_limit, image, url, bridge_stats):
        kinds = [(kind, user) for kind, user in KINDS if url is not None or kind != "http"]
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", kind, str(seconds),
                                   url if kind == "http" else self.bus.address, image],
                                  stdout=subprocess.PIPE, env=self.bus.env, **self.as_user(user))
                 for kind, user in kinds]
        c = self.client()
        worst = 0.0
        peak = dict(self.baseline)
        bridge_peak = bridge_stats.snapshot() if bridge_stats else {}
        try:
            while any(p.poll() is None for p in procs):
                t0 = time.monotonic()
                c.prop("ActiveRequests")
                c.prop("LoadedModels")
                worst = max(worst, (time.monotonic() - t0) * 1000 / 2)
                now = self.stats.snapshot()
                peak = {k: max(peak[k], now[k]) for k in peak}
                if bridge_stats:
                    now = bridge_stats.snapshot()
                    bridge_peak = {k: max(bridge_peak[k], now[k]) for k in bridge_peak}
                time.sleep(0.25)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        results = {}
        for (kind, user), p in zip(kinds, procs):
            out, _ = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, kind)
            r = json.loads(out)
            results["%s/%s" % (kind, self.users[user] if self.users[user] is not None else os.getuid())] = r
        print("# soak %.0f s, uids %s: %s; %d requests; worst property read %.1f ms; daemon peak %s, baseline %s; "
              "bridge peak %s" % (seconds, sorted({u if u is not None else os.getuid() for u in self.users}), results,
                                  sum(r["ops"] for r in results.values()), worst, peak, self.baseline, bridge_peak))
        for kind, r in results.items():
            self.assertGreater(r["ops"], 0, "%s made no progress: %s" % (kind, r))
            unexpected = set(r["errors"]) - EXPECTED
            self.assertFalse(unexpected, "%s: %s" % (kind, r["errors"]))
        self.assertLess(worst, latency_limit, "a property read took %.1f ms" % worst)
        self.wait_idle(c)
        self.assert_still_serving()

    def assert_bridge_back(self, stats, base, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            now = stats.snapshot()
            ok = now["fds"] <= base["fds"] and now["threads"] <= base["threads"] + self.BRIDGE_THREAD_SLACK
            if ok or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        print("# bridge: %s, baseline %s" % (now, base))
        self.assertTrue(ok, "the bridge is not back to its baseline: %s, baseline %s" % (now, base))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5])
        sys.exit(0)
    sys.exit(run_tap("test_soak"))
