// Reads the metadata of a GGUF file (no tensor data), exposes the tokenizer
// tables the oracle needs, and writes derived vocab-only GGUF files.
import fs from 'node:fs'

const T = {
  UINT8: 0, INT8: 1, UINT16: 2, INT16: 3, UINT32: 4, INT32: 5, FLOAT32: 6,
  BOOL: 7, STRING: 8, ARRAY: 9, UINT64: 10, INT64: 11, FLOAT64: 12,
}
const SCALAR_SIZE = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 }

// llama.cpp token types
export const TOKEN_TYPE = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 }

class NeedMore extends Error {}

class Cursor {
  constructor (buf) { this.buf = buf; this.pos = 0 }
  need (n) { if (this.pos + n > this.buf.length) throw new NeedMore() }
  u32 () { this.need(4); const v = this.buf.readUInt32LE(this.pos); this.pos += 4; return v }
  u64 () {
    this.need(8)
    const v = this.buf.readBigUInt64LE(this.pos); this.pos += 8
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error('GGUF: 64-bit value too large')
    return Number(v)
  }
  bytes (n) { this.need(n); const b = this.buf.subarray(this.pos, this.pos + n); this.pos += n; return b }
  str () { return this.bytes(this.u64()) }
  scalar (type) {
    const n = SCALAR_SIZE[type]
    if (n === undefined) throw new Error(`GGUF: bad value type ${type}`)
    this.need(n)
    const b = this.buf; const p = this.pos; this.pos += n
    switch (type) {
      case T.UINT8: return b.readUInt8(p)
      case T.INT8: return b.readInt8(p)
      case T.UINT16: return b.readUInt16LE(p)
      case T.INT16: return b.readInt16LE(p)
      case T.UINT32: return b.readUInt32LE(p)
      case T.INT32: return b.readInt32LE(p)
      case T.FLOAT32: return b.readFloatLE(p)
      case T.BOOL: return b.readUInt8(p) !== 0
      case T.UINT64: return Number(b.readBigUInt64LE(p))
      case T.INT64: return Number(b.readBigInt64LE(p))
      case T.FLOAT64: return b.readDoubleLE(p)
    }
  }
  value (type) {
    if (type === T.STRING) return this.str()
    if (type === T.ARRAY) {
      const et = this.u32(); const n = this.u64()
      const out = new Array(n)
      if (et === T.STRING) { for (let i = 0; i < n; i++) out[i] = this.str() } else {
        for (let i = 0; i < n; i++) out[i] = this.scalar(et)
      }
      out.elemType = et
      return out
    }
    return this.scalar(type)
  }
}

function parse (buf) {
  const c = new Cursor(buf)
  const magic = c.bytes(4).toString('latin1')
  if (magic !== 'GGUF') throw new Error('not a GGUF file')
  const version = c.u32()
  const nTensors = c.u64()
  const nKv = c.u64()
  const kv = new Map()
  const raw = [] // [key, Buffer of the whole kv record]
  for (let i = 0; i < nKv; i++) {
    const start = c.pos
    const key = c.str().toString('utf8')
    const type = c.u32()
    const value = c.value(type)
    kv.set(key, { type, value })
    raw.push([key, buf.subarray(start, c.pos)])
  }
  const infoStart = c.pos
  for (let i = 0; i < nTensors; i++) {
    c.str()
    const nDims = c.u32()
    for (let d = 0; d < nDims; d++) c.u64()
    c.u32()
    c.u64()
  }
  const tensorInfos = Buffer.from(buf.subarray(infoStart, c.pos))
  const alignment = kv.has('general.alignment') ? kv.get('general.alignment').value : 32
  const dataStart = Math.ceil(c.pos / alignment) * alignment
  // kv records are views into the read buffer: copy them out.
  for (const r of raw) r[1] = Buffer.from(r[1])
  return { version, nTensors, kv, raw, tensorInfos, alignment, dataStart }
}

export function readGGUFMetadata (path) {
  const fd = fs.openSync(path, 'r')
  try {
    const size = fs.fstatSync(fd).size
    let n = Math.min(size, 16 << 20)
    for (;;) {
      const buf = Buffer.alloc(n)
      fs.readSync(fd, buf, 0, n, 0)
      try {
        return parse(buf)
      } catch (e) {
        if (!(e instanceof NeedMore) || n >= size) throw e instanceof NeedMore ? new Error('GGUF: truncated metadata') : e
        n = Math.min(size, n * 4)
      }
    }
  } finally {
    fs.closeSync(fd)
  }
}

function u32 (v) { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b }
function u64 (v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); return b }
function keyBytes (key) { const k = Buffer.from(key, 'utf8'); return Buffer.concat([u64(k.length), k]) }

export function stringArrayRecord (key, items) {
  const parts = [keyBytes(key), u32(T.ARRAY), u32(T.STRING), u64(items.length)]
  for (const s of items) parts.push(u64(s.length), s)
  return Buffer.concat(parts)
}

export function int32ArrayRecord (key, items) {
  const data = Buffer.alloc(4 * items.length)
  items.forEach((v, i) => data.writeInt32LE(v, 4 * i))
  return Buffer.concat([keyBytes(key), u32(T.ARRAY), u32(T.INT32), u64(items.length), data])
}

export function stringRecord (key, value) {
  const v = Buffer.from(value, 'utf8')
  return Buffer.concat([keyBytes(key), u32(T.STRING), u64(v.length), v])
}

export function boolRecord (key, value) {
  return Buffer.concat([keyBytes(key), u32(T.BOOL), Buffer.from([value ? 1 : 0])])
}

// A copy of the GGUF at `src` (metadata `meta`) with some kv records
// replaced or added (`records`: Map key -> full record bytes). With
// `withTensors` false the copy is vocab-only (no tensors).
export function writeDerivedGGUF (src, dst, meta, records, withTensors) {
  const kvs = meta.raw.map(([key, rec]) => (records.has(key) ? records.get(key) : rec))
  for (const [key, rec] of records) if (!meta.kv.has(key)) kvs.push(rec)
  const nTensors = withTensors ? meta.nTensors : 0
  const head = [Buffer.from('GGUF', 'latin1'), u32(3), u64(nTensors), u64(kvs.length), ...kvs]
  if (withTensors) head.push(meta.tensorInfos)
  let header = Buffer.concat(head)
  if (withTensors) {
    header = Buffer.concat([header, Buffer.alloc((meta.alignment - header.length % meta.alignment) % meta.alignment)])
  }
  const out = fs.openSync(dst, 'w')
  try {
    fs.writeSync(out, header)
    if (withTensors) {
      const inp = fs.openSync(src, 'r')
      try {
        const chunk = Buffer.alloc(16 << 20)
        let pos = meta.dataStart
        for (;;) {
          const n = fs.readSync(inp, chunk, 0, chunk.length, pos)
          if (n === 0) break
          fs.writeSync(out, chunk, 0, n)
          pos += n
        }
      } finally {
        fs.closeSync(inp)
      }
    }
  } finally {
    fs.closeSync(out)
  }
}

// GPT-2 byte-level alphabet: byte -> code point, and back.
function byteLevelDecoder () {
  const bs = []
  for (let b = 33; b <= 126; b++) bs.push(b)
  for (let b = 161; b <= 172; b++) bs.push(b)
  for (let b = 174; b <= 255; b++) bs.push(b)
  const cs = bs.slice()
  let n = 0
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) { bs.push(b); cs.push(256 + n); n++ }
  }
  const dec = new Map()
  bs.forEach((b, i) => dec.set(cs[i], b))
  return dec
}

export class Vocab {
  constructor (meta) {
    const kv = meta.kv
    const get = (k, d) => (kv.has(k) ? kv.get(k).value : d)
    this.meta = meta
    this.model = get('tokenizer.ggml.model', Buffer.from('')).toString()
    this.tokens = get('tokenizer.ggml.tokens', [])
    this.types = get('tokenizer.ggml.token_type', this.tokens.map(() => TOKEN_TYPE.NORMAL))
    this.bos = get('tokenizer.ggml.bos_token_id', null)
    // llama.cpp's default when the key is absent depends on the model type
    // llama.cpp adds BOS for Gemma 4's tokenizer model whatever the key says
    this.addBos = this.model === 'gemma4' || get('tokenizer.ggml.add_bos_token', this.model === 'llama' || this.model === 'gpt2')
    this.eogIds = new Set(['eos', 'eot', 'eom'].map((k) => get(`tokenizer.ggml.${k}_token_id`, null)).filter((v) => v !== null))
    this.arch = get('general.architecture', Buffer.from('')).toString()
  }

  isSpecial (id) {
    const t = this.types[id]
    return t === TOKEN_TYPE.CONTROL || t === TOKEN_TYPE.UNKNOWN
  }

  // The bytes llama.cpp's token_to_piece(special = true) yields.
  pieces () {
    if (this._pieces) return this._pieces
    const out = new Array(this.tokens.length)
    const spm = this.model === 'llama'
    const dec = spm ? null : byteLevelDecoder()
    for (let id = 0; id < this.tokens.length; id++) {
      const raw = this.tokens[id]
      const type = this.types[id]
      if (type === TOKEN_TYPE.CONTROL || type === TOKEN_TYPE.UNKNOWN || type === TOKEN_TYPE.USER_DEFINED) {
        out[id] = raw
      } else if (type === TOKEN_TYPE.BYTE) {
        out[id] = Buffer.from([parseInt(raw.toString().slice(3, 5), 16)])
      } else if (type === TOKEN_TYPE.NORMAL) {
        const s = raw.toString('utf8')
        if (spm) {
          out[id] = Buffer.from(s.replaceAll('\u2581', ' '), 'utf8')
        } else {
          const bytes = []
          let ok = true
          for (const ch of s) {
            const b = dec.get(ch.codePointAt(0))
            if (b === undefined) { ok = false; break }
            bytes.push(b)
          }
          out[id] = ok ? Buffer.from(bytes) : raw
        }
      } else {
        out[id] = Buffer.alloc(0) // unused and unknown types render as nothing
      }
    }
    this._pieces = out
    return out
  }
}
