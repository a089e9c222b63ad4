#!/usr/bin/env bash
# build-debs.sh OUTDIR
#
# Builds the Debian packages of this checkout with `dpkg-buildpackage -us
# -uc -b` from a copy of its files in OUTDIR/src (the build leaves its work
# files in the source tree and the .debs beside it: the checkout stays
# clean), then runs lintian over them, failing on any error. The .debs,
# .changes and lintian's report (lintian.txt) end up in OUTDIR.
#
# Needs the Build-Depends of debian/control and lintian
# (`dpkg-checkbuilddeps` says which are missing).
set -euo pipefail

out=${1:?usage: build-debs.sh OUTDIR}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/src"
mkdir "$out/src"
rm -f "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo

# The files git knows of (committed or not, minus the ignored ones): no
# build directories, no tests/node_modules (the package build runs no tests).
(cd "$top" && git ls-files -z --cached --others --exclude-standard) |
    grep -zv '^tests/node_modules' |
    (cd "$top" && xargs -0 cp -d --parents -t "$out/src")

cd "$out/src"
dpkg-checkbuilddeps
start=$(date +%s)
dpkg-buildpackage -us -uc -b >"$out/build.log" 2>&1 || {
    tail -40 "$out/build.log" >&2
    echo "build-debs: dpkg-buildpackage failed, whole log in $out/build.log" >&2
    exit 1
}
echo "build-debs: packages built in $(( $(date +%s) - start )) s" >&2

cd "$out"
changes=$(ls ./*.changes)
# lintian refuses nothing when run as root, but says so on stderr.
lintian --pedantic --display-info --tag-display-limit 0 --fail-on error "$changes" >lintian.txt 2>/dev/null || {
    cat lintian.txt >&2
    echo "build-debs: lintian reports errors" >&2
    exit 1
}
cat lintian.txt >&2
ls -s --block-size=K ./*.deb >&2
