"""A plain numpy Gemma 3 forward pass, written from the architecture's
description (not from the engine), to check what llama.cpp cannot: rows
fed as embeddings, and blocks of rows that attend to each other in both
directions (Gemma 3 image tokens).

The whole sequence is computed at once with an explicit attention mask:
row i sees row j when j <= i or both are in the same bidirectional block,
and in a sliding-window layer only when i - j < window. Arithmetic in
float64, except that K and V are rounded to float16 as the engine's cache
(and llama.cpp's default cache) stores them.

Needs Debian's python (numpy) and tests/fixtures (ggml_quants) and
tests/common (gguf_patch) on sys.path.
"""

import math

import numpy as np

import ggml_quants as gq
import gguf_patch

TYPE_NAMES = {v[0]: k for k, v in gq.TYPES.items()}


class Model:
    def __init__(self, path):
        g = gguf_patch.GGUF(path)
        kv = {k.decode(): v for k, _, v in g.kvs}
        assert kv["general.architecture"] == b"gemma3", "not a gemma3 file"
        a = "gemma3."
        self.n_embd = kv[a + "embedding_length"]
        self.n_layer = kv[a + "block_count"]
        self.n_head = kv[a + "attention.head_count"]
        self.n_head_kv = kv.get(a + "attention.head_count_kv", self.n_head)
        self.head_dim = kv.get(a + "attention.key_length", self.n_embd // self.n_head)
        self.n_rot = kv.get(a + "rope.dimension_count", self.head_dim)
        self.eps = kv[a + "attention.layer_norm_rms_epsilon"]
        self.base = kv.get(a + "rope.freq_base", 10000.0)
        self.window = kv.get(a + "attention.sliding_window", 0)
        self.base_swa = kv.get(a + "rope.freq_base_swa", 10000.0)
        pattern = kv.get(a + "attention.sliding_window_pattern", 6)
        scaling = kv.get(a + "rope.scaling.type", b"linear")
        factor = kv.get(a + "rope.scaling.factor", 0.0)
        self.scale = 1.0 / factor if scaling == b"linear" and factor else 1.0
        self.local = [bool(self.window) and (pattern == 0 or i % pattern < pattern - 1)
                      for i in range(self.n_layer)]
        pre_attn = self.n_embd // self.n_head if self.n_layer == 62 else self.head_dim
        self.attn_scale = 1.0 / math.sqrt(pre_attn)
        self._g = g
        self._tensors = {t["name"]: t for t in g.tensors}
        self.embd = self.tensor("token_embd.weight", np.float32)
        self.n_vocab = self.embd.shape[0]
        self.output = self.tensor("output.weight", np.float32) if "output.weight" in self._tensors else self.embd

    def tensor(self, name, dtype=np.float64):
        t = self._tensors[name]
        ne0 = t["ne"][0]
        rows = int(np.prod(t["ne"][1:])) if len(t["ne"]) > 1 else 1
        tname = TYPE_NAMES[t["type"]]
        nbytes = rows * gq.row_bytes(tname, ne0)
        raw = np.frombuffer(self._g.blob, dtype=np.uint8, count=nbytes, offset=t["offset"])
        w = gq.decode(tname, raw.reshape(rows, -1), ne0).astype(dtype)
        return w if len(t["ne"]) > 1 else w.reshape(ne0)

    def layer(self, i, name):
        return self.tensor("blk.%d.%s.weight" % (i, name))


def rms_norm(x, w, eps):
    # ggml squares and sums in float, the engine in double: both are close
    # to this float64 version.
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_neox(x, pos, n_rot, base, scale):
    """x: [n, heads, head_dim]; rotates (x[i], x[i + n_rot/2])."""
    half = n_rot // 2
    inv = base ** (-2.0 * np.arange(half) / n_rot)
    theta = (pos[:, None] * scale) * inv[None, :]
    c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    x0, x1 = x[..., :half].copy(), x[..., half:n_rot].copy()
    out = x.copy()
    out[..., :half] = x0 * c - x1 * s
    out[..., half:n_rot] = x0 * s + x1 * c
    return out


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def attention_mask(n, blocks, window):
    """blocks: list of (start, end) bidirectional row ranges."""
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    ok = j <= i
    for b0, b1 in blocks:
        inside = (i >= b0) & (i < b1) & (j >= b0) & (j < b1)
        ok |= inside
    if window:
        ok &= (i - j) < window
    return ok


def forward(m, x, blocks, want_rows):
    """x: [n, n_embd] first-layer input (float64). Returns float32 logits
    of the rows in want_rows."""
    n = x.shape[0]
    pos = np.arange(n, dtype=np.float64)
    hd, nh, nkv = m.head_dim, m.n_head, m.n_head_kv
    group = nh // nkv
    masks = {w: attention_mask(n, blocks, w) for w in {0, m.window}}
    for l in range(m.n_layer):
        h = rms_norm(x, m.layer(l, "attn_norm"), m.eps)
        q = (h @ m.layer(l, "attn_q").T).reshape(n, nh, hd)
        k = (h @ m.layer(l, "attn_k").T).reshape(n, nkv, hd)
        v = (h @ m.layer(l, "attn_v").T).reshape(n, nkv, hd)
        q = rms_norm(q, m.layer(l, "attn_q_norm"), m.eps)
        k = rms_norm(k, m.layer(l, "attn_k_norm"), m.eps)
        if m.local[l]:
            base, scale, mask = m.base_swa, 1.0, masks[m.window]
        else:
            base, scale, mask = m.base, m.scale, masks[0]
        q = rope_neox(q, pos, m.n_rot, base, scale)
        k = rope_neox(k, pos, m.n_rot, base, scale)
        k = k.astype(np.float16).astype(np.float64)
        v = v.astype(np.float16).astype(np.float64)
        out = np.empty((n, nh, hd))
        for hq in range(nh):
            g = hq // group
            s = (q[:, hq, :] @ k[:, g, :].T) * m.attn_scale
            s = np.where(mask, s, -np.inf)
            s -= s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            out[:, hq, :] = p @ v[:, g, :]
        o = out.reshape(n, nh * hd) @ m.layer(l, "attn_output").T
        x = x + rms_norm(o, m.layer(l, "post_attention_norm"), m.eps)
        h = rms_norm(x, m.layer(l, "ffn_norm"), m.eps)
        f = gelu_tanh(h @ m.layer(l, "ffn_gate").T) * (h @ m.layer(l, "ffn_up").T)
        f = f @ m.layer(l, "ffn_down").T
        x = x + rms_norm(f, m.layer(l, "post_ffw_norm"), m.eps)
    xo = rms_norm(x[want_rows], m.tensor("output_norm.weight"), m.eps).astype(np.float32)
    return xo @ m.output.T


def token_rows(m, ids):
    """The first layer's input for tokens: embedding rows times sqrt(n_embd)
    (rounded to float as ggml and the engine scale)."""
    return m.embd[ids].astype(np.float64) * float(np.float32(math.sqrt(m.n_embd)))
