#!/usr/bin/python3
"""Write a vocab-only GGUF for testing the ChatML format (Qwen2 style).

Neither test tokenizer in tests/node_modules has <|im_start|>/<|im_end|>,
so this takes the Llama 3 vocabulary and renames two of its reserved
control tokens to them, declares architecture qwen2 and no BOS, and
embeds the generic ChatML template. Good enough for what the chat tests
check: control tokens inserted by id, the text around them tokenized like
llama.cpp tokenizes the rendered template.

Usage: /usr/bin/python3 make-chatml-vocab.py --out FILE [--no-template]
"""

import argparse
import os
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))

import gguf_writer as gw  # noqa: E402
import hf_vocab  # noqa: E402

RENAMED = {
    "<|reserved_special_token_0|>": "<|im_start|>",
    "<|reserved_special_token_1|>": "<|im_end|>",
}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--no-template", action="store_true",
                   help="omit tokenizer.chat_template (format must be guessed)")
    a = p.parse_args(argv)

    v = hf_vocab.llama3()
    tokens = list(v.tokens)
    for old, new in RENAMED.items():
        tokens[tokens.index(old)] = new
    im_end = tokens.index("<|im_end|>")

    w = gw.GGUFWriter(a.out)
    w.add_string("general.architecture", "qwen2")
    w.add_string("general.name", "npullm-chatml-vocab")
    w.add_u32("general.alignment", w.alignment)
    w.add_u32("qwen2.vocab_size", len(tokens))
    w.add_string("tokenizer.ggml.model", v.model)
    w.add_string("tokenizer.ggml.pre", v.pre)
    w.add_array("tokenizer.ggml.tokens", gw.STRING, tokens)
    w.add_array("tokenizer.ggml.token_type", gw.INT32, v.token_types)
    w.add_array("tokenizer.ggml.merges", gw.STRING, v.merges)
    w.add_u32("tokenizer.ggml.bos_token_id", v.ids["bos"])
    w.add_u32("tokenizer.ggml.eos_token_id", im_end)
    w.add_u32("tokenizer.ggml.eot_token_id", im_end)
    w.add_bool("tokenizer.ggml.add_bos_token", False)
    w.add_bool("tokenizer.ggml.add_eos_token", False)
    if not a.no_template:
        w.add_string("tokenizer.chat_template", hf_vocab.CHATML_TEMPLATE)
    out_dir = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(out_dir, exist_ok=True)
    w.write_header()
    w.close()


if __name__ == "__main__":
    main(sys.argv[1:])
