"""Read a GGUF file's header, change metadata or tensor infos, write it
back with the same tensor data: broken and unsupported variants of a good
model for the error-path tests. Standard library only."""

import struct

STRING, ARRAY = 8, 9
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B",
           10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.d = data
        self.p = 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)
        self.p += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("<Q")
        s = self.d[self.p:self.p + n]
        self.p += n
        return s

    def value(self, t):
        if t == STRING:
            return self.string()
        if t == ARRAY:
            et, n = self.take("<I"), self.take("<Q")
            return (et, [self.value(et) for _ in range(n)])
        return self.take(_SCALAR[t])


def _string(b):
    if isinstance(b, str):
        b = b.encode()
    return struct.pack("<Q", len(b)) + b


def _value(t, v):
    if t == STRING:
        return _string(v)
    if t == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(_value(et, x) for x in items)
    return struct.pack(_SCALAR[t], v)


class GGUF:
    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        r = Reader(data)
        assert r.take("<4s") == b"GGUF"
        self.version = r.take("<I")
        n_tensors, n_kv = r.take("<Q"), r.take("<Q")
        self.kvs = []  # [key bytes, type, value]
        for _ in range(n_kv):
            k = r.string()
            t = r.take("<I")
            self.kvs.append([k, t, r.value(t)])
        self.tensors = []  # dicts name, ne, type, offset
        for _ in range(n_tensors):
            name = r.string()
            nd = r.take("<I")
            ne = [r.take("<Q") for _ in range(nd)]
            ty, off = r.take("<I"), r.take("<Q")
            self.tensors.append(dict(name=name.decode(), ne=ne, type=ty, offset=off))
        self.alignment = 32
        for k, t, v in self.kvs:
            if k == b"general.alignment":
                self.alignment = v
        start = r.p + (-r.p) % self.alignment
        self.blob = data[start:]

    def set_kv(self, key, vtype, value):
        for kv in self.kvs:
            if kv[0] == key.encode():
                kv[1], kv[2] = vtype, value
                return
        self.kvs.append([key.encode(), vtype, value])

    def tensor(self, name):
        return next(t for t in self.tensors if t["name"] == name)

    def write(self, path):
        out = bytearray(b"GGUF")
        out += struct.pack("<IQQ", self.version, len(self.tensors), len(self.kvs))
        for k, t, v in self.kvs:
            out += _string(k) + struct.pack("<I", t) + _value(t, v)
        for t in self.tensors:
            out += _string(t["name"]) + struct.pack("<I", len(t["ne"]))
            out += struct.pack("<%dQ" % len(t["ne"]), *t["ne"])
            out += struct.pack("<IQ", t["type"], t["offset"])
        out += b"\0" * ((-len(out)) % self.alignment)
        with open(path, "wb") as f:
            f.write(out)
            f.write(self.blob)
