#!/bin/sh
# Checks the XRT shim and the stand-in headers against real XRT releases'
# public headers. For each release: installs its headers as an XRT package
# lays them out (headers/CMakeLists.txt), compiles kernels/npu/xrt_shim.cpp
# to an object with -Wall -Wextra -Werror, compiles ../stub_signatures.cpp,
# and runs the XRT probe of kernels/npu/meson.build. See ../README.
#   check-releases.sh XRT_GIT_DIR WORK_DIR [TAG:MINOR ...]
# XRT_GIT_DIR is a clone (or bare mirror) of github.com/Xilinx/XRT.
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 XRT_GIT_DIR WORK_DIR [TAG:MINOR ...]" >&2
  exit 2
fi
xrt_git=$1
work=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
releases=${*:-202420.2.18.179:18 202510.2.19.194:19 202520.2.20.197:20 202610.2.21.21:21 202610.2.23.244:23 2.25.0:25}
cxx=${CXX:-g++}
mkdir -p "$work" || exit 2
failed=0
for spec in $releases; do
  tag=${spec%%:*}
  minor=${spec##*:}
  sha=$(git --git-dir="$xrt_git" rev-parse "$tag^{commit}") || { failed=1; continue; }
  src=$work/src-2.$minor
  inst=$work/xrt-2.$minor
  bld=$work/build-2.$minor
  rm -rf "$src" "$inst" "$bld"
  mkdir -p "$src"
  # Only headers and CMake templates are needed (binary test files of the
  # full tree may be absent from a partial mirror).
  git --git-dir="$xrt_git" archive "$sha" src/runtime_src/core/include src/CMake | tar -x -C "$src" \
    || { echo "2.$minor: cannot extract $tag"; failed=1; continue; }
  legacy=OFF
  [ "$minor" -le 18 ] && legacy=ON
  if ! { cmake -S "$here/headers" -B "$bld" -DXRT_SRC="$src/src" -DXRT_VERSION_MINOR="$minor" \
           -DXRT_COMMIT="$sha" -DXRT_LEGACY=$legacy -DCMAKE_INSTALL_PREFIX="$inst" \
         && cmake --install "$bld"; } >"$bld.log" 2>&1; then
    echo "2.$minor: header install failed, see $bld.log"
    failed=1
    continue
  fi
  inc=$inst/include
  result="XRT 2.$minor ($tag, $sha):"
  # -isystem, as meson passes XRT's include directory.
  if $cxx -std=c++17 -Wall -Wextra -Werror -fPIC -c -isystem "$inc" \
       -I"$repo/kernels/npu" -I"$repo/engine" -I"$repo/kernels/cpu" \
       "$repo/kernels/npu/xrt_shim.cpp" -o "$work/xrt_shim-2.$minor.o" 2>"$work/shim-2.$minor.err"; then
    result="$result shim object OK;"
  else
    result="$result shim object FAILED ($work/shim-2.$minor.err);"
    failed=1
  fi
  if $cxx -std=c++17 -Wall -Wextra -Werror -fsyntax-only -isystem "$inc" \
       "$here/../stub_signatures.cpp" 2>"$work/sig-2.$minor.err"; then
    result="$result stub signatures OK;"
  else
    result="$result stub signatures FAILED ($work/sig-2.$minor.err);"
    failed=1
  fi
  sed -n "/^npu_xrt_version_check = '''/,/^'''/p" "$repo/kernels/npu/meson.build" | sed '1d;$d' \
    >"$work/probe.cpp"
  if $cxx -std=c++17 -fsyntax-only -isystem "$inc" "$work/probe.cpp" 2>/dev/null; then
    result="$result meson probe OK;"
  else
    result="$result meson probe FAILED;"
    failed=1
  fi
  # Informational: whether XRT's headers are themselves warning-free.
  if $cxx -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I"$inc" \
       -I"$repo/kernels/npu" -I"$repo/engine" -I"$repo/kernels/cpu" \
       "$repo/kernels/npu/xrt_shim.cpp" 2>"$work/plain-2.$minor.err"; then
    result="$result XRT headers warning-free"
  else
    result="$result XRT headers warn: $(grep -o '\[-Werror=[a-z-]*\]' "$work/plain-2.$minor.err" \
      | sort -u | sed 's/.*=/-W/;s/]//' | tr '\n' ' ')"
  fi
  echo "$result"
done
exit $failed
