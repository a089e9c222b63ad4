#!/usr/bin/python3
"""`tools/npullm-dev run` stays a lean first run.

Once it installed 1,291 Debian packages (two desktops, Qt WebEngine, the
applet tests' tools) before it streamed a generation. This checks, offline
on the host's apt package lists, that the package sets `run` installs
(build and run, without Recommends):

- pull in no package of the sets only tests and desktops need (tests,
  gnome-shell, plasma, node), directly or through their dependencies,
  except the two the demo's own bus and polkit stand-in depend on;
- have a dependency closure (apt-cache depends --recurse, Depends and
  Pre-Depends, every alternative, virtual names included) of at most
  CLOSURE_BOUND names: 184 on Debian 12 in 2026, and counting every
  alternative makes it an upper bound of what apt installs (about 125
  packages on a debootstrap --variant=minbase root,
  tests/packaging/first-run-chroot.sh).

Skipped (77) without apt-cache or package lists (apt-get update).
"""

import os
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEV = os.path.join(TOP, "tools", "npullm-dev")
CLOSURE_BOUND = 220
# dbus-daemon depends on dbus-bin, python3-dbusmock on python3-dbus
ALLOWED_FROM_OTHER_SETS = {"dbus-bin", "python3-dbus"}


def package_set(*names):
    out = subprocess.run([DEV, "packages", *names], check=True, capture_output=True, text=True).stdout
    return set(out.split())


def closure(packages):
    r = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                        "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *sorted(packages)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("# apt-cache depends failed (no package lists?): %s" % r.stderr.strip()[:300])
        sys.exit(77)
    return {line for line in r.stdout.splitlines() if line and not line.startswith(" ")}


def main():
    if subprocess.run(["sh", "-c", "command -v apt-cache"], capture_output=True).returncode != 0:
        print("1..0 # SKIP no apt-cache (not a Debian system)")
        sys.exit(77)
    run = package_set("build", "run")
    others = package_set("tests", "gnome-shell", "plasma", "node")
    names = closure(run)
    print("1..2")
    leaked = sorted((names & others) - ALLOWED_FROM_OTHER_SETS)
    if leaked:
        print("not ok 1 run pulls in packages of the test and desktop sets: %s" % " ".join(leaked))
    else:
        print("ok 1 run pulls in no test or desktop package")
    if len(names) > CLOSURE_BOUND:
        print("not ok 2 run's dependency closure has %d names, over %d" % (len(names), CLOSURE_BOUND))
    else:
        print("ok 2 run's dependency closure has %d names (bound %d)" % (len(names), CLOSURE_BOUND))
    return 1 if leaked or len(names) > CLOSURE_BOUND else 0


if __name__ == "__main__":
    sys.exit(main())
