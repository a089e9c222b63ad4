#!/usr/bin/python3
"""npullmd as a desktop citizen (docs/desktop.md): which application is
asking (a process launched in a desktop app's scope, a fake Flatpak
sandbox reached through the peer's pidfd, a plain process), ListApplications,
the polkit detail app_id with the real polkitd."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npullm_testbus as tb  # noqa: E402
import test_polkit  # noqa: E402
from npullm_testbus import GLib, Gio, ServiceTestCase, run_tap, variant_dict  # noqa: E402

CGROUP_ROOT = "/sys/fs/cgroup/unified"
HERE = os.path.abspath(__file__)


# ---- the "application": this file run with --app -----------------------------

def app_main(n_requests, max_tokens):
    """Submits n long requests, asks ListApplications, prints its answer as
    JSON, then waits for stdin to close (its requests go with it)."""
    conn = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    models = conn.call_sync(tb.BUS_NAME, tb.MANAGER_PATH, tb.MANAGER_IFACE, "ListModels", None,
                            GLib.VariantType("(aa{sv})"), Gio.DBusCallFlags.NONE, 30000, None).unpack()[0]
    ctx = [m["context_length"] for m in models if m["name"] == "tiny"][0]
    opts = variant_dict({"temperature": ("d", 0.0), "max_tokens": ("u", min(max_tokens, ctx - 32))})
    for i in range(n_requests):
        conn.call_sync(tb.BUS_NAME, tb.MANAGER_PATH, tb.MANAGER_IFACE, "Generate",
                       GLib.Variant("(sa{sv})", ("story %d" % i, opts)), None, Gio.DBusCallFlags.NONE, 30000, None)
    print(json.dumps(list_applications(conn)))
    sys.stdout.flush()
    sys.stdin.read()


def list_applications(conn=None):
    conn = conn or Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    return conn.call_sync(tb.BUS_NAME, tb.MANAGER_PATH, tb.MANAGER_IFACE, "ListApplications", None,
                          GLib.VariantType("(aa{sv})"), Gio.DBusCallFlags.NONE, 30000, None).unpack()[0]


def in_cgroup(unit):
    """preexec_fn: moves the child into a cgroup named like a unit."""
    path = os.path.join(CGROUP_ROOT, "npullm-test.slice", unit)

    def move():
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    return move, path


# A fake Flatpak sandbox: a private mount namespace whose root is a tmpfs
# holding the host's folders (bind mounts) and /.flatpak-info.
FAKE_SANDBOX = r"""
set -e
R=$1; APP=$2; shift 2
mount -t tmpfs none "$R"
for e in /*; do
  n=$(basename "$e")
  if [ -L "$e" ]; then ln -s "$(readlink "$e")" "$R/$n"
  elif [ -d "$e" ]; then mkdir "$R/$n"; mount --rbind "$e" "$R/$n"
  fi
done
printf '[Application]\nname=%s\nruntime=runtime/org.example.Platform/x86_64/1\n' "$APP" > "$R/.flatpak-info"
cd /
exec chroot "$R" "$@"
"""


def require_root(what):
    if os.getuid() != 0:
        raise unittest.SkipTest("%s needs root" % what)


class AppIdentityTest(ServiceTestCase):
    # one request runs, the others wait: ListApplications sees both kinds
    CONFIG = {"Limits": {"MaxRunning": "1", "MaxQueued": "16", "MaxPerClient": "8"}}

    def launch(self, argv_prefix=(), preexec_fn=None, n=2, max_tokens=3000):
        proc = subprocess.Popen(list(argv_prefix) + [sys.executable, HERE, "--app", str(n), str(max_tokens)],
                                env=self.bus.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, preexec_fn=preexec_fn, text=True)
        self.addCleanup(self.stop_app, proc)
        line = proc.stdout.readline()
        self.assertTrue(line, proc.stderr.read() if proc.poll() is not None else "no answer")
        return json.loads(line)

    def stop_app(self, proc):
        proc.stdin.close()
        proc.wait(30)
        proc.stdout.close()
        proc.stderr.close()
        self.wait_idle(self.client())

    def only(self, apps):
        self.assertEqual(len(apps), 1, apps)
        app = apps[0]
        self.assertEqual(app["running"] + app["queued"], 2, app)
        self.assertGreaterEqual(app["queued"], 1 if app["running"] else 2, app)
        return app

    def test_plain_process_is_its_executable(self):
        app = self.only(self.launch())
        self.assertEqual(app["source"], "exe")
        self.assertEqual(app["app_id"], os.path.basename(os.path.realpath(sys.executable)))

    def test_desktop_scope(self):
        require_root("moving a process into a cgroup")
        if not os.path.isdir(CGROUP_ROOT):
            self.skipTest("no cgroup2 hierarchy at " + CGROUP_ROOT)
        move, path = in_cgroup("app-gnome-org.example.Text\\x2dEditor-4242.scope")
        self.addCleanup(lambda: os.path.isdir(path) and os.rmdir(path))
        app = self.only(self.launch(preexec_fn=move))
        self.assertEqual((app["source"], app["app_id"]), ("systemd", "org.example.Text-Editor"))

    def test_flatpak_info_through_the_pidfd(self):
        require_root("a private mount namespace")
        if shutil.which("unshare") is None:
            self.skipTest("unshare is not installed")
        root = os.path.join(self.workdir, "sandbox-root")
        os.makedirs(root, exist_ok=True)
        app = self.only(self.launch(["unshare", "--mount", "--propagation", "private", "sh", "-c", FAKE_SANDBOX,
                                     "sandbox", root, "org.example.Sandboxed"]))
        self.assertEqual((app["source"], app["app_id"]), ("flatpak", "org.example.Sandboxed"))
        # the file is the sandbox's, not the host's
        self.assertFalse(os.path.exists("/.flatpak-info"))

    def test_only_the_callers_user(self):
        require_root("another user")
        c = self.client()
        proc = subprocess.Popen([sys.executable, HERE, "--app", "1", "3000"], env=self.bus.env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(self.stop_app, proc)
        self.assertTrue(proc.stdout.readline())
        # root's application, asked by nobody: not listed
        os.chmod(self.workdir, 0o755)
        out = subprocess.run([sys.executable, HERE, "--list"], env=self.bus.env, capture_output=True, text=True,
                             timeout=60, user="nobody", cwd="/")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout), [])
        self.assertEqual(len(c.call("ListApplications", reply="(aa{sv})")[0]), 1)


# npullmd in a private mount namespace whose /run/systemd/journal is the
# test's folder: its sd_journal_send() datagrams reach the test's socket
# (whether or not the machine runs journald).
JOURNAL_WRAPPER = r"""#!/bin/sh
exec unshare --mount --propagation private sh -c '
set -e
if [ -d /run/systemd ]; then mount -t tmpfs none /run/systemd; else mount -t tmpfs none /run; fi
mkdir -p /run/systemd/journal
mount --bind "$0" /run/systemd/journal
exec "$@"' "%s" "%s" "$@"
"""


def journal_fields(datagram):
    """The fields of one native-protocol journal entry."""
    fields = {}
    rest = datagram
    while rest:
        line, sep, after = rest.partition(b"\n")
        if b"=" in line:
            key, _, value = line.partition(b"=")
            rest = after
        else:  # KEY\n, a little-endian 64-bit length, the value, \n
            key = line
            n = int.from_bytes(after[:8], "little")
            value = after[8:8 + n]
            rest = after[8 + n + 1:]
        fields[key.decode()] = value.decode()
    return fields


class UsageJournalTest(ServiceTestCase):
    @classmethod
    def setUpClass(cls):
        require_root("a private mount namespace")
        import socket
        cls.sink_dir = tempfile.mkdtemp(prefix="npullm-journal-")
        cls.sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        cls.sink.bind(os.path.join(cls.sink_dir, "socket"))
        cls.sink.settimeout(20)
        wrapper = os.path.join(cls.sink_dir, "npullmd")
        with open(wrapper, "w") as f:
            f.write(JOURNAL_WRAPPER % (cls.sink_dir, tb.env_path("NPULLMD")))
        os.chmod(wrapper, 0o755)
        real = os.environ["NPULLMD"]
        os.environ["NPULLMD"] = wrapper
        try:
            super().setUpClass()
        finally:
            os.environ["NPULLMD"] = real

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.sink.close()
        shutil.rmtree(cls.sink_dir, ignore_errors=True)

    def next_record(self):
        while True:
            f = journal_fields(self.sink.recv(65536))
            if "NPULLM_METHOD" in f:
                return f

    def test_record_per_request(self):
        c = self.client()
        prompt = "the secret prompt"
        text, reason, stats = c.run(prompt, variant_dict({"temperature": ("d", 0.0), "max_tokens": ("u", 5)}))
        rec = self.next_record()
        want = {"NPULLM_UID": "0", "NPULLM_APP": os.path.basename(os.path.realpath(sys.executable)),
                "NPULLM_APP_SOURCE": "exe", "NPULLM_METHOD": "Generate", "NPULLM_MODEL": "tiny",
                "NPULLM_DEVICE": "cpu", "NPULLM_REASON": "length", "NPULLM_GENERATED_TOKENS": "5",
                "NPULLM_PROMPT_TOKENS": str(stats["prompt_tokens"]), "PRIORITY": "6"}
        self.assertEqual({k: rec.get(k) for k in want}, want)
        self.assertGreater(float(rec["NPULLM_TOTAL_MS"]), 0)
        self.assertIn("MESSAGE_ID", rec)
        # never any content
        for value in rec.values():
            self.assertNotIn("secret", value)
            if text.strip():
                self.assertNotIn(text.strip(), value)
        # a request its caller abandons is recorded too
        c2 = self.client()
        c2.generate("another secret", variant_dict({"max_tokens": ("u", 3000)}))
        c2.close()
        self.clients.remove(c2)
        rec = self.next_record()
        self.assertEqual(rec["NPULLM_REASON"], "cancelled")


class Mock:
    """A python-dbusmock template on the private bus."""

    def __init__(self, bus, template, name, path):
        self.name, self.path = name, path
        self.proc = subprocess.Popen([sys.executable, "-m", "dbusmock", "--system", "--template", template],
                                     env=bus.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.conn = bus.connect()
        if not tb.wait_for_name(self.conn, name):
            raise RuntimeError("%s mock did not start" % template)

    def call(self, iface, method, signature=None, args=None, reply=None):
        params = GLib.Variant(signature, args) if signature else None
        return self.conn.call_sync(self.name, self.path, iface, method, params,
                                   GLib.VariantType(reply) if reply else None, Gio.DBusCallFlags.NONE, 5000,
                                   None).unpack()

    def set(self, iface, prop, value):
        self.call("org.freedesktop.DBus.Properties", "Set", "(ssv)", (iface, prop, value))

    def stop(self):
        tb.stop_process(self.proc)
        self.conn.close_sync(None)


GREEDY = {"temperature": ("d", 0.0)}


def request_state(client, path):
    return client.call("Get", "(ss)", (tb.REQUEST_IFACE, "State"), "(v)", path=path,
                       iface="org.freedesktop.DBus.Properties")[0]


class PowerMockTestCase(ServiceTestCase):
    """A daemon with power-profiles-daemon (its legacy name) and UPower
    mocks beside it."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.ppd = Mock(cls.bus, "power_profiles_daemon", "net.hadess.PowerProfiles", "/net/hadess/PowerProfiles")
        cls.upower = Mock(cls.bus, "upower", "org.freedesktop.UPower", "/org/freedesktop/UPower")

    @classmethod
    def tearDownClass(cls):
        cls.ppd.stop()
        cls.upower.stop()
        super().tearDownClass()

    def policy_becomes(self, c, start):
        self.assertTrue(c.wait(lambda: c.prop("PowerPolicy").startswith(start), 10), c.prop("PowerPolicy"))
        return c.prop("PowerPolicy")


class PowerPolicyTest(PowerMockTestCase):
    """The profile and the battery change the threads and hold background
    requests between steps, without disturbing a running request."""
    CONFIG = {"Engine": {"Threads": "2"}, "Limits": {"MaxRunning": "1"}}

    def test_profile_and_battery(self):
        c = self.client()
        self.assertEqual(self.policy_becomes(c, "balanced, on mains"),
                         "balanced, on mains: 2 of 2 threads, background requests run, "
                         "idle models unload after 300 s")
        self.assertIn("; power: balanced, on mains", c.prop("DeviceStatus"))
        # the greedy output of a request that the profile switch meets
        # halfway is the one it has alone
        opts = variant_dict(dict(GREEDY, max_tokens=("u", 100)))
        alone, reason, _ = c.run("a story", opts)
        path = c.generate("a story", opts)
        self.assertTrue(c.wait(lambda: len(c.tokens_of(path)) > 0, 30))
        self.ppd.set("net.hadess.PowerProfiles", "ActiveProfile", GLib.Variant("s", "power-saver"))
        self.assertEqual(self.policy_becomes(c, "power-saver"),
                         "power-saver, on mains: 1 of 2 threads, background requests wait, "
                         "idle models unload after 60 s")
        self.assertTrue(c.wait(lambda: c.finished_of(path) is not None, 60))
        self.assertEqual(("".join(c.tokens_of(path)), c.finished_of(path)[0]), (alone, reason))
        # background requests wait while saving; interactive ones run
        bg = c.generate("later", variant_dict(dict(GREEDY, max_tokens=("u", 4), priority=("s", "background"))))
        text, reason, _ = c.run("now", variant_dict(dict(GREEDY, max_tokens=("u", 4))))
        self.assertEqual(reason, "length")
        c.pump(0.3)
        self.assertIsNone(c.finished_of(bg))
        self.assertEqual(request_state(c, bg), "queued")
        # performance, but on battery: still saving
        self.ppd.set("net.hadess.PowerProfiles", "ActiveProfile", GLib.Variant("s", "performance"))
        self.upower.set("org.freedesktop.UPower", "OnBattery", GLib.Variant("b", True))
        self.policy_becomes(c, "performance, on battery: 1 of 2 threads")
        self.assertIsNone(c.finished_of(bg))
        # back on mains: the background request starts
        self.upower.set("org.freedesktop.UPower", "OnBattery", GLib.Variant("b", False))
        self.policy_becomes(c, "performance, on mains: 2 of 2 threads, background requests run")
        self.assertTrue(c.wait(lambda: c.finished_of(bg) is not None, 30))
        self.assertEqual(c.finished_of(bg)[0], "length")
        # the service gone: no profile, the configured threads
        self.ppd.stop()
        self.policy_becomes(c, "no profile, on mains: 2 of 2 threads")
        self.__class__.ppd = Mock(self.bus, "power_profiles_daemon", "net.hadess.PowerProfiles",
                                  "/net/hadess/PowerProfiles")
        self.policy_becomes(c, "balanced, on mains")


class SleepTest(ServiceTestCase):
    """logind's mock: a delay inhibitor while awake, released once the
    engine stopped after its step on PrepareForSleep(true); requests in
    flight continue after PrepareForSleep(false)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.logind = Mock(cls.bus, "logind", "org.freedesktop.login1", "/org/freedesktop/login1")

    @classmethod
    def tearDownClass(cls):
        cls.logind.stop()
        super().tearDownClass()

    def inhibitors(self):
        return [i for i in self.logind.call("org.freedesktop.login1.Manager", "ListInhibitors",
                                            reply="(a(ssssuu))")[0] if i[1] == "npullm"]

    def prepare_for_sleep(self, start):
        self.logind.call("org.freedesktop.DBus.Mock", "EmitSignal", "(sssav)",
                         ("org.freedesktop.login1.Manager", "PrepareForSleep", "b", [GLib.Variant("b", start)]))

    def test_sleep_and_wake_with_a_request_in_flight(self):
        c = self.client()
        self.assertTrue(c.wait(lambda: len(self.inhibitors()) == 1, 10))
        self.assertEqual(self.inhibitors()[0][:4], ("sleep", "npullm", self.inhibitors()[0][2], "delay"))
        path = c.generate("a long story", variant_dict(dict(GREEDY, max_tokens=("u", 120))))
        self.assertTrue(c.wait(lambda: len(c.tokens_of(path)) > 0, 30))
        t0 = time.monotonic()
        self.prepare_for_sleep(True)
        self.assertTrue(c.wait(lambda: self.inhibitors() == [], 5))
        released = time.monotonic() - t0
        print("# inhibitor released %.3f s after PrepareForSleep(true)" % released)
        self.assertLess(released, 3.0)
        # asleep: no step runs
        c.pump(0.2)
        n = len(c.tokens_of(path))
        c.pump(0.5)
        self.assertEqual(len(c.tokens_of(path)), n)
        self.assertIsNone(c.finished_of(path))
        self.assertEqual(request_state(c, path), "running")
        # a request made while asleep waits too
        later = c.generate("hi", variant_dict(dict(GREEDY, max_tokens=("u", 3))))
        c.pump(0.3)
        self.assertIsNone(c.finished_of(later))
        self.prepare_for_sleep(False)
        self.assertTrue(c.wait(lambda: c.finished_of(path) is not None and c.finished_of(later) is not None, 120))
        self.assertEqual(c.finished_of(path)[0], "length")
        self.assertEqual(c.finished_of(later)[0], "length")
        self.assertTrue(c.wait(lambda: len(self.inhibitors()) == 1, 10))


class PowerConfigTest(unittest.TestCase):
    def test_bad_values_stop_the_start(self):
        npullmd = tb.env_path("NPULLMD")
        workdir = tempfile.mkdtemp(prefix="npullm-power-conf-")
        self.addCleanup(shutil.rmtree, workdir, True)
        for key, value, expected in (("SaverBackground", "sometimes", "pause or run"),
                                     ("SaverThreads", "-1", "a whole number from 0 to 1024"), ("Follow", "yes", "true or false")):
            conf = os.path.join(workdir, "npullm.conf")
            with open(conf, "w") as f:
                f.write("[Power]\n%s=%s\n" % (key, value))
            out = subprocess.run([npullmd, "--config", conf], capture_output=True, text=True, timeout=30)
            self.assertEqual(out.returncode, 2, out.stderr)
            self.assertIn("[Power] %s=%s: expected %s" % (key, value, expected), out.stderr)
        # the installed file's values are valid as they are
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS="unix:path=" + os.path.join(workdir, "no-bus"))
        out = subprocess.run([npullmd, "--config", os.path.join(tb.SOURCE_ROOT, "data", "npullm.conf")], env=env,
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertIn("cannot connect to the system bus", out.stderr)


EXAMPLE_RULE = os.path.join(tb.SOURCE_ROOT, "docs", "examples", "50-npullm-per-app.rules")


@unittest.skipUnless(os.path.isdir(CGROUP_ROOT), "no cgroup2 hierarchy")
class PolkitAppRuleTest(test_polkit.RealPolkitTest):
    """docs/examples/50-npullm-per-app.rules with the real polkitd (set up
    as test_polkit's): an unprivileged user without a session may generate
    from one application only."""
    test_real_polkitd = None  # test_polkit's own test, not repeated here

    def as_nobody_in(self, unit):
        move, path = in_cgroup(unit)

        def become_nobody():
            move()
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
        try:
            return subprocess.run([self.client_path, "--address", self.bus.address, "generate", "--temperature",
                                   "0", "-n", "4", "hi"], env=self.bus.env, capture_output=True, text=True,
                                  timeout=60, preexec_fn=become_nobody, cwd="/")
        finally:
            os.rmdir(path)

    def test_rule_per_application(self):
        os.chmod(self.workdir, 0o755)
        with open(EXAMPLE_RULE) as f:
            rule = f.read()
        # the example names org.gnome.TextEditor; the test's user is nobody
        with open(self.rule, "w") as f:
            f.write(rule.replace('subject.active && subject.local', 'subject.user == "nobody"'))
        allowed = "app-gnome-org.gnome.TextEditor-7.scope"
        deadline = time.monotonic() + 10
        while True:
            out = self.as_nobody_in(allowed)
            if out.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.3)  # polkitd reloads its rules on inotify
        self.assertEqual(out.returncode, 0, out.stderr)
        out = self.as_nobody_in("app-gnome-org.example.Other-7.scope")
        self.assertEqual(out.returncode, 3, out.stderr)
        self.assertIn("not authorized", out.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--app":
        app_main(int(sys.argv[2]), int(sys.argv[3]))
        sys.exit(0)
    if len(sys.argv) > 1 and sys.argv[1] == "--list":
        print(json.dumps(list_applications()))
        sys.exit(0)
    sys.exit(run_tap("test_desktop"))
