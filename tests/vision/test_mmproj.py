#!/usr/bin/python3
"""Loading mmproj files: broken and unsupported variants of a good
generated projector are refused with a message naming what is wrong, and
optional keys take their documented defaults.

  test_mmproj.py --tool vision-tool --make-mmproj make-mmproj.py --workdir DIR

Prints one line per check and "N passed, N failed" at the end.
"""

import argparse
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))

from npl_cli_test import gguf_patch, gguf_variant  # noqa: E402

RESULTS = [0, 0]
A = None


def check(ok, what):
    RESULTS[0 if ok else 1] += 1
    print(("ok     " if ok else "FAILED ") + what)


def make(name, *args):
    path = os.path.join(A.workdir, name + ".gguf")
    subprocess.run([sys.executable, A.make_mmproj, "--out", path, "--proj-dim", "128"] + list(args),
                   check=True, capture_output=True)
    return path


def info(path):
    r = subprocess.run([A.tool, "info", path], capture_output=True, text=True)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else None), r.stderr


def variant(base, name, mutate):
    return gguf_variant(base, A.workdir, name, mutate)


def refused(path, needle, status):
    rc, _, err = info(path)
    check(rc == 1 and needle in err and "(%s)" % status in err,
          "%s refused: %r in %r" % (os.path.basename(path), needle, err.strip()))


def drop_kv(key):
    def f(g):
        g.kvs = [kv for kv in g.kvs if kv[0] != key.encode()]
    return f


def drop_tensor(name):
    def f(g):
        g.tensors = [t for t in g.tensors if t["name"] != name]
    return f


def reshape(name, ne):
    def f(g):
        g.tensor(name)["ne"] = ne
    return f


def retype(name, type_id):
    def f(g):
        g.tensor(name)["type"] = type_id
    return f


def gemma4v_cases():
    """Gemma 4's tower: its defaults, and its own tensors checked."""
    g4 = make("g4v", "--projector", "gemma4v", "--patch-size", "4", "--std", "--clamps")
    rc, j, err = info(g4)
    check(rc == 0 and j["projector"] == "gemma4v" and j["pool"] == 3 and j["n_tokens"] == 280 and
          j["n_embd_out"] == 128, "gemma4v: pooling 3, at most 280 tokens: %s" % (j or err))
    refused(variant(g4, "g4v-heads", lambda g: g.set_kv("clip.vision.attention.head_count", 4, 32)),
            "head size 2 is not a multiple of 4", "unsupported")
    refused(variant(g4, "g4v-std", drop_tensor("v.std_scale")),
            "v.std_bias and v.std_scale come together", "format")
    refused(variant(g4, "g4v-pos", reshape("v.position_embd.weight", [64, 128])),
            "tensor 'v.position_embd.weight' has shape [64, 128], expected [64, pos_size, 2]", "format")
    refused(variant(g4, "g4v-gate", drop_tensor("v.blk.1.ffn_gate.weight")),
            "missing tensor 'v.blk.1.ffn_gate.weight'", "format")
    refused(variant(g4, "g4v-proj", reshape("mm.input_projection.weight", [128, 64])),
            "tensor 'mm.input_projection.weight' has shape [128, 64], expected [64, n_embd_out]", "format")
    refused(variant(g4, "g4v-clamp", reshape("v.blk.0.ffn_up.input_max", [2])),
            "tensor 'v.blk.0.ffn_up.input_max' has shape [2], expected [1]", "format")


def main():
    global A
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--make-mmproj", required=True)
    ap.add_argument("--workdir", required=True)
    A = ap.parse_args()
    os.makedirs(A.workdir, exist_ok=True)

    good = make("good")
    rc, j, err = info(good)
    check(rc == 0 and j["n_tokens"] == 16 and j["n_embd_out"] == 128 and j["pool"] == 4 and not j["ffn_swapped"],
          "good file: %s" % (j or err))

    # Optional keys: defaults.
    rc, j, err = info(make("no-mean-std", "--no-mean-std"))
    check(rc == 0 and j["mean"] == [0.5] * 3 and j["std"] == [0.5] * 3, "mean/std default to 0.5: %s" % (j or err))
    rc, j, err = info(make("scale2", "--scale-factor", "2"))
    check(rc == 0 and j["pool"] == 2 and j["n_tokens"] == 64, "projector.scale_factor 2: 64 tokens: %s" % (j or err))
    rc, j, err = info(make("swapped", "--swapped-ffn"))
    check(rc == 0 and j["ffn_swapped"], "swapped ffn names detected: %s" % (j or err))
    rc, j, err = info(make("q8", "--type", "q8_0"))
    check(rc == 0, "q8_0 matrices load: %s" % (j or err))

    S, B = gguf_patch.STRING, 7
    refused(variant(good, "llava", lambda g: g.set_kv("clip.projector_type", S, b"mlp")),
            "projector type 'mlp' is not supported (supported: gemma3, gemma4v)", "unsupported")
    refused(variant(good, "no-vision", drop_kv("clip.has_vision_encoder")),
            "not a vision projector", "unsupported")
    refused(variant(good, "no-projector-type", drop_kv("clip.projector_type")),
            "missing required key 'clip.projector_type'", "format")
    refused(variant(good, "no-image-size", drop_kv("clip.vision.image_size")),
            "missing required key 'clip.vision.image_size'", "format")
    refused(variant(good, "no-eps", drop_kv("clip.vision.attention.layer_norm_epsilon")),
            "layer_norm_epsilon", "format")
    refused(variant(good, "odd-image-size", lambda g: g.set_kv("clip.vision.image_size", 4, 225)),
            "image_size 225 is not a multiple of patch_size 14", "unsupported")
    refused(variant(good, "bad-pool", lambda g: g.set_kv("clip.vision.projector.scale_factor", 4, 3)),
            "not a multiple of the pooling factor 3", "unsupported")
    refused(variant(good, "heads", lambda g: g.set_kv("clip.vision.attention.head_count", 4, 5)),
            "embedding_length 64 is not a multiple of head_count 5", "format")
    refused(variant(good, "huge", lambda g: g.set_kv("clip.vision.embedding_length", 4, 1 << 30)),
            "clip.vision.embedding_length' = 1073741824 is out of range", "format")
    refused(variant(good, "gelu-silu", lambda g: g.set_kv("clip.use_silu", B, 1)),
            "both clip.use_gelu and clip.use_silu", "format")
    refused(variant(good, "proj-dim", lambda g: g.set_kv("clip.vision.projection_dim", 4, 100)),
            "projection_dim = 100 but mm.input_projection.weight has 128 outputs", "format")
    refused(variant(good, "missing-k", drop_tensor("v.blk.1.attn_k.weight")),
            "missing tensor 'v.blk.1.attn_k.weight'", "format")
    refused(variant(good, "missing-soft-norm", drop_tensor("mm.soft_emb_norm.weight")),
            "missing tensor 'mm.soft_emb_norm.weight'", "format")
    refused(variant(good, "bad-pos", reshape("v.position_embd.weight", [64, 128])),
            "tensor 'v.position_embd.weight' has shape [64, 128], expected [64, 256]", "format")
    refused(variant(good, "bad-patch", reshape("v.patch_embd.weight", [16, 16, 3, 64])),
            "tensor 'v.patch_embd.weight' has shape [16, 16, 3, 64]", "format")
    refused(variant(good, "bad-ffn", reshape("v.blk.0.ffn_down.weight", [96, 32])),
            "tensor 'v.blk.0.ffn_down.weight' has shape [96, 32]", "format")
    refused(variant(good, "bad-type", retype("v.blk.0.attn_q.weight", 9)),
            "tensor 'v.blk.0.attn_q.weight' has type q8_1", "unsupported")

    gemma4v_cases()

    trunc = os.path.join(A.workdir, "truncated.gguf")
    with open(good, "rb") as f:
        head = f.read(3000)
    with open(trunc, "wb") as f:
        f.write(head)
    rc, _, err = info(trunc)
    check(rc == 1 and "truncated.gguf" in err, "truncated file refused: %r" % err.strip())

    print("%d passed, %d failed" % tuple(RESULTS))
    return 1 if RESULTS[1] else 0


if __name__ == "__main__":
    sys.exit(main())
