#!/usr/bin/python3
"""An independent numpy implementation of the Gemma 3 vision tower
(preprocessing, SigLIP encoder, projector), checked against the engine
through vision-tool:

1. preprocessing: the letterboxed, normalised planes must equal the
   engine's (the same float32 formula, so up to one 8-bit level where an
   operation order differs);
2. encoder + projector: from the engine's own preprocessed planes, the
   image embeddings in float64 must match the engine's float32 ones within
   1e-5 of the largest value with --exact (the engine's exact path; f32
   and f16 weights, which the reference reads exactly), --tolerance for
   the fast path and other weight types.

  siglip_ref.py --tool vision-tool --mmproj M.gguf --workdir DIR IMAGE...

Prints one line per image and check, and "N passed, N failed" at the end.
"""

import argparse
import math
import os
import subprocess
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))

import numpy as np  # noqa: E402

import ggml_quants as gq  # noqa: E402
import gguf_patch  # noqa: E402

TYPE_NAMES = {v[0]: k for k, v in gq.TYPES.items()}
RESULTS = [0, 0]


def check(ok, what):
    RESULTS[0 if ok else 1] += 1
    print(("ok     " if ok else "FAILED ") + what)


class MMProj:
    def __init__(self, path):
        g = gguf_patch.GGUF(path)
        self.kv = {k.decode(): v for k, _, v in g.kvs}
        self.g = g

    def tensor(self, name):
        t = next((t for t in self.g.tensors if t["name"] == name), None)
        if t is None:
            return None
        tn = TYPE_NAMES[t["type"]]
        ne = t["ne"]
        rows = int(np.prod(ne[1:])) if len(ne) > 1 else 1
        nbytes = rows * gq.row_bytes(tn, ne[0])
        raw = np.frombuffer(self.g.blob, dtype=np.uint8, count=nbytes, offset=t["offset"]).reshape(rows, -1)
        x = gq.decode(tn, raw, ne[0]).astype(np.float64)
        return x.reshape(list(reversed(ne))) if len(ne) > 1 else x.reshape(ne[0])

    def u32(self, key, default=None):
        return int(self.kv.get(key, default))


def read_pnm(path):
    with open(path, "rb") as f:
        data = f.read()
    parts = data.split(b"\n", 3)
    w, h = map(int, parts[1].split())
    return np.frombuffer(parts[3], dtype=np.uint8).reshape(h, w, 3)


def preprocess(img, size, mean, std):
    """Letterbox (aspect kept, bilinear on the corner grid, truncated to
    8 bits, centred on black) then per-channel normalisation, in float32."""
    h, w = img.shape[:2]
    f32 = np.float32
    square = np.zeros((size, size, 3), dtype=np.uint8)
    if (w, h) == (size, size):
        square[:] = img
    else:
        scale = min(f32(size) / f32(w), f32(size) / f32(h))
        fw = min(int(math.ceil(f32(w) * scale)), size)
        fh = min(int(math.ceil(f32(h) * scale)), size)
        xr = f32(w - 1) / f32(fw - 1) if fw > 1 else f32(0)
        yr = f32(h - 1) / f32(fh - 1) if fh > 1 else f32(0)
        px = np.arange(fw, dtype=np.float32) * xr
        py = np.arange(fh, dtype=np.float32) * yr
        x0 = np.minimum(px.astype(np.int64), w - 1)
        y0 = np.minimum(py.astype(np.int64), h - 1)
        x1 = np.minimum(x0 + 1, w - 1)
        y1 = np.minimum(y0 + 1, h - 1)
        xf = (px - x0.astype(np.float32))[None, :, None]
        yf = (py - y0.astype(np.float32))[:, None, None]
        src = img.astype(np.float32)
        p00, p10 = src[y0][:, x0], src[y0][:, x1]
        p01, p11 = src[y1][:, x0], src[y1][:, x1]
        top = p00 + (p10 - p00) * xf
        bottom = p01 + (p11 - p01) * xf
        out = (top + (bottom - top) * yf).astype(np.uint8)
        ox, oy = (size - fw) // 2, (size - fh) // 2
        square[oy:oy + fh, ox:ox + fw] = out
    planes = square.astype(np.float32).transpose(2, 0, 1) / np.float32(255)
    return (planes - np.asarray(mean, np.float32)[:, None, None]) / np.asarray(std, np.float32)[:, None, None]


def layernorm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    return y * w + (b if b is not None else 0)


def gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_quick(x):
    return x / (1 + np.exp(-1.702 * x))


def encode(m, planes):
    e = m.u32("clip.vision.embedding_length")
    n_head = m.u32("clip.vision.attention.head_count")
    n_layer = m.u32("clip.vision.block_count")
    p = m.u32("clip.vision.patch_size")
    size = m.u32("clip.vision.image_size")
    pool = m.u32("clip.vision.projector.scale_factor", 4)
    eps = float(m.kv["clip.vision.attention.layer_norm_epsilon"])
    act = gelu if m.kv.get("clip.use_gelu") else gelu_quick
    side = size // p
    # patches in (channel, y, x) order, rows of patches top to bottom
    x = planes.astype(np.float64).reshape(3, side, p, side, p).transpose(1, 3, 0, 2, 4).reshape(side * side, -1)
    kernel = m.tensor("v.patch_embd.weight").reshape(e, -1)
    x = x @ kernel.T + m.tensor("v.patch_embd.bias") + m.tensor("v.position_embd.weight")
    hd = e // n_head
    for i in range(n_layer):
        b = "v.blk.%d." % i
        t = lambda n: m.tensor(b + n)  # noqa: E731
        h = layernorm(x, t("ln1.weight"), t("ln1.bias"), eps)
        q = (h @ t("attn_q.weight").T + t("attn_q.bias")).reshape(-1, n_head, hd).transpose(1, 0, 2)
        k = (h @ t("attn_k.weight").T + t("attn_k.bias")).reshape(-1, n_head, hd).transpose(1, 0, 2)
        v = (h @ t("attn_v.weight").T + t("attn_v.bias")).reshape(-1, n_head, hd).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(-1, e)
        x = x + a @ t("attn_out.weight").T + t("attn_out.bias")
        h = layernorm(x, t("ln2.weight"), t("ln2.bias"), eps)
        up, down = t("ffn_up.weight"), t("ffn_down.weight")
        up_b, down_b = t("ffn_up.bias"), t("ffn_down.bias")
        if up.shape[1] != e:  # older naming: fc1 stored as ffn_down
            up, down, up_b, down_b = down, up, down_b, up_b
        x = x + act(h @ up.T + up_b) @ down.T + down_b
    x = layernorm(x, m.tensor("v.post_ln.weight"), m.tensor("v.post_ln.bias"), eps)
    n = side // pool
    pooled = x.reshape(n, pool, n, pool, e).mean(axis=(1, 3)).reshape(n * n, e)
    pooled = pooled / np.sqrt((pooled ** 2).mean(-1, keepdims=True) + eps) * m.tensor("mm.soft_emb_norm.weight")
    return pooled @ m.tensor("mm.input_projection.weight")


EXACT = False
BF16 = False
Q8 = False


def run(*args):
    env = dict(os.environ, NPULLM_VISION_EXACT="1" if EXACT else "0", NPULLM_VISION_BF16="1" if BF16 else "0",
               NPULLM_VISION_Q8="1" if Q8 else "0")
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit("%s failed: %s" % (" ".join(args), r.stderr))
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--mmproj", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--tolerance", type=float, default=1e-5,
                    help="largest embedding difference relative to the largest value")
    ap.add_argument("--exact", action="store_true", help="load the projector with the exact path")
    ap.add_argument("--bf16", action="store_true", help="load the projector with F16 weights as BF16")
    ap.add_argument("--q8", action="store_true", help="load the projector with F16 weights quantized to Q8_0")
    ap.add_argument("images", nargs="+")
    a = ap.parse_args()
    global EXACT, BF16, Q8
    EXACT = a.exact
    BF16 = a.bf16
    Q8 = a.q8
    os.makedirs(a.workdir, exist_ok=True)
    m = MMProj(a.mmproj)
    size = m.u32("clip.vision.image_size")
    mean = m.kv.get("clip.vision.image_mean", (6, [0.5] * 3))[1]
    std = m.kv.get("clip.vision.image_std", (6, [0.5] * 3))[1]
    for image in a.images:
        name = os.path.basename(image)
        ppm = os.path.join(a.workdir, name + ".ppm")
        run(a.tool, "decode", image, ppm)
        ours = os.path.join(a.workdir, name + ".pre")
        run(a.tool, "preprocess", a.mmproj, image, ours)
        got = np.fromfile(ours, dtype=np.float32).reshape(3, size, size)
        want = preprocess(read_pnm(ppm), size, mean, std)
        level = 1.0 / (255 * min(std))
        diff = np.abs(got - want)
        check(diff.max() <= level * 1.001 and (diff > 1e-6).mean() < 1e-3,
              "%s: preprocessing, max difference %.2g (one level = %.2g), %d values differ"
              % (name, diff.max(), level, int((diff > 1e-6).sum())))
        emb = os.path.join(a.workdir, name + ".emb")
        run(a.tool, "embed", a.mmproj, image, emb)
        got = np.fromfile(emb, dtype=np.float32)
        planes = np.fromfile(ours, dtype=np.float32).reshape(3, size, size)
        want = encode(m, planes).reshape(-1)
        rel = np.abs(got - want).max() / np.abs(want).max()
        check(got.shape == want.shape and rel < a.tolerance,
              "%s: embeddings %s, max difference %.2g relative to the largest value" % (name, got.shape, rel))
    print("%d passed, %d failed" % tuple(RESULTS))
    return 1 if RESULTS[1] else 0


if __name__ == "__main__":
    sys.exit(main())
