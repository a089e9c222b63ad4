"""plasmoidviewer (Plasma 5.27's widget viewer) showing the npullm widget,
for the Plasma test and tools/npullm-dev try-plasma: a fresh HOME and
XDG_RUNTIME_DIR, its own session bus (dbus-run-session), the given bus as
system bus (npullmd's private bus), the widget's QML plugin from the build
folder (QML2_IMPORT_PATH), and with `headless` its own Xvfb display that
xdotool drives and ImageMagick's import photographs. The widget writes
what it shows to a state file (NPULLM_PLASMA_TEST_STATE). A viewer or
display that does not come up raises with its log, so the test fails with
the reason."""

import json
import os
import shutil
import subprocess
import time

WIDTH, HEIGHT = 1280, 800


class PlasmaError(RuntimeError):
    pass


def _need(program, package):
    if not shutil.which(program):
        raise PlasmaError("%s is not installed (package %s; tools/npullm-dev deps installs it)" % (program, package))


class PlasmoidViewer:
    def __init__(self, workdir, system_bus_address, package_dir, qml_import_dir, headless=True,
                 size=(WIDTH, HEIGHT), extra_args=()):
        self.workdir = workdir
        self.xvfb = self.proc = None
        self.state_path = os.path.join(workdir, "state.json")
        _need("plasmoidviewer", "plasma-sdk")
        _need("dbus-run-session", "dbus-bin")
        home = os.path.join(workdir, "home")
        runtime = os.path.join(workdir, "runtime")
        os.makedirs(os.path.join(home, ".config"))
        os.makedirs(runtime, mode=0o700)
        os.chmod(runtime, 0o700)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("DBUS_", "XDG_", "WAYLAND_", "KDE_", "QT_", "QML"))}
        env.update({
            "HOME": home,
            "XDG_RUNTIME_DIR": runtime,
            "XDG_CONFIG_HOME": os.path.join(home, ".config"),
            "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
            "XDG_CACHE_HOME": os.path.join(home, ".cache"),
            "DBUS_SYSTEM_BUS_ADDRESS": system_bus_address,
            "QML2_IMPORT_PATH": qml_import_dir,
            "QT_QPA_PLATFORM": "xcb",
            "LANG": "C.UTF-8",
        })
        if headless:
            _need("Xvfb", "xvfb")
            env["DISPLAY"] = self._start_xvfb()
            env["NPULLM_PLASMA_TEST_STATE"] = self.state_path
            # Plasma 5 draws with OpenGL; Xvfb has only Mesa's software path
            env["LIBGL_ALWAYS_SOFTWARE"] = "1"
        elif not env.get("DISPLAY"):
            raise PlasmaError("plasmoidviewer needs an X11 display (DISPLAY; Xwayland on a Wayland desktop)")
        else:
            # X clients look for ~/.Xauthority when XAUTHORITY is unset; HOME changes here
            xauth = os.environ.get("XAUTHORITY") or os.path.expanduser("~/.Xauthority")
            if os.path.exists(xauth):
                env["XAUTHORITY"] = xauth
        self.env = env
        self.log_path = os.path.join(workdir, "plasmoidviewer.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["dbus-run-session", "--", "plasmoidviewer", "-a", package_dir,
             "-x", "0", "-y", "0", "-s", "%dx%d" % size] + list(extra_args),
            env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def _start_xvfb(self):
        r, w = os.pipe()
        self.xvfb_log = open(os.path.join(self.workdir, "xvfb.log"), "w")
        self.xvfb = subprocess.Popen(
            ["Xvfb", "-displayfd", str(w), "-screen", "0", "%dx%dx24" % (WIDTH, HEIGHT), "-nolisten", "tcp",
             "-noreset"], pass_fds=(w,), stdout=self.xvfb_log, stderr=subprocess.STDOUT)
        os.close(w)
        number = b""
        deadline = time.monotonic() + 30
        with os.fdopen(r, "rb") as f:
            while not number.endswith(b"\n") and time.monotonic() < deadline:
                chunk = f.read(1)
                if not chunk:
                    break
                number += chunk
        if not number.strip().isdigit():
            raise PlasmaError("Xvfb did not start: " + self._read(os.path.join(self.workdir, "xvfb.log")))
        return ":" + number.strip().decode()

    @staticmethod
    def _read(path):
        try:
            with open(path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def read_log(self):
        self.log.flush()
        return self._read(self.log_path)

    def state(self):
        try:
            with open(self.state_path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def wait_state(self, predicate, timeout=60, what="the widget's state"):
        """Polls the state file until predicate(state) holds; raises with
        the last state and the viewer's log otherwise."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PlasmaError("plasmoidviewer exited with %s; its log:\n%s" % (self.proc.returncode,
                                                                                 self.read_log()))
            last = self.state()
            if last is not None:
                try:
                    if predicate(last):
                        return last
                except (KeyError, IndexError, TypeError):
                    pass
            time.sleep(0.05)
        brief = {k: (last or {}).get(k) for k in ("busy", "status", "entry", "expanded", "entryFocused",
                                                   "lastFinishReason", "pickerText")}
        brief["turns"] = len((last or {}).get("turns") or [])
        raise PlasmaError("timed out after %g s waiting for %s (%s); last state: %s\nplasmoidviewer log:\n%s"
                          % (timeout, what, json.dumps(brief, ensure_ascii=False),
                             json.dumps(last, ensure_ascii=False), self.read_log()))

    def xdotool(self, *args):
        subprocess.run(["xdotool"] + [str(a) for a in args], env=self.env, check=True, timeout=30)

    def click(self, rect):
        """Clicks the middle of [x, y, w, h] (screen coordinates)."""
        x, y, w, h = rect
        self.xdotool("mousemove", "--sync", x + w // 2, y + h // 2, "click", "1")

    def type_text(self, text):
        self.xdotool("type", "--delay", "20", text)

    def key(self, *names):
        self.xdotool("key", "--delay", "50", *names)

    def clipboard(self):
        return subprocess.run(["xclip", "-o", "-selection", "clipboard"], env=self.env, capture_output=True,
                              timeout=10, check=True).stdout.decode()

    def screenshot(self, path):
        subprocess.run(["import", "-window", "root", path], env=self.env, check=True, timeout=30,
                       capture_output=True)

    def stop(self):
        for p in (self.proc, self.xvfb):
            if p is None or p.poll() is not None:
                continue
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.proc is not None:
            # dbus-run-session's bus and anything it started
            try:
                os.killpg(self.proc.pid, 15)
            except ProcessLookupError:
                pass
            self.log.close()
