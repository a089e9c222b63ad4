#!/usr/bin/python3
"""npullm-run as a user meets it: usage errors, broken and unsupported
model files (exit 2, one line on stderr), context overflow (exit 1), the
--json, --info and --tokenize outputs.

  test_cli.py --npullm-run PATH --model TINY_LLAMA.gguf --workdir DIR [CASE...]
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from npl_cli_test import expect, gguf_patch, npullm_run_main  # noqa: E402
import npl_cli_test  # noqa: E402
from npl_cli_test import model_variant as variant, npullm_run as run, npullm_run_refuses as expect_error  # noqa: E402

A = None  # the arguments (npullm_run_main)


# ---- cases -------------------------------------------------------------------

def case_usage():
    expect_error([], 2, "no model file")
    expect_error([A.model], 2, "nothing to do")
    expect_error([A.model, "--bogus"], 2, "unknown option '--bogus'")
    expect_error([A.model, "--prompt"], 2, "--prompt needs a value")
    expect_error([A.model, "--prompt", "x", "-n", "zero"], 2, "-n expects")
    expect_error([A.model, "--prompt", "x", "--top-p", "1.5"], 2, "--top-p expects")
    expect_error([A.model, "--prompt", "x", "--raw", "--system", "s"], 2, "--system needs the chat template")
    expect_error([A.model, "--prompt", "x", "--info"], 2, "exclude each other")
    code, out, err = run("--help")
    expect(code == 0 and "usage: npullm-run" in out and err == "", "--help prints usage")


def case_malformed_gguf():
    path = os.path.join(A.workdir, "garbage.gguf")
    with open(path, "wb") as f:
        f.write(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    expect_error([path, "--prompt", "hi"], 2, path)
    trunc = os.path.join(A.workdir, "truncated.gguf")
    with open(A.model, "rb") as f:
        head = f.read(5000)
    with open(trunc, "wb") as f:
        f.write(head)
    expect_error([trunc, "--info"], 2, trunc)
    expect_error([trunc, "--tokenize", "hi"], 2, trunc)
    expect_error([os.path.join(A.workdir, "does-not-exist.gguf"), "--info"], 2, "does-not-exist.gguf")


def case_unsupported_architecture():
    path = variant("mamba", lambda g: g.set_kv("general.architecture", gguf_patch.STRING, b"mamba"))
    expect_error([path, "--prompt", "hi"], 2, "architecture 'mamba' is not supported")
    expect_error([path, "--info"], 2, "architecture 'mamba' is not supported: Mamba state-space layers")
    # a family the engine knows of says what it lacks; any other name only that it is not supported
    path = variant("qwen3next", lambda g: g.set_kv("general.architecture", gguf_patch.STRING, b"qwen3next"))
    expect_error([path, "--info"], 2, "'qwen3next' is not supported: Qwen3-Next: its fused DeltaNet")
    path = variant("future", lambda g: g.set_kv("general.architecture", gguf_patch.STRING, b"future-arch"))
    expect_error([path, "--info"], 2, "architecture 'future-arch' is not supported (supported: llama,")


def case_unknown_pretokenizer():
    """A pre-tokenizer name the engine does not know is refused by name,
    never replaced by another split (ListModels shows the same reason)."""
    path = variant("unknown-pre", lambda g: g.set_kv("tokenizer.ggml.pre", gguf_patch.STRING, b"some-future-bpe"))
    expect_error([path, "--prompt", "hi"], 2, "pre-tokenizer 'some-future-bpe' is not supported")
    expect_error([path, "--info"], 2, "pre-tokenizer 'some-future-bpe' is not supported")


def case_bad_tensor_shape():
    def shrink(g):
        t = g.tensor("blk.1.attn_k.weight")
        t["ne"] = [t["ne"][0], t["ne"][1] // 2]
    path = variant("bad-shape", shrink)
    expect_error([path, "--prompt", "hi"], 2, "tensor 'blk.1.attn_k.weight' has shape")


def case_unsupported_tensor_type():
    def retype(g):
        t = g.tensor("blk.0.ffn_up.weight")
        t["type"] = 9  # q8_1: a valid ggml type no weight should have
    path = variant("bad-type", retype)
    expect_error([path, "--prompt", "hi"], 2, "has type q8_1")


def case_missing_tensor():
    def drop(g):
        g.tensors = [t for t in g.tensors if t["name"] != "blk.0.ffn_norm.weight"]
    path = variant("missing-tensor", drop)
    expect_error([path, "--prompt", "hi"], 2, "missing tensor 'blk.0.ffn_norm.weight'")


def case_context_overflow():
    expect_error([A.model, "--prompt", "word " * 40, "--raw", "--ctx", "16"], 1, "context overflow")
    # Prompt fits, prompt + -n does not.
    expect_error([A.model, "--prompt", "Hello", "--raw", "--ctx", "16", "-n", "15"], 1, "context overflow")
    code, out, err = run(A.model, "--prompt", "Hello", "--raw", "--ctx", "16", "-n", "14", "--temperature", "0")
    expect(code == 0, "prompt + -n = ctx fits (rc %d, %s)" % (code, err))


def case_json_output():
    code, out, err = run(A.model, "--prompt", "Hello there", "--raw", "-n", "6", "--temperature", "0",
                         "--json", "--top-logprobs", "3")
    expect(code == 0, "json run succeeds (%s)" % err)
    j = json.loads(out)
    expect(j["prompt_tokens"][0] == 128000 and len(j["prompt_tokens"]) == 3, "prompt tokens %r" % j["prompt_tokens"])
    expect(len(j["tokens"]) == 6 and j["finish_reason"] == "length", "6 tokens, length")
    for t in j["tokens"]:
        expect(len(t["top"]) == 3 and t["top"][0][0] == t["id"], "greedy token is the top-1 (%r)" % t)
        lps = [lp for _, lp in t["top"]]
        expect(lps == sorted(lps, reverse=True) and all(lp <= 0 for lp in lps), "sorted log-probabilities")
    for k in ("prompt_ms", "prompt_tps", "gen_ms", "gen_tps"):
        expect(isinstance(j["timings"][k], (int, float)) and j["timings"][k] >= 0, "timing %s" % k)
    # Same greedy output as text when streaming.
    code, text, err = run(A.model, "--prompt", "Hello there", "--raw", "-n", "6", "--temperature", "0")
    expect(code == 0 and text == j["text"], "streamed text equals the JSON text (%r vs %r)" % (text, j["text"]))
    # Chat template (no --raw) starts with the header tokens.
    code, out, err = run(A.model, "--prompt", "Hi", "--system", "Be brief.", "-n", "2", "--json", "--seed", "3")
    j = json.loads(out)
    expect(code == 0 and j["prompt_tokens"][:2] == [128000, 128006], "chat prompt %r" % j["prompt_tokens"][:4])


def case_stop_string():
    code, out, err = run(A.model, "--prompt", "Hello there", "--raw", "-n", "8", "--temperature", "0", "--json")
    j = json.loads(out)
    full = j["text"]
    stop = full[len(full) // 2:len(full) // 2 + 2]
    if stop.strip():
        code, out, err = run(A.model, "--prompt", "Hello there", "--raw", "-n", "8", "--temperature", "0",
                             "--json", "--stop", stop)
        j = json.loads(out)
        expect(code == 0 and j["finish_reason"] == "stop" and stop not in j["text"]
               and full.startswith(j["text"]), "stop string %r cuts %r to %r" % (stop, full, j["text"]))


def case_info():
    code, out, err = run(A.model, "--info")
    expect(code == 0 and "architecture:  llama" in out and "tensor types:" in out, "--info text: %r" % out)
    code, out, err = run(A.model, "--info", "--json")
    j = json.loads(out)
    expect(j["architecture"] == "llama" and j["n_embd"] == 64 and j["n_layer"] == 2 and j["n_head"] == 4
           and j["n_head_kv"] == 2 and j["head_dim"] == 16 and j["tokenizer"] == "bpe"
           and j["chat_format"] == "llama3" and j["tensor_types"]["f32"]["tensors"] > 0, "--info --json: %r" % j)


def case_tokenize():
    code, out, err = run(A.model, "--tokenize", "Hello world")
    expect(code == 0 and json.loads(out) == [128000, 9906, 1917], "tokenize: %r" % out)
    # Special-token text is not parsed.
    code, out, err = run(A.model, "--tokenize", "<|eot_id|>")
    ids = json.loads(out)
    expect(code == 0 and 128009 not in ids and len(ids) > 2, "special text stays text: %r" % ids)


def case_weight_cache():
    """--weight-cache DIR (run on a Q4_0 model): written, then mapped, the
    same text; under a 64 KiB file size limit not written (EFBIG, the
    SIGXFSZ ignored) and still a run; an empty DIR is a usage error."""
    import resource
    cache = os.path.join(A.workdir, "wcache")
    os.makedirs(cache, exist_ok=True)
    for f in os.listdir(cache):
        os.unlink(os.path.join(cache, f))
    args = [A.model, "--weight-cache", cache, "-p", "Hello", "-n", "4", "--temperature", "0"]
    code, first, err = run(*args)
    expect(code == 0 and "; wrote " in err, "first run: exit %d, stderr %r" % (code, err))
    code, second, err = run(*args)
    expect(code == 0 and "mapped" in err and second == first, "second run: exit %d, stderr %r" % (code, err))
    small = os.path.join(A.workdir, "wcache-small")
    os.makedirs(small, exist_ok=True)

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.RLIM_INFINITY))
    code, out, err = npl_cli_test.run([A.npullm_run] + args[:2] + [small] + args[3:], preexec_fn=limit)
    expect(code == 0 and "not written" in err and out == first, "file size limit: exit %d, stderr %r" % (code, err))
    expect(os.listdir(small) == [], "file size limit: left %r" % os.listdir(small))
    expect_error([A.model, "--weight-cache", "", "-p", "x"], 2, "--weight-cache expects a directory")


if __name__ == "__main__":
    sys.exit(npullm_run_main(globals(), not_by_default=("weight_cache",)))
