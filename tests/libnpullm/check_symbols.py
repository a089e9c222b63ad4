#!/usr/bin/python3
"""The symbols libnpullm-1 exports are exactly exported-symbols.txt, each
in the NPULLM_1.0 version node: the ABI cannot change by accident (a new
public function means a new line there; hidden helpers stay hidden).
Usage: check_symbols.py LIBRARY"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    lib = sys.argv[1]
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    exported, unversioned = set(), []
    for line in out.splitlines():
        name = line.split()[-1]
        if name.startswith("NPULLM_"):
            continue  # the version node itself
        base, _, version = name.partition("@@")
        if version != "NPULLM_1.0":
            unversioned.append(name)
        exported.add(base)
    with open(os.path.join(HERE, "exported-symbols.txt")) as f:
        expected = {line.strip() for line in f if line.strip() and not line.startswith("#")}
    ok = True
    for name in sorted(exported - expected):
        print("exported but not in exported-symbols.txt:", name)
        ok = False
    for name in sorted(expected - exported):
        print("in exported-symbols.txt but not exported:", name)
        ok = False
    for name in unversioned:
        print("not in the NPULLM_1.0 version node:", name)
        ok = False
    print("%d symbols checked" % len(exported))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
