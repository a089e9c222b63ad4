#!/usr/bin/python3
"""npullm-run on gemma3 files: --info, the Gemma chat prompt, generation
ending on <end_of_turn>, and the loader's refusals of broken or
unsupported gemma3 files (exit 2, one line on stderr).

  test_cli.py --npullm-run PATH --model GEMMA3.gguf --workdir DIR [CASE...]
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from npl_cli_test import expect, gguf_patch, npullm_run_main  # noqa: E402
from npl_cli_test import model_variant as variant, npullm_run as run, npullm_run_refuses as expect_error  # noqa: E402

A = None  # the arguments (npullm_run_main)
START_OF_TURN, END_OF_TURN = 105, 106  # Gemma 3 vocabulary


def kv(g, key):
    return next(v for k, _, v in g.kvs if k == key.encode())


# ---- cases -------------------------------------------------------------------

def case_info():
    code, out, err = run(A.model, "--info", "--json")
    j = json.loads(out) if code == 0 else {}
    expect(j.get("architecture") == "gemma3" and j.get("chat_format") == "gemma" and j.get("tokenizer") == "spm"
           and j.get("n_vocab") == 262144, "--info --json: %r %s" % (j, err))


def case_chat_prompt():
    """<bos><start_of_turn>user\\n{system}\\n\\n{prompt}<end_of_turn>\\n<start_of_turn>model\\n"""
    code, out, err = run(A.model, "--prompt", "Hi", "--system", "Be brief.", "-n", "3", "--temperature", "0",
                         "--json")
    expect(code == 0, "chat run succeeds (%s)" % err)
    if code:
        return
    j = json.loads(out)
    p = j["prompt_tokens"]
    code, out, err = run(A.model, "--tokenize", "model\n")
    model_nl = json.loads(out)[1:]  # without BOS
    expect(p[:2] == [2, START_OF_TURN] and p.count(END_OF_TURN) == 1
           and p[-1 - len(model_nl):] == [START_OF_TURN] + model_nl, "gemma chat prompt %r" % p)
    expect(len(j["tokens"]) == 3 and j["finish_reason"] == "length", "3 tokens generated")


def case_end_of_turn_stops():
    """Generation stops at the token whose text is <end_of_turn>: the model
    is unchanged but the vocabulary entries of <end_of_turn> and of the
    token it generates second are swapped (texts do not enter the
    computation, so it still generates the same ids)."""
    args = ["--prompt", "The quick brown fox", "--raw", "-n", "8", "--temperature", "0", "--json"]
    code, out, err = run(A.model, *args)
    expect(code == 0, "raw run succeeds (%s)" % err)
    if code:
        return
    j = json.loads(out)
    ids = [t["id"] for t in j["tokens"]]
    x = ids[1]
    if x in j["prompt_tokens"] or x == ids[0]:
        expect(False, "the second generated token %d also occurs earlier: pick another prompt" % x)
        return

    def swap(g):
        for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
            items = kv(g, key)[1]
            items[x], items[END_OF_TURN] = items[END_OF_TURN], items[x]
    path = variant("eot-swapped", swap)
    code, out, err = run(path, *args)
    expect(code == 0, "swapped run succeeds (%s)" % err)
    if code:
        return
    s = json.loads(out)
    expect(s["prompt_tokens"] == j["prompt_tokens"], "same prompt ids after the swap")
    expect(s["finish_reason"] == "stop" and [t["id"] for t in s["tokens"]] == ids[:2]
           and s["text"] == j["tokens"][0]["text"],
           "stops at <end_of_turn> (id %d) without showing it: %r" % (x, s))


def case_missing_norm():
    path = variant("no-q-norm", lambda g: setattr(g, "tensors", [t for t in g.tensors
                                                                 if t["name"] != "blk.2.attn_q_norm.weight"]))
    expect_error([path, "--prompt", "hi"], 2, "missing tensor 'blk.2.attn_q_norm.weight'")
    path = variant("no-post-ffw-norm", lambda g: setattr(g, "tensors", [t for t in g.tensors
                                                                        if t["name"] != "blk.5.post_ffw_norm.weight"]))
    expect_error([path, "--info"], 2, "missing tensor 'blk.5.post_ffw_norm.weight'")


def case_bad_norm_shape():
    def shrink(g):
        t = g.tensor("blk.0.attn_k_norm.weight")
        t["ne"] = [t["ne"][0] // 2]
    path = variant("bad-k-norm", shrink)
    expect_error([path, "--prompt", "hi"], 2, "tensor 'blk.0.attn_k_norm.weight' has shape [32], expected [64] (head_dim)")


def case_unsupported_metadata():
    path = variant("yarn", lambda g: g.set_kv("gemma3.rope.scaling.type", gguf_patch.STRING, b"yarn"))
    expect_error([path, "--prompt", "hi"], 2, "rope scaling type 'yarn' is not supported")
    path = variant("softcap", lambda g: g.set_kv("gemma3.final_logit_softcapping", 6, 30.0))
    expect_error([path, "--prompt", "hi"], 2, "final_logit_softcapping = 30 is not supported")
    path = variant("bad-pattern", lambda g: g.set_kv("gemma3.attention.sliding_window_pattern", gguf_patch.STRING,
                                                    b"six"))
    expect_error([path, "--prompt", "hi"], 2, "'gemma3.attention.sliding_window_pattern' is not an unsigned")
    path = variant("bad-factor", lambda g: g.set_kv("gemma3.rope.scaling.factor", 6, -2.0))
    expect_error([path, "--prompt", "hi"], 2, "rope.scaling.factor = -2 is not a positive factor")
    path = variant("no-head-count", lambda g: setattr(g, "kvs", [e for e in g.kvs
                                                                 if e[0] != b"gemma3.attention.head_count"]))
    expect_error([path, "--prompt", "hi"], 2, "missing required key 'gemma3.attention.head_count'")

    def many_heads(g):  # n_embd / n_head, the default head size, becomes 0
        g.set_kv("gemma3.attention.head_count", 4, 200)
        g.kvs = [e for e in g.kvs if e[0] != b"gemma3.attention.key_length"]
    path = variant("no-key-length", many_heads)
    expect_error([path, "--prompt", "hi"], 2, "'gemma3.attention.key_length' = 0 (absent: the default) is out of range")


def to_ollama(g, extra_tokens=1):
    """The keys as Ollama's Gemma 3 converter writes them (same tensors)."""
    g.kvs = [e for e in g.kvs if e[0] != b"gemma3.attention.layer_norm_rms_epsilon"]
    for e in g.kvs:
        if e[0] == b"gemma3.rope.freq_base":
            e[0] = b"gemma3.rope.global.freq_base"
        elif e[0] == b"gemma3.rope.freq_base_swa":
            e[0] = b"gemma3.rope.local.freq_base"
    for key, extra in (("tokenizer.ggml.tokens", b"<image_soft_token>"), ("tokenizer.ggml.token_type", 3),
                       ("tokenizer.ggml.scores", 0.0)):
        items = kv(g, key)[1]
        items.extend([extra] * extra_tokens if extra_tokens == 1 or key != "tokenizer.ggml.tokens"
                     else [b"<extra_%d>" % i for i in range(extra_tokens)])


def case_ollama_dialect():
    """Ollama's blob of the same tensors generates the same tokens; a rope
    base under rope.global.freq_base is used, not ignored; more than one
    surplus token is still refused."""
    args = ["--prompt", "The quick brown fox", "--raw", "-n", "8", "--temperature", "0", "--json"]
    code, out, err = run(A.model, *args)
    expect(code == 0, "standard run succeeds (%s)" % err)
    path = variant("ollama", to_ollama)
    code2, out2, err2 = run(path, *args)
    expect(code2 == 0, "Ollama blob loads (%s)" % err2)
    if code or code2:
        return
    ids = [t["id"] for t in json.loads(out)["tokens"]]
    expect([t["id"] for t in json.loads(out2)["tokens"]] == ids, "same tokens from the Ollama blob")

    def other_base(g):
        to_ollama(g)
        g.set_kv("gemma3.rope.global.freq_base", 6, 10.0)
    lp_args = ["--prompt", "The quick brown fox jumps over the lazy dog again", "--raw", "-n", "1",
               "--temperature", "0", "--json", "--top-logprobs", "1"]
    tops = []
    for p in (path, variant("ollama-base10", other_base)):
        code3, out3, err3 = run(p, *lp_args)
        expect(code3 == 0, "run succeeds (%s)" % err3)
        tops.append(json.loads(out3)["tokens"][0]["top"][0][1] if code3 == 0 else None)
    expect(None not in tops and abs(tops[0] - tops[1]) > 1e-3,
           "rope.global.freq_base changes the log-probabilities: %r" % tops)
    expect_error([variant("ollama-2-extra", lambda g: to_ollama(g, 2)), "--prompt", "hi"], 2,
                 "the tokenizer has 262146 tokens but token_embd.weight has 262144 rows")


if __name__ == "__main__":
    sys.exit(npullm_run_main(globals()))
