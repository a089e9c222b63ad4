"""A desktop application for the applet tests: a process npullmd knows as
org.example.TextEditor, whose desktop file names it "Text Editor", with a
long request running. It is tests/service/test_desktop.py's --app mode run
by a copy of the Python interpreter named org.example.TextEditor, so the
daemon identifies it by its executable (docs/desktop.md, source `exe`),
which needs no root and no systemd; the desktop file is found through the
daemon's XDG_DATA_DIRS (use_desktop_files(), before the daemon starts)."""

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
APP_SCRIPT = os.path.join(os.path.dirname(HERE), "service", "test_desktop.py")
APP_ID = "org.example.TextEditor"
APP_NAME = "Text Editor"


def use_desktop_files():
    """The daemon (and whatever else starts after this) finds
    tests/applets/share/applications/ before the system's."""
    rest = os.environ.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share"
    os.environ["XDG_DATA_DIRS"] = os.path.join(HERE, "share") + ":" + rest


class DesktopApp:
    """with DesktopApp(workdir, env): the application, connected, with one
    request of up to max_tokens running or queued; leaving the block closes
    it (npullmd cancels its request)."""

    def __init__(self, workdir, env, max_tokens=3000):
        exe = os.path.join(workdir, "bin", APP_ID)
        if not os.path.exists(exe):
            os.makedirs(os.path.dirname(exe), exist_ok=True)
            shutil.copy(os.path.realpath(sys.executable), exe)
        self.proc = subprocess.Popen([exe, APP_SCRIPT, "--app", "1", str(max_tokens)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read()
            self.close()
            raise RuntimeError("the application did not start: " + err)
        # what ListApplications told the application itself
        self.applications = json.loads(line)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        finally:
            self.proc.stdout.close()
            self.proc.stderr.close()
