#!/usr/bin/python3
"""Writes the seed corpus for fuzz-gguf into corpus-gguf/ (or the folder
given as the first argument): small valid GGUF files that reach every part
of the reader, and invalid ones that stop at each kind of check.

Run it again after changing it; the output is deterministic."""
import os
import struct
import sys

# GGUF metadata value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i",
              F32: "<f", BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}

# ggml tensor types used here: id -> (elements per block, bytes per block)
F32_T, F16_T, Q4_0_T, Q8_0_T = 0, 1, 2, 8
BLOCKS = {F32_T: (1, 4), F16_T: (1, 2), Q4_0_T: (32, 18), Q8_0_T: (32, 34)}


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == STR:
        return gstr(v)
    if vtype == ARR:
        elem, items = v
        out = struct.pack("<IQ", elem, len(items))
        return out + b"".join(value(elem, x) for x in items)
    return struct.pack(SCALAR_FMT[vtype], v)


def kv(key, vtype, v):
    return gstr(key) + struct.pack("<I", vtype) + value(vtype, v)


def gguf(kvs, tensors=(), version=3, alignment=32):
    """tensors: (name, ne list, ggml type); data is a byte pattern."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    out += b"".join(kvs)
    offset, sizes = 0, []
    for name, ne, gtype in tensors:
        block, bsize = BLOCKS[gtype]
        size = ne[0] // block * bsize
        for n in ne[1:]:
            size *= n
        out += gstr(name) + struct.pack("<I", len(ne))
        out += b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", gtype, offset)
        sizes.append((offset, size))
        offset += (size + alignment - 1) // alignment * alignment
    if tensors:
        out += b"\0" * (-len(out) % alignment)
        start = len(out)
        for i, (off, size) in enumerate(sizes):
            out += b"\0" * (start + off - len(out))
            out += bytes((i * 31 + j * 7) & 0xFF for j in range(size))
    return out


def all_types_kvs():
    return [
        kv("general.architecture", STR, "llama"),
        kv("t.u8", U8, 200), kv("t.i8", I8, -100), kv("t.u16", U16, 60000),
        kv("t.i16", I16, -30000), kv("t.u32", U32, 4000000000),
        kv("t.i32", I32, -2000000000), kv("t.f32", F32, 1.5),
        kv("t.bool", BOOL, 1), kv("t.str", STR, b"hello\0world"),
        kv("t.u64", U64, 2**63 + 5), kv("t.i64", I64, -2**62),
        kv("t.f64", F64, -2.25),
        kv("a.i32", ARR, (I32, [1, -2, 3])),
        kv("a.f32", ARR, (F32, [0.5, -1.0])),
        kv("a.bool", ARR, (BOOL, [1, 0])),
        kv("a.u64", ARR, (U64, [2**64 - 1])),
        kv("a.str", ARR, (STR, ["<s>", "", "</s>"])),
        kv("a.nested", ARR, (ARR, [(U8, [1, 2]), (STR, ["x"]), (ARR, [(I16, [-1])])])),
        kv("a.empty", ARR, (STR, [])),
    ]


def small_tensors():
    return [("tok_embd.weight", [32, 2], Q4_0_T), ("blk.0.attn_q.weight", [32, 1, 2], Q8_0_T),
            ("output_norm.weight", [5], F16_T), ("rope.freqs", [2, 1, 1, 2], F32_T)]


def corpus():
    files = {}
    files["valid-v3-all-types.gguf"] = gguf(all_types_kvs(), small_tensors())
    files["valid-v2-all-types.gguf"] = gguf(all_types_kvs(), small_tensors(), version=2)
    files["valid-align64.gguf"] = gguf([kv("general.alignment", U32, 64)], small_tensors(), alignment=64)
    files["valid-empty.gguf"] = gguf([])
    vocab = [f"tok{i}" for i in range(300)]
    files["valid-vocab.gguf"] = gguf([
        kv("tokenizer.ggml.model", STR, "gpt2"),
        kv("tokenizer.ggml.tokens", ARR, (STR, vocab)),
        kv("tokenizer.ggml.scores", ARR, (F32, [float(-i) for i in range(300)])),
        kv("tokenizer.ggml.token_type", ARR, (I32, [1] * 300)),
        kv("tokenizer.ggml.merges", ARR, (STR, ["t o", "to k"])),
    ])
    deep = (U8, [7])
    for _ in range(7):
        deep = (ARR, [deep])
    files["valid-deep-8.gguf"] = gguf([kv("deep", ARR, deep)])

    base = gguf(all_types_kvs()[:3], small_tensors()[:2])
    files["invalid-magic.gguf"] = b"GGML" + base[4:]
    files["invalid-v1.gguf"] = base[:4] + struct.pack("<I", 1) + base[8:]
    files["invalid-big-endian.gguf"] = base[:4] + struct.pack(">I", 3) + base[8:]
    files["invalid-truncated.gguf"] = base[: len(base) * 2 // 3]
    files["invalid-dup-key.gguf"] = gguf([kv("a", U8, 1), kv("a", U8, 2)])
    files["invalid-empty-key.gguf"] = gguf([kv("", U32, 1)])
    files["invalid-value-type.gguf"] = gguf([gstr("k") + struct.pack("<II", 13, 0)])
    files["invalid-huge-array.gguf"] = gguf([gstr("k") + struct.pack("<IIQ", ARR, U64, 2**61) + b"\0" * 8])
    files["invalid-bool.gguf"] = gguf([kv("b", BOOL, 2)])
    files["invalid-alignment.gguf"] = gguf([kv("general.alignment", U32, 48)])
    files["invalid-deep-9.gguf"] = gguf([kv("deep", ARR, (ARR, [deep]))])
    files["invalid-tensor-type.gguf"] = gguf([], [("w", [32], Q4_0_T)]).replace(
        struct.pack("<IQ", Q4_0_T, 0), struct.pack("<IQ", 4, 0), 1)
    files["invalid-tensor-oob.gguf"] = gguf([], small_tensors())[:-1]
    files["invalid-dup-tensor.gguf"] = gguf([], [("w", [8], F32_T), ("w", [8], F32_T)])
    files["invalid-block-size.gguf"] = (
        b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + gstr("w") + struct.pack("<IQIQ", 1, 48, Q4_0_T, 0)
        + b"\0" * 64)
    return files


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus-gguf")
    os.makedirs(out_dir, exist_ok=True)
    total = 0
    for name, data in sorted(corpus().items()):
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
        total += len(data)
    print(f"wrote {len(corpus())} files, {total} bytes, to {out_dir}")


if __name__ == "__main__":
    main()
