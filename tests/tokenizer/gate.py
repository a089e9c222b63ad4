#!/usr/bin/python3
"""Exactness gate: our tokenizer against llama.cpp on the corpus.

For each vocabulary GGUF given, every corpus string is tokenized by our
tok_driver and by llama.cpp, and the id lists must be equal:

  parse_special=true   oracle.mjs (llama.cpp through llama.node) on every
                       valid UTF-8 string; raw_oracle on all strings
  parse_special=false  raw_oracle (the same llama.cpp build called on raw
                       bytes) on all strings, invalid UTF-8 included
  add_special          raw_oracle, with specials parsed

and for every token id, its detokenized bytes (special tokens hidden and
rendered) and whether it ends generation, against llama_token_to_piece and
llama_vocab_is_eog.

oracle.mjs can only emulate parse_special=false (it renames special tokens
in a copy of the vocabulary) and cannot carry invalid UTF-8; its
parse_special=false answers are compared too, and where they differ from
ours, llama.cpp itself (raw_oracle) must agree with us.

Exit status 0 only when every comparison is equal.
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time


def load_corpus(path):
    with open(path, encoding="utf-8") as f:
        entries = json.load(f)
    out = []
    for e in entries:
        if "hex" in e:
            out.append((e["cat"], bytes.fromhex(e["hex"])))
        else:
            out.append((e["cat"], e["text"].encode("utf-8")))
    return out


def run_lines(cmd, texts):
    """Runs a hex-lines-in, ids-lines-out helper."""
    data = "".join(t.hex() + "\n" for t in texts)
    t0 = time.time()
    p = subprocess.run(cmd, input=data, capture_output=True, text=True)
    dt = time.time() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit("%s failed (exit %d)" % (cmd[0], p.returncode))
    lines = p.stdout.split("\n")[: len(texts)]
    if len(lines) != len(texts):
        raise SystemExit("%s: expected %d lines, got %d" % (cmd[0], len(texts), len(lines)))
    res = []
    for ln in lines:
        if ln.startswith("ERROR"):
            res.append(ln)
        else:
            res.append([int(x) for x in ln.split()] if ln.strip() else [])
    return res, dt, p.stderr


def run_oracle_mjs(node, oracle, model, texts, parse_special):
    req = {"texts": [t.decode("utf-8") for t in texts], "parse_special": parse_special}
    t0 = time.time()
    p = subprocess.run([node, oracle, "tokenize", model], input=json.dumps(req), capture_output=True, text=True)
    dt = time.time() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit("oracle.mjs failed (exit %d)" % p.returncode)
    ans = json.loads(p.stdout)
    errs = ans.get("errors") or []
    for i, e in enumerate(errs):
        if e:
            raise SystemExit("oracle.mjs could not tokenize text %d: %s" % (i, e))
    return ans["tokens"], dt, ans.get("warning")


def with_pre(src, dst, pre):
    """Copy of a vocab-only GGUF with tokenizer.ggml.pre replaced (the
    Qwen2, SmolLM, Tekken... split rules run on the Llama 3 vocabulary: the
    splitter does not depend on the vocabulary, and no npm package ships
    Tekken's)."""
    data = open(src, "rb").read()
    key = b"tokenizer.ggml.pre"
    at = data.find(struct.pack("<Q", len(key)) + key + struct.pack("<I", 8))
    if at < 0 or struct.unpack_from("<Q", data, 8)[0] != 0:
        raise SystemExit("%s: no tokenizer.ggml.pre, or has tensors" % src)
    vstart = at + 8 + len(key) + 4
    vlen = struct.unpack_from("<Q", data, vstart)[0]
    new = pre.encode()
    out = data[:vstart] + struct.pack("<Q", len(new)) + new + data[vstart + 8 + vlen:]
    open(dst, "wb").write(out)


def spaces_only_diff(ours, ref):
    """True when the two --pieces lines differ only by U+2581 -> space."""
    def unhex(f):
        return b"" if f == "-" else bytes.fromhex(f)
    o, r = ours.split(" "), ref.split(" ")
    if len(o) != 3 or len(r) != 3 or o[2] != r[2]:
        return False
    return all(unhex(x) == unhex(y).replace(b"\xe2\x96\x81", b" ") for x, y in zip(o[:2], r[:2]))


def show(b):
    s = b.decode("utf-8", errors="backslashreplace")
    s = json.dumps(s, ensure_ascii=False)
    return s if len(s) <= 160 else s[:157] + '..."'


class Gate:
    def __init__(self, name):
        self.name = name
        self.failures = 0
        self.lines = []

    def compare(self, label, texts, ours, ref, cats=None, limit=8):
        bad = [i for i in range(len(texts)) if ours[i] != ref[i]]
        self.lines.append("  %-44s %d/%d equal" % (label, len(texts) - len(bad), len(texts)))
        for i in bad[:limit]:
            self.lines.append("    MISMATCH %s%s" % (("[%s] " % cats[i]) if cats else "", show(texts[i])))
            self.lines.append("      ours:      %s" % ours[i])
            self.lines.append("      llama.cpp: %s" % ref[i])
        self.failures += len(bad)
        return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--driver", required=True)
    ap.add_argument("--raw-oracle", required=True)
    ap.add_argument("--addon", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--oracle", required=True)
    ap.add_argument("--split-rules-on", help="also test the --split-rules pre-tokenizers on this BPE vocabulary")
    ap.add_argument("--split-rules", default="qwen2,smollm",
                    help="comma-separated tokenizer.ggml.pre names for --split-rules-on")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="tok-gate-")
    models = list(a.models)
    for pre in a.split_rules.split(",") if a.split_rules_on else []:
        q = os.path.join(tmp.name, pre + "-split-on-" + os.path.basename(a.split_rules_on))
        with_pre(a.split_rules_on, q, pre)
        models.append(q)

    corpus = load_corpus(a.corpus)
    cats = [c for c, _ in corpus]
    texts = [t for _, t in corpus]
    valid = []
    for i, t in enumerate(texts):
        try:
            t.decode("utf-8")
            valid.append(i)
        except UnicodeDecodeError:
            pass
    vtexts = [texts[i] for i in valid]
    vcats = [cats[i] for i in valid]
    print("corpus: %d strings (%d valid UTF-8, %d with invalid UTF-8), %d bytes"
          % (len(texts), len(valid), len(texts) - len(valid), sum(len(t) for t in texts)))

    total_fail = 0
    for model in models:
        g = Gate(model)
        ours = {}
        for flags in ([], ["--parse-special"], ["--add-bos", "--parse-special"]):
            res, _, log = run_lines([a.driver, model] + flags, texts)
            ours[tuple(flags)] = res
            if not flags:
                g.lines.append("  ours: " + log.strip().split("\n")[-1].replace("tok_driver: ", ""))
        raw = {}
        for flags in ([], ["--parse-special"], ["--add-special", "--parse-special"]):
            raw[tuple(flags)], dt, _ = run_lines([a.raw_oracle, a.addon, model] + flags, texts)

        mjs_sp, dt_sp, _ = run_oracle_mjs(a.node, a.oracle, model, vtexts, True)
        mjs_plain, dt_plain, warn = run_oracle_mjs(a.node, a.oracle, model, vtexts, False)
        g.lines.append("  oracle.mjs: %.1f s + %.1f s" % (dt_sp, dt_plain))

        sp = ours[("--parse-special",)]
        g.compare("parse_special=true  vs oracle.mjs", vtexts, [sp[i] for i in valid], mjs_sp, vcats)
        g.compare("parse_special=true  vs raw llama.cpp", texts, sp, raw[("--parse-special",)], cats)
        g.compare("parse_special=false vs raw llama.cpp", texts, ours[()], raw[()], cats)
        g.compare("add_special         vs raw llama.cpp", texts, ours[("--add-bos", "--parse-special")],
                  raw[("--add-special", "--parse-special")], cats)

        ours_p = subprocess.run([a.driver, model, "--pieces"], capture_output=True, text=True, check=True).stdout.split("\n")
        ref_p = subprocess.run([a.raw_oracle, a.addon, model, "--pieces"], capture_output=True, text=True,
                               check=True).stdout.split("\n")
        bad_p = [i for i in range(max(len(ours_p), len(ref_p))) if i >= len(ours_p) or i >= len(ref_p) or ours_p[i] != ref_p[i]]
        # By design: SentencePiece user-defined tokens made of U+2581 (Gemma 3's
        # runs of spaces) decode to spaces, as HF decodes them; llama.cpp
        # prints the U+2581 characters.
        by_design = [i for i in bad_p if i < len(ours_p) and i < len(ref_p) and spaces_only_diff(ours_p[i], ref_p[i])]
        bad_p = [i for i in bad_p if i not in set(by_design)]
        g.lines.append("  %-44s %d/%d equal%s" % ("token pieces + eog vs raw llama.cpp", len(ref_p) - 1 - len(bad_p),
                       len(ref_p) - 1, " (%d by design: U+2581 runs decode to spaces)" % len(by_design) if by_design else ""))
        for i in bad_p[:8]:
            g.lines.append("    MISMATCH id %d: ours %s, llama.cpp %s" % (i, ours_p[i] if i < len(ours_p) else None,
                                                                     ref_p[i] if i < len(ref_p) else None))
        g.failures += len(bad_p)

        # oracle.mjs's parse_special=false is an emulation; differences are
        # acceptable only where llama.cpp itself agrees with us.
        plain = ours[()]
        n_eq = sum(1 for k, i in enumerate(valid) if plain[i] == mjs_plain[k])
        unexplained = [k for k, i in enumerate(valid) if plain[i] != mjs_plain[k] and plain[i] != raw[()][i]]
        g.lines.append("  %-44s %d/%d equal (%d differ where oracle.mjs's emulation is not llama.cpp)"
                       % ("parse_special=false vs oracle.mjs", n_eq, len(valid), len(valid) - n_eq - len(unexplained)))
        for k in unexplained[:8]:
            i = valid[k]
            g.lines.append("    MISMATCH [%s] %s\n      ours: %s\n      oracle.mjs: %s" % (cats[i], show(texts[i]), plain[i], mjs_plain[k]))
        g.failures += len(unexplained)

        print("%s: %s" % (os.path.basename(model), "OK" if g.failures == 0 else "%d MISMATCHES" % g.failures))
        print("\n".join(g.lines))
        total_fail += g.failures

    if total_fail:
        print("FAIL: %d mismatches" % total_fail)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
