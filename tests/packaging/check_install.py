#!/usr/bin/python3
"""The installed tree: `meson install --destdir` of this build holds every
file the service needs, and systemd-analyze verify accepts the installed
unit without a warning (its ExecStart pointed at the staged binary).

  check_install.py --build-root DIR --destdir DIR --unit PATH --daemon PATH FILE...

FILE, --unit and --daemon are absolute install paths (under the prefix).
"""

import argparse
import os
import shutil
import subprocess
import sys
import xml.dom.minidom


def staged(destdir, path):
    return os.path.join(destdir, path.lstrip("/"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-root", required=True)
    ap.add_argument("--destdir", required=True)
    ap.add_argument("--unit", required=True)
    ap.add_argument("--daemon", required=True)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    failed = []

    shutil.rmtree(a.destdir, ignore_errors=True)
    r = subprocess.run(["meson", "install", "-C", a.build_root, "--destdir", a.destdir, "--no-rebuild", "--quiet"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        print("FAIL meson install: %s%s" % (r.stdout, r.stderr))
        return 1

    for f in [a.unit, a.daemon] + a.files:
        if not os.path.isfile(staged(a.destdir, f)):
            failed.append("missing %s" % f)
        elif f.endswith((".xml", ".policy", "system.d/org.npullm.conf")):
            try:
                xml.dom.minidom.parse(staged(a.destdir, f))
            except Exception as e:  # noqa: BLE001 - any parse error fails the check
                failed.append("%s is not well-formed XML: %s" % (f, e))
    if not os.access(staged(a.destdir, a.daemon), os.X_OK):
        failed.append("%s is not executable" % a.daemon)

    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        failed.append("systemd-analyze is not installed (Debian package systemd)")
    elif not failed:
        with open(staged(a.destdir, a.unit)) as f:
            unit = f.read()
        exec_line = "ExecStart=%s" % a.daemon
        if exec_line not in unit:
            failed.append("the unit does not start %s" % a.daemon)
        vdir = os.path.join(a.destdir, "verify")
        os.makedirs(vdir)
        vunit = os.path.join(vdir, os.path.basename(a.unit))
        with open(vunit, "w") as f:
            f.write(unit.replace(exec_line, "ExecStart=%s" % staged(a.destdir, a.daemon)))
        r = subprocess.run([analyze, "verify", "--man=no", vunit], capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or r.stderr.strip() or r.stdout.strip():
            failed.append("systemd-analyze verify (exit %d): %s%s" % (r.returncode, r.stdout, r.stderr))

    for f in failed:
        print("FAIL " + f)
    if not failed:
        print("ok: %d files installed, the unit verifies" % (len(a.files) + 2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
