#!/bin/bash
# Runs the GGUF fuzz target for a bounded time on a scratch copy of the
# seed corpus (the committed corpus is never written to). Exits non-zero
# on any crash, leak or sanitizer report; crashing inputs are kept in
# BUILD_DIR/fuzz-artifacts/.
#
# usage: tests/fuzz/run-fuzz.sh SECONDS BUILD_DIR
# where BUILD_DIR was configured with:
#   CC=clang meson setup BUILD_DIR -Dfuzzing=true -Db_lundef=false
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 SECONDS BUILD_DIR" >&2
    exit 2
fi
seconds=$1
build=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
target="$build/tests/fuzz/fuzz-gguf"

if ! ninja -C "$build" tests/fuzz/fuzz-gguf >/dev/null || [ ! -x "$target" ]; then
    echo "$target not built: configure $build with -Dfuzzing=true (clang)" >&2
    exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-gguf.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/artifacts"
cp "$here"/corpus-gguf/* "$work/corpus/"

status=0
(cd "$work" && "$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -dict="$here/gguf.dict" -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
    "$work/corpus") >"$work/log" 2>&1 || status=$?

grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$work/log" || true
if [ "$status" -ne 0 ] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|invariant violated' "$work/log" ||
    [ -n "$(ls -A "$work/artifacts")" ]; then
    mkdir -p "$build/fuzz-artifacts"
    cp -r "$work/artifacts/." "$build/fuzz-artifacts/" 2>/dev/null || true
    cp "$work/log" "$build/fuzz-artifacts/fuzz-gguf.log"
    tail -60 "$work/log" >&2
    echo "fuzz-gguf: FAILED (exit $status); inputs and log in $build/fuzz-artifacts/" >&2
    exit 1
fi
echo "fuzz-gguf: no crashes in ${seconds}s; corpus grew to $(ls "$work/corpus" | wc -l) inputs"
