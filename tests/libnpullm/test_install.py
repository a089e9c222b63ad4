#!/usr/bin/python3
"""libnpullm-1 from an install tree, as its users find it: `meson install
--destdir` into a temporary folder, then pkg-config --cflags --libs
npullm-1, a C program built against it, and
gjs and python3 loading the installed typelib (GI_TYPELIB_PATH and
LD_LIBRARY_PATH into the tree).

The -I and -L flags are looked up under the temporary folder.

Environment (tests/libnpullm/meson.build): MESON (the meson command),
BUILD_ROOT, EXAMPLE_C (a source to build), GJS (empty without
introspection), CC, LIBNPULLM_PRELOAD (sanitizer runtimes, in a sanitized
build)."""

import os
import shlex
import shutil
import subprocess
import sys
import tempfile


def find(root, name):
    for d, dirs, files in os.walk(root):
        if name in files or name in dirs:
            return os.path.join(d, name)
    raise AssertionError("%s is not in the install tree" % name)


def run(cmd, env=None):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        raise AssertionError("%s failed:\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
    return p.stdout


def main():
    destdir = tempfile.mkdtemp(prefix="npullm-install-")
    tests = []
    try:
        meson = shlex.split(os.environ["MESON"])
        run(meson + ["install", "-C", os.environ["BUILD_ROOT"], "--destdir", destdir, "--no-rebuild", "--quiet"])
        pc = find(destdir, "npullm-1.pc")
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pc))
        flags = run(["pkg-config", "--cflags", "--libs", "npullm-1"], env).split()
        assert "-lnpullm-1" in flags, flags
        # The flags name the final prefix; the files are under destdir
        # until a package manager moves them there.
        flags = [f[:2] + destdir + f[2:] if f[:2] in ("-I", "-L") and os.path.exists(destdir + f[2:]) else f
                 for f in flags]
        includes = [f[2:] for f in flags if f.startswith("-I") and f.endswith("npullm-1")]
        assert includes and os.path.isfile(os.path.join(includes[0], "npullm.h")), flags
        tests.append("pkg-config --cflags --libs npullm-1 names the installed header and library")

        exe = os.path.join(destdir, "example")
        run(shlex.split(os.environ.get("CC", "cc")) + [os.environ["EXAMPLE_C"], "-o", exe] + flags, env)
        tests.append("a C program builds and links against the install tree")

        if os.environ.get("GJS"):
            libdir = os.path.dirname(find(destdir, "libnpullm-1.so.1"))
            typelibs = find(destdir, "girepository-1.0")
            gi_env = dict(os.environ, GI_TYPELIB_PATH=typelibs, LD_LIBRARY_PATH=libdir)
            if os.environ.get("LIBNPULLM_PRELOAD"):
                # a sanitized build: see test_libnpullm.py
                gi_env["LD_PRELOAD"] = os.environ["LIBNPULLM_PRELOAD"]
                gi_env["ASAN_OPTIONS"] = gi_env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
            run([os.environ["GJS"], "-c", "imports.gi.Npullm"], gi_env)
            out = run([os.environ["GJS"], "-c",
                       "imports.gi.versions.Npullm = '1.0'; const {Npullm} = imports.gi;"
                       "print(new Npullm.Options({temperature: 0.5}).temperature);"], gi_env)
            assert out.strip() == "0.5", out
            tests.append('gjs -c "imports.gi.Npullm" loads the installed typelib and library')
            run([sys.executable, "-c", "from gi.repository import Npullm"], gi_env)
            out = run([sys.executable, "-c", "import gi; gi.require_version('Npullm', '1.0');"
                       "from gi.repository import Npullm; print(Npullm.Options(max_tokens=3).props.max_tokens)"],
                      gi_env)
            assert out.strip() == "3", out
            tests.append('python3 -c "from gi.repository import Npullm" loads the installed typelib and library')
        print("1..%d" % len(tests))
        for i, t in enumerate(tests, 1):
            print("ok %d - %s" % (i, t))
        return 0
    except AssertionError as e:
        print("1..1")
        print("not ok 1 - install tree")
        for line in str(e).splitlines():
            print("# " + line)
        return 1
    finally:
        shutil.rmtree(destdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
