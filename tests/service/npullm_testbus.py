#!/usr/bin/python3
"""Private system-like D-Bus + npullmd (+ polkit) for tests and demos.

The bus runs a dbus-daemon with a configuration modelled on Debian's
system.conf (deny by default, EXTERNAL auth) that <include>s the project's
own bus policy, dbus/org.npullm.conf.in, with @NPULLM_USER@ replaced by the
user running the tests: that is the only change, so the policy under test
is the one that gets installed. npullmd then runs as that user, which the
policy allows to own org.npullm, exactly as the npullm system user would.

polkit is either python3-dbusmock's polkitd template (any user) or the real
/usr/lib/polkit-1/polkitd (root only: it reads the installed actions).

Command line (for demos and the README):
    npullm_testbus.py --npullmd BUILD/service/npullmd --model-dir DIR \
        [--client BUILD/clients/npullm-client] [--run-client ARGS...]
starts the private bus, a polkit mock that allows every action, and
npullmd; then either runs npullm-client ARGS against it, or (without
--run-client) prints the bus address and waits for Ctrl-C.
"""

import argparse
import os
import pwd
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import unittest

import gi

gi.require_version("Gio", "2.0")
gi.require_version("GLib", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.dirname(os.path.dirname(HERE))
POLICY_TEMPLATE = os.path.join(SOURCE_ROOT, "dbus", "org.npullm.conf.in")
POLKIT_BUS_POLICY = "/usr/share/dbus-1/system.d/org.freedesktop.PolicyKit1.conf"
REAL_POLKITD = "/usr/lib/polkit-1/polkitd"

BUS_NAME = "org.npullm"
MANAGER_PATH = "/org/npullm"
MANAGER_IFACE = "org.npullm.Manager"
REQUEST_IFACE = "org.npullm.Request"


def current_user():
    return pwd.getpwuid(os.getuid()).pw_name


BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
    <deny send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus" send_member="UpdateActivationEnvironment"/>
  </policy>
  <!-- test scaffolding: the polkit, power and logind stand-ins
       (python-dbusmock) run as the test user -->
  <policy user="{user}">
    <allow own="org.freedesktop.PolicyKit1"/>
    <allow send_destination="org.freedesktop.PolicyKit1"/>
    <allow own="org.freedesktop.UPower"/>
    <allow own="org.freedesktop.UPower.PowerProfiles"/>
    <allow own="net.hadess.PowerProfiles"/>
    <allow own="org.freedesktop.login1"/>
    <allow send_destination="org.freedesktop.UPower"/>
    <allow send_destination="org.freedesktop.UPower.PowerProfiles"/>
    <allow send_destination="net.hadess.PowerProfiles"/>
    <allow send_destination="org.freedesktop.login1"/>
  </policy>
  <policy context="default">
    <allow send_destination="org.freedesktop.PolicyKit1"/>
  </policy>
  {polkit_include}
  <include>{npullm_policy}</include>
</busconfig>
"""


class PrivateBus:
    """A dbus-daemon with a system-bus-like policy in a temp directory."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.socket = os.path.join(workdir, "system_bus_socket")
        self.address = "unix:path=" + self.socket
        policy = open(POLICY_TEMPLATE).read().replace("@NPULLM_USER@", current_user())
        self.policy_path = os.path.join(workdir, "org.npullm.conf")
        with open(self.policy_path, "w") as f:
            f.write(policy)
        polkit_include = ""
        if os.path.exists(POLKIT_BUS_POLICY):
            polkit_include = "<include>%s</include>" % POLKIT_BUS_POLICY
        self.config_path = os.path.join(workdir, "bus.conf")
        with open(self.config_path, "w") as f:
            f.write(BUS_CONFIG.format(socket=self.socket, user=current_user(),
                                      polkit_include=polkit_include,
                                      npullm_policy=self.policy_path))
        # stderr to a file: dbus-daemon complains that it cannot raise its
        # fd limit in containers.
        self.log = open(os.path.join(workdir, "dbus-daemon.log"), "w")
        # The address is printed once the socket listens (the socket file
        # alone appears at bind(), before connections are accepted).
        self.proc = subprocess.Popen(
            ["dbus-daemon", "--config-file=" + self.config_path, "--nofork", "--nopidfile", "--print-address"],
            stdout=subprocess.PIPE, stderr=self.log)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else b""
        self.proc.stdout.close()
        if not line.strip():
            stop_process(self.proc)
            raise RuntimeError("dbus-daemon did not start (see %s)" % self.log.name)
        self.env = dict(os.environ)
        self.env["DBUS_SYSTEM_BUS_ADDRESS"] = self.address
        self.env.pop("DBUS_SESSION_BUS_ADDRESS", None)

    def connect(self):
        return Gio.DBusConnection.new_for_address_sync(
            self.address,
            Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
            None, None)

    def stop(self):
        stop_process(self.proc)
        self.log.close()


def stop_process(proc, sig=signal.SIGTERM, timeout=10):
    if proc is None or proc.poll() is not None:
        return proc.returncode if proc else None
    proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def wait_for_name(conn, name, timeout=10, present=True):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        has = conn.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                             "NameHasOwner", GLib.Variant("(s)", (name,)), GLib.VariantType("(b)"),
                             Gio.DBusCallFlags.NONE, -1, None).unpack()[0]
        if has == present:
            return True
        time.sleep(0.02)
    return False


class MockPolkit:
    """python3-dbusmock's polkitd template on the private bus."""

    def __init__(self, bus, allow_all=True):
        self.bus = bus
        self.proc = subprocess.Popen([sys.executable, "-m", "dbusmock", "--system", "--template", "polkitd"],
                                     env=bus.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.conn = bus.connect()
        if not wait_for_name(self.conn, "org.freedesktop.PolicyKit1"):
            raise RuntimeError("polkitd mock did not start")
        if allow_all:
            self.mock("AllowUnknown", "(b)", (True,))

    def mock(self, method, signature=None, args=None):
        params = GLib.Variant(signature, args) if signature else None
        return self.conn.call_sync("org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
                                   "org.freedesktop.DBus.Mock", method, params, None,
                                   Gio.DBusCallFlags.NONE, 5000, None)

    def allow(self, actions):
        self.mock("AllowUnknown", "(b)", (False,))
        self.mock("SetAllowed", "(as)", (list(actions),))

    def stop(self):
        stop_process(self.proc)
        wait_for_name(self.conn, "org.freedesktop.PolicyKit1", present=False)


class RealPolkit:
    """The real polkitd on the private bus (root only)."""

    def __init__(self, bus):
        self.bus = bus
        # polkitd switches to its own user: let it reach the bus socket
        os.chmod(bus.workdir, 0o755)
        self.proc = subprocess.Popen([REAL_POLKITD, "--no-debug"], env=bus.env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        conn = bus.connect()
        if not wait_for_name(conn, "org.freedesktop.PolicyKit1"):
            err = b""
            if self.proc.poll() is not None:
                err = self.proc.stderr.read()
            raise RuntimeError("polkitd did not start: " + err.decode(errors="replace"))

    def stop(self):
        stop_process(self.proc)


DEFAULT_CONFIG = {
    "Models": {"IdleTimeout": "300"},
    "Engine": {"Threads": "2", "PrefillChunk": "32"},
    # KvCacheMiB: the KV caches kept for reuse stay well inside the RSS
    # slack of the tests that check the daemon returns to its baseline
    "Limits": {"MaxRunning": "8", "MaxQueued": "16", "MaxPerClient": "8", "KvCacheMiB": "16"},
    "Authorization": {"Timeout": "10"},
}


class Npullmd:
    """npullmd as the current user on the private bus."""

    def __init__(self, bus, npullmd, model_dirs, config=None, args=(), workdir=None, env=None):
        self.bus = bus
        cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
        for group, values in (config or {}).items():
            cfg.setdefault(group, {}).update(values)
        self.config_path = os.path.join(workdir or bus.workdir, "npullm-%d.conf" % id(self))
        with open(self.config_path, "w") as f:
            for group, values in cfg.items():
                f.write("[%s]\n" % group)
                for k, v in values.items():
                    f.write("%s=%s\n" % (k, v))
        cmd = [npullmd, "--config", self.config_path]
        for d in model_dirs:
            cmd += ["--model-dir", d]
        cmd += list(args)
        self.log_path = os.path.join(workdir or bus.workdir, "npullmd-%d.log" % id(self))
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, env=dict(bus.env, **(env or {})), stdout=self.log, stderr=subprocess.STDOUT)
        self.conn = bus.connect()
        if not wait_for_name(self.conn, BUS_NAME):
            self.stop()
            raise RuntimeError("npullmd did not start:\n" + self.read_log())

    def read_log(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        rc = stop_process(self.proc)
        self.log.close()
        return rc


# ---- a small synchronous client on Gio -------------------------------------

class Client:
    """One bus connection making requests and collecting its signals."""

    def __init__(self, bus):
        self.conn = bus.connect()
        self.ctx = GLib.MainContext.default()
        self.signals = []  # (path, interface, member, params)
        self.sub = self.conn.signal_subscribe(None, None, None, None, None, Gio.DBusSignalFlags.NONE,
                                              self._on_signal)

    def _on_signal(self, conn, sender, path, iface, member, params):
        self.signals.append((path, iface, member, params.unpack()))

    @property
    def unique_name(self):
        return self.conn.get_unique_name()

    def pump(self, seconds=0.0):
        deadline = time.monotonic() + seconds
        while True:
            while self.ctx.iteration(False):
                pass
            if time.monotonic() >= deadline:
                return
            time.sleep(0.005)

    def call(self, method, signature=None, args=None, reply=None, timeout=30000, path=MANAGER_PATH,
             iface=MANAGER_IFACE, fd_list=None):
        params = GLib.Variant(signature, args) if signature else None
        if fd_list is not None:
            ret, _ = self.conn.call_with_unix_fd_list_sync(BUS_NAME, path, iface, method, params,
                                                           GLib.VariantType(reply) if reply else None,
                                                           Gio.DBusCallFlags.NONE, timeout, fd_list, None)
        else:
            ret = self.conn.call_sync(BUS_NAME, path, iface, method, params,
                                      GLib.VariantType(reply) if reply else None,
                                      Gio.DBusCallFlags.NONE, timeout, None)
        return ret.unpack() if ret is not None else None

    def call_async(self, method, signature, args, timeout=60000):
        """Starts a call; returns a dict filled with 'result' or 'error'."""
        box = {}

        def done(conn, res):
            try:
                box["result"] = conn.call_finish(res).unpack()
            except GLib.Error as e:
                box["error"] = e
        self.conn.call(BUS_NAME, MANAGER_PATH, MANAGER_IFACE, method, GLib.Variant(signature, args), None,
                       Gio.DBusCallFlags.NONE, timeout, None, done)
        return box

    def wait(self, predicate, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump()
            if predicate():
                return True
            time.sleep(0.005)
        self.pump()
        return predicate()

    def prop(self, name):
        return self.call("Get", "(ss)", (MANAGER_IFACE, name), "(v)",
                         iface="org.freedesktop.DBus.Properties")[0]

    def generate(self, prompt, options=None, method="Generate"):
        opts = dict(options or {})
        if method == "Chat":
            return self.call("Chat", "(aa{sv}a{sv})", (prompt, opts), "(o)")[0]
        return self.call(method, "(sa{sv})", (prompt, opts), "(o)")[0]

    def tokens_of(self, path):
        return [p[0] for (sp, i, m, p) in self.signals if sp == path and m == "Token"]

    def finished_of(self, path):
        for (sp, i, m, p) in self.signals:
            if sp == path and m == "Finished":
                return p
        return None

    def run(self, prompt, options=None, method="Generate", timeout=60):
        """Generates and waits; returns (text, reason, stats)."""
        path = self.generate(prompt, options, method)
        if not self.wait(lambda: self.finished_of(path) is not None, timeout):
            raise AssertionError("request %s did not finish" % path)
        reason, stats = self.finished_of(path)
        return "".join(self.tokens_of(path)), reason, stats

    def close(self):
        self.conn.signal_unsubscribe(self.sub)
        self.conn.close_sync(None)


def variant_dict(d):
    """{'max_tokens': ('u', 8)} -> a{sv} content for GLib.Variant."""
    return {k: GLib.Variant(t, v) for k, (t, v) in d.items()}


def dbus_error_name(e):
    return Gio.DBusError.get_remote_error(e) if Gio.DBusError.is_remote_error(e) else None


# ---- test fixtures --------------------------------------------------------------

def env_path(name):
    value = os.environ.get(name)
    if not value:
        raise unittest.SkipTest("%s is not set (run through meson test)" % name)
    return value


def place_model(src, dst):
    """A model file in a test's model directory: a hard link (the catalog
    follows no symlink out of its directories), a copy across file systems."""
    try:
        os.link(os.path.realpath(src), dst)
    except OSError:
        shutil.copyfile(src, dst)


def qwen_model_dir(workdir):
    """models/qwen.gguf: the model NPULLM_TEST_QWEN_MODEL names."""
    d = os.path.join(workdir, "models")
    os.makedirs(d)
    place_model(env_path("NPULLM_TEST_QWEN_MODEL"), os.path.join(d, "qwen.gguf"))
    return d


def make_model_dir(workdir):
    """tiny.gguf and tiny2.gguf (the test model), tiny.mmproj.gguf (named
    as a projector, so not a model, but not one, so not paired) and
    broken.gguf (not GGUF: listed as not supported)."""
    model = env_path("NPULLM_TEST_MODEL")
    d = os.path.join(workdir, "models")
    os.makedirs(d, exist_ok=True)
    place_model(model, os.path.join(d, "tiny.gguf"))
    place_model(model, os.path.join(d, "tiny2.gguf"))
    place_model(model, os.path.join(d, "tiny.mmproj.gguf"))
    with open(os.path.join(d, "broken.gguf"), "wb") as f:
        f.write(b"not a gguf file at all")
    return d


class ServiceTestCase(unittest.TestCase):
    """Private bus + polkit mock (allowing everything) + npullmd, shared
    by the tests of a class. Subclasses may set CONFIG and ARGS, and
    CACHE_DIRECTORY: the daemon then gets $CACHE_DIRECTORY (systemd's
    CacheDirectory=), a fresh cls.cache_dir followed by the entries
    CACHE_DIRECTORY names (a tuple; () for none)."""

    CONFIG = {}
    ARGS = ("--default-model", "tiny")
    POLKIT = "mock"
    CACHE_DIRECTORY = None

    @classmethod
    def make_model_dirs(cls, workdir):
        """The daemon's --model-dir roots: by default the one folder of
        make_model_dir; subclasses lay out their own."""
        return [cls.make_model_dir(workdir)]

    @classmethod
    def setUpClass(cls):
        cls.npullmd_path = env_path("NPULLMD")
        cls.client_path = env_path("NPULLM_CLIENT")
        cls.workdir = tempfile.mkdtemp(prefix="npullm-test-")
        cls.bus = cls.polkit = cls.daemon = None
        try:
            dirs = cls.make_model_dirs(cls.workdir)
            cls.model_dir = dirs[0]
            cls.bus = PrivateBus(cls.workdir)
            cls.polkit = MockPolkit(cls.bus) if cls.POLKIT == "mock" else None
            env = {}
            if cls.CACHE_DIRECTORY is not None:
                cls.cache_dir = os.path.join(cls.workdir, "cache")
                os.makedirs(cls.cache_dir)
                env["CACHE_DIRECTORY"] = ":".join((cls.cache_dir,) + tuple(cls.CACHE_DIRECTORY))
            cls.daemon = Npullmd(cls.bus, cls.npullmd_path, dirs, cls.CONFIG, cls.ARGS, env=env)
        except BaseException:
            # tearDownClass does not run when setUpClass fails
            for part in (cls.polkit, cls.bus):
                if part is not None:
                    part.stop()
            shutil.rmtree(cls.workdir, ignore_errors=True)
            raise

    @staticmethod
    def make_model_dir(workdir):
        """The models served (subclasses may serve others)."""
        return make_model_dir(workdir)

    @classmethod
    def tearDownClass(cls):
        rc = cls.daemon.stop()
        if cls.polkit:
            cls.polkit.stop()
        cls.bus.stop()
        with open(cls.daemon.log_path) as f:
            log = f.read()
        shutil.rmtree(cls.workdir, ignore_errors=True)
        if rc not in (0, None) or "CRITICAL" in log or "runtime error" in log or "Sanitizer" in log:
            print("# npullmd exited with %s; its log:" % rc)
            for line in log.splitlines():
                print("#   " + line)
            raise AssertionError("npullmd did not stop cleanly")

    def setUp(self):
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()

    def client(self):
        c = Client(self.bus)
        self.clients.append(c)
        return c

    def wait_idle(self, client, timeout=15):
        self.assertTrue(client.wait(lambda: client.prop("ActiveRequests") == 0 and
                                    client.prop("QueuedRequests") == 0, timeout),
                        "requests still active")

    def run_client(self, *args, input=None, timeout=60):
        return subprocess.run([self.client_path, "--address", self.bus.address] + list(args), input=input,
                              capture_output=True, timeout=timeout, env=self.bus.env)

    def assertDBusError(self, name, func, *args, **kwargs):
        with self.assertRaises(GLib.Error) as cm:
            func(*args, **kwargs)
        self.assertEqual(dbus_error_name(cm.exception), name, cm.exception.message)
        return cm.exception.message


# ---- TAP runner ----------------------------------------------------------------

class TapResult(unittest.TestResult):
    """TAP lines with each test's wall time, so that a test that ran into
    one of its timeouts shows which step took the time."""

    def __init__(self):
        super().__init__()
        self.n = 0
        self.started = None

    def startTest(self, test):
        super().startTest(test)
        self.started = time.monotonic()

    def _line(self, ok, test, extra=""):
        self.n += 1
        # (a class's setUpClass failing is reported without a startTest)
        took = "" if self.started is None else " (%.1f s)" % (time.monotonic() - self.started)
        self.started = None
        print("%s %d - %s%s%s" % ("ok" if ok else "not ok", self.n, test.id().split(".", 1)[-1], took, extra))
        sys.stdout.flush()

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line(True, test)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line(True, test, " # SKIP " + reason)

    def _fail(self, test, err):
        self._line(False, test)
        for line in "".join(traceback.format_exception(*err)).splitlines():
            print("# " + line)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._fail(test, err)

    def addError(self, test, err):
        super().addError(test, err)
        self._fail(test, err)


def run_tap(module_name):
    suite = unittest.defaultTestLoader.loadTestsFromName(module_name)
    print("1..%d" % suite.countTestCases())
    sys.stdout.flush()
    result = TapResult()
    suite.run(result)
    return 0 if result.wasSuccessful() else 1


# ---- command line ------------------------------------------------------------------

def _interrupt(signum, frame):
    """`kill` stops the command like Ctrl-C does: npullmd, polkit and the
    bus go with it"""
    raise KeyboardInterrupt()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--npullmd", required=True)
    p.add_argument("--model-dir", action="append", required=True)
    p.add_argument("--client", help="npullm-client to run with --run-client")
    p.add_argument("--default-model")
    p.add_argument("--run-client", nargs=argparse.REMAINDER,
                   help="run npullm-client with these arguments against the private bus")
    a = p.parse_args()
    signal.signal(signal.SIGTERM, _interrupt)
    workdir = tempfile.mkdtemp(prefix="npullm-bus-")
    bus = polkit = daemon = None
    rc = 0
    try:
        bus = PrivateBus(workdir)
        polkit = MockPolkit(bus, allow_all=True)
        args = ["--default-model", a.default_model] if a.default_model else []
        daemon = Npullmd(bus, a.npullmd, a.model_dir, args=args)
        if a.run_client is not None:
            client = a.client or os.path.join(os.path.dirname(os.path.dirname(a.npullmd)), "clients",
                                              "npullm-client")
            try:
                rc = subprocess.call([client, "--address", bus.address] + a.run_client, env=bus.env)
            except KeyboardInterrupt:
                rc = 130
        else:
            print("private system bus: DBUS_SYSTEM_BUS_ADDRESS=%s" % bus.address)
            print("(polkit is a mock allowing everything; Ctrl-C stops)")
            sys.stdout.flush()
            try:
                while daemon.proc.poll() is None:
                    time.sleep(0.5)
            except KeyboardInterrupt:
                pass
    finally:
        if daemon:
            daemon.stop()
        if polkit:
            polkit.stop()
        if bus:
            bus.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
