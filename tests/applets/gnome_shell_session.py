"""A real GNOME Shell 43, headless, for the applet test: a private session
bus, a fresh HOME and XDG_RUNTIME_DIR, the given system bus (npullmd's
private bus), the extensions copied into HOME and enabled with gsettings
before start, and org.gnome.Shell.Eval to drive it (unlocked by the
test-only helper extension). A Shell that does not come up raises with
its log, so the test fails with the reason."""

import os
import shutil
import signal
import subprocess
import time

import gi

gi.require_version("Gio", "2.0")
gi.require_version("GLib", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
HELPER_UUID = "npullm-test-helper@npullm.org"


class ShellError(RuntimeError):
    pass


class GnomeShell:
    def __init__(self, workdir, system_bus_address, extensions, library_dir, size="1280x800", nested=False):
        """extensions: {uuid: source folder}; library_dir: libnpullm-1 and
        its typelib (the build folder). nested: a window in the desktop
        this runs in (for trying it by hand; no test helper, no Eval)
        instead of headless."""
        self.workdir = workdir
        self.proc = None
        if not shutil.which("gnome-shell"):
            raise ShellError("gnome-shell is not installed (tools/npullm-dev deps installs it)")
        self.home = os.path.join(workdir, "home")
        self.runtime = os.path.join(workdir, "runtime")
        os.makedirs(self.home)
        os.makedirs(self.runtime, mode=0o700)
        os.chmod(self.runtime, 0o700)
        ext_root = os.path.join(self.home, ".local", "share", "gnome-shell", "extensions")
        if not nested:
            extensions = dict(extensions, **{HELPER_UUID: os.path.join(HERE, HELPER_UUID)})
        parent_display = {}
        if nested:
            # the desktop's display, found again from the fresh XDG_RUNTIME_DIR
            wayland = os.environ.get("WAYLAND_DISPLAY", "")
            if wayland and not os.path.isabs(wayland):
                wayland = os.path.join(os.environ.get("XDG_RUNTIME_DIR", ""), wayland)
            # X clients look for ~/.Xauthority when XAUTHORITY is unset; HOME changes here
            xauth = os.environ.get("XAUTHORITY") or os.path.expanduser("~/.Xauthority")
            parent_display = {k: v for k, v in (("WAYLAND_DISPLAY", wayland),
                                                ("DISPLAY", os.environ.get("DISPLAY", "")),
                                                ("XAUTHORITY", xauth if os.path.exists(xauth) else "")) if v}
            if not parent_display:
                raise ShellError("a nested GNOME Shell needs a desktop session (WAYLAND_DISPLAY or DISPLAY)")
        for uuid, src in extensions.items():
            dst = os.path.join(ext_root, uuid)
            shutil.copytree(src, dst)
            if os.path.isdir(os.path.join(dst, "schemas")):
                subprocess.run(["glib-compile-schemas", "--strict", os.path.join(dst, "schemas")], check=True)

        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("XDG_", "DBUS_", "WAYLAND_", "GNOME_", "LD_PRELOAD", "ASAN_"))
               and k not in ("DISPLAY", "SESSION_MANAGER")}
        env.update(HOME=self.home, XDG_RUNTIME_DIR=self.runtime, DBUS_SYSTEM_BUS_ADDRESS=system_bus_address,
                   XDG_CONFIG_HOME=os.path.join(self.home, ".config"),
                   XDG_DATA_HOME=os.path.join(self.home, ".local", "share"),
                   XDG_CACHE_HOME=os.path.join(self.home, ".cache"),
                   GI_TYPELIB_PATH=library_dir, LD_LIBRARY_PATH=library_dir,
                   LANG="C.UTF-8", NO_AT_BRIDGE="1", GSETTINGS_BACKEND="dconf")
        self.log_path = os.path.join(workdir, "gnome-shell.log")
        self.log = open(self.log_path, "w")
        self.session_bus = subprocess.Popen(
            ["dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1",
             "--address=unix:path=" + os.path.join(self.runtime, "bus")],
            # programs it activates (the prefs window) are clients of the Shell
            env=dict(env, WAYLAND_DISPLAY="wayland-0", GDK_BACKEND="wayland"),
            stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True)
        address = self.session_bus.stdout.readline().strip()
        if not address:
            raise ShellError("the session dbus-daemon did not start:\n" + self.read_log())
        env["DBUS_SESSION_BUS_ADDRESS"] = address
        self.env = env

        enabled = "[%s]" % ", ".join("'%s'" % u for u in extensions)
        for key, value in (("enabled-extensions", enabled), ("welcome-dialog-last-shown-version", "'999'")):
            subprocess.run(["gsettings", "set", "org.gnome.shell", key, value], env=env, check=True,
                           stdout=self.log, stderr=self.log, timeout=30)

        if nested:
            cmd = ["gnome-shell", "--nested", "--wayland"]
        else:
            cmd = ["gnome-shell", "--headless", "--virtual-monitor", size, "--wayland", "--no-x11"]
        self.proc = subprocess.Popen(cmd, env=dict(env, **parent_display), stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.conn = Gio.DBusConnection.new_for_address_sync(
            address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
            None, None)
        if nested:
            return
        try:
            self.wait_eval("true", 60)
            # its startup animation ends by showing the overview: wait for it
            self.wait_eval("!Main.layoutManager._startingUp", 60)
        except BaseException:
            self.stop()
            raise

    def read_log(self):
        self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def _call(self, iface, method, args, timeout_ms=20000):
        reply = self.conn.call_sync("org.gnome.Shell", "/org/gnome/Shell" if iface == "org.gnome.Shell"
                                    else "/org/gnome/Shell/Screenshot", iface, method, args, None,
                                    Gio.DBusCallFlags.NONE, timeout_ms, None)
        return reply.unpack()

    def eval(self, code):
        """Runs JavaScript in the Shell; returns its result as a string
        (what JSON.stringify gives for it). Raises on a JS exception."""
        if self.proc.poll() is not None:
            raise ShellError("gnome-shell exited with %s:\n%s" % (self.proc.returncode, self.read_log()))
        ok, result = self._call("org.gnome.Shell", "Eval", GLib.Variant("(s)", (code,)))
        if not ok:
            raise ShellError("Eval failed: %s\ncode: %s" % (result, code))
        return result

    def wait_eval(self, code, timeout=60, want="true"):
        """Polls code until it evaluates to `want`."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            if self.proc.poll() is not None:
                raise ShellError("gnome-shell exited with %s:\n%s" % (self.proc.returncode, self.read_log()))
            try:
                last = self.eval(code)
                if last == want:
                    return last
            except GLib.Error as e:  # not on the bus yet, or Eval still refused
                last = e.message
            if time.monotonic() > deadline:
                raise ShellError("timed out waiting for %s == %s (last: %s); shell log:\n%s"
                                 % (code, want, last, self.read_log()))
            time.sleep(0.1)

    def screenshot(self, path):
        ok, used = self._call("org.gnome.Shell.Screenshot", "Screenshot",
                              GLib.Variant("(bbs)", (False, False, path)))
        if not ok:
            raise ShellError("Screenshot failed")
        return used

    def stop(self):
        # its exit status on SIGTERM means nothing (a headless Shell)
        for proc in (self.proc, self.session_bus):
            if proc and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        # what they started (ibus, the portals, goa, evolution's factories,
        # the keyring) would otherwise outlive the test and share the
        # machine with the next one
        for proc in (self.proc, self.session_bus):
            if proc:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.session_bus.stdout.close()
        self.log.close()
