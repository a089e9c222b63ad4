#!/usr/bin/env node
// llama.cpp (through @fugood/llama.node) as a correctness oracle for tests.
//
//   node oracle.mjs tokenize MODEL [REQUEST.json]
//   node oracle.mjs complete MODEL [REQUEST.json]
//   node oracle.mjs info     MODEL [REQUEST.json]
//   node oracle.mjs complete-image MODEL [REQUEST.json]
//   node oracle.mjs embed    MODEL [REQUEST.json]
//   node oracle.mjs rerank   MODEL [REQUEST.json]
//
// The request is JSON read from the file, or from stdin when no file is
// given; the answer is one JSON object on stdout. One model load serves all
// the texts / requests of an invocation. See README.md for the formats and
// for what llama.node does and does not let us observe.
//
// llama.node prints native and binding logs on stdout/stderr; to keep
// stdout clean, the work runs in a child process whose stdout/stderr are
// discarded (or sent to our stderr with ORACLE_VERBOSE=1) and which hands
// its answer back on file descriptor 3.
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

import { readGGUFMetadata, writeDerivedGGUF, stringArrayRecord, int32ArrayRecord, boolRecord, stringRecord, Vocab, TOKEN_TYPE } from './gguf-vocab.mjs'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const COMMANDS = ['tokenize', 'complete', 'info', 'complete-image', 'embed', 'rerank']

function usage () {
  process.stderr.write('usage: oracle.mjs tokenize|complete|info|complete-image|embed|rerank MODEL [REQUEST.json]\n')
  process.exit(2)
}

// ---------------------------------------------------------------- parent
async function parent (argv) {
  const [cmd, model, reqFile] = argv
  if (!COMMANDS.includes(cmd) || !model) usage()
  const request = reqFile ? fs.readFileSync(reqFile) : await readAll(process.stdin)
  const verbose = !!process.env.ORACLE_VERBOSE
  // Scratch files (derived models, session state) live in a directory the
  // parent removes, so a crashing worker leaves nothing behind.
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'oracle-'))
  process.on('exit', () => fs.rmSync(scratch, { recursive: true, force: true }))
  let { code, answer, errText } = await runWorker(cmd, model, scratch, request, verbose)
  let parsed = parseAnswer(answer)
  if (!parsed) {
    // The worker died without answering or reporting an error: a native
    // crash in llama.node (seen once in CI, not reproduced in 25 runs here).
    // The request is deterministic, so one more try tells a crash from a bug.
    process.stderr.write(`oracle: note: worker died (${code}) before answering; retrying once\n`)
    ;({ code, answer, errText } = await runWorker(cmd, model, scratch, request, verbose))
    parsed = parseAnswer(answer)
  }
  if (!parsed || parsed.oracle_error) {
    const msg = parsed?.oracle_error ?? `worker failed (exit ${code})`
    // The message goes last: callers keep the tail of stderr.
    process.stderr.write((verbose ? '' : `--- last native log lines ---\n${errText.slice(-2000)}\n`) + `oracle: ${msg}\n`)
    process.exit(1)
  }
  if (code !== 0) {
    // The answer was complete; only the native teardown failed.
    process.stderr.write(`oracle: note: worker exited with ${code} after answering\n`)
  }
  process.stdout.write(answer.endsWith('\n') ? answer : answer + '\n')
}

function runWorker (cmd, model, scratch, request, verbose) {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--child', cmd, model, scratch], {
    stdio: ['pipe', verbose ? 2 : 'ignore', verbose ? 2 : 'pipe', 'pipe'],
  })
  let answer = ''
  let errText = ''
  child.stdio[3].setEncoding('utf8').on('data', (d) => { answer += d })
  if (!verbose) child.stderr.setEncoding('utf8').on('data', (d) => { errText = (errText + d).slice(-8000) })
  child.stdin.end(request)
  return new Promise((resolve) => child.on('close', (c, sig) => resolve({ code: sig ?? c, answer, errText })))
}

function parseAnswer (answer) {
  try { return JSON.parse(answer) } catch { return null }
}

function readAll (stream) {
  return new Promise((resolve, reject) => {
    const chunks = []
    stream.on('data', (c) => chunks.push(c))
    stream.on('end', () => resolve(Buffer.concat(chunks)))
    stream.on('error', reject)
  })
}

// ---------------------------------------------------------------- child
const require = createRequire(path.join(HERE, '..', 'package.json'))

function loadOptions (model, req, extra = {}) {
  return {
    model,
    n_ctx: req.n_ctx ?? 2048,
    n_batch: 512,
    n_ubatch: 512,
    n_threads: req.n_threads ?? 2,
    n_gpu_layers: 0,
    n_parallel: 1,
    use_mmap: true,
    // Exactness over speed: f32 KV cache, plain attention.
    cache_type_k: req.cache_type ?? 'f32',
    cache_type_v: req.cache_type ?? 'f32',
    flash_attn_type: 'off',
    ctx_shift: false,
    ...extra,
  }
}

// Sampling settings under which llama.cpp's sampler chain leaves the
// logits untouched, so the candidate probabilities it reports are the
// plain softmax of the model's logits (at `temperature`).
function untouchedSampling (temperature, seed) {
  return {
    temperature,
    top_k: 0,
    top_p: 1,
    min_p: 0,
    typical_p: 1,
    penalty_last_n: 0,
    penalty_repeat: 1,
    penalty_freq: 0,
    penalty_present: 0,
    dry_multiplier: 0,
    xtc_probability: 0,
    top_n_sigma: -1,
    mirostat: 0,
    seed,
  }
}

function decodeTexts (req) {
  const texts = []
  const errors = []
  for (const t of req.texts ?? []) {
    // N-API would turn a lone surrogate into U+FFFD behind our back.
    if (t.isWellFormed()) { texts.push(t); continue }
    texts.push(null)
    errors[texts.length - 1] = 'text has a lone UTF-16 surrogate; pass such input as texts_b64'
  }
  for (const b of req.texts_b64 ?? []) {
    const bytes = Buffer.from(b, 'base64')
    try {
      texts.push(new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes))
    } catch {
      // A JS string cannot carry invalid UTF-8 to the binding.
      texts.push(null)
      errors[texts.length - 1] = 'invalid UTF-8 cannot be passed through llama.node (JS strings)'
    }
  }
  return { texts, errors }
}

// tokenizer with parse_special = false: a vocab-only copy of the model in
// which control and unknown tokens get texts no input can contain, so the
// binding's tokenize (which always parses specials) cannot match them.
// User-defined tokens keep their text: llama.cpp matches them in both modes.
const HIDDEN = '\u{10FFFD}oracle-hidden-'

function hiddenTokens (vocab) {
  return vocab.tokens.map((t, id) => (vocab.isSpecial(id) ? Buffer.from(HIDDEN + id, 'utf8') : t))
}

// Renaming is exact only if llama.cpp could never build a special token
// out of pieces: for SentencePiece vocabularies it merges any adjacent
// pair whose concatenation is a token, whatever its type.
function specialsFormable (vocab) {
  if (vocab.model !== 'llama') return []
  const set = new Set(vocab.tokens.map((t) => t.toString('latin1')))
  const bad = []
  vocab.tokens.forEach((t, id) => {
    if (!vocab.isSpecial(id)) return
    const s = t.toString('latin1')
    for (let i = 1; i < s.length; i++) {
      if (set.has(s.slice(0, i)) && set.has(s.slice(i))) { bad.push(id); break }
    }
  })
  return bad
}

async function cmdTokenize (lib, model, req, vocab, meta, scratch) {
  const parseSpecial = req.parse_special ?? false
  const { texts, errors } = decodeTexts(req)
  let file = model
  if (!parseSpecial) {
    file = path.join(scratch, 'vocab.gguf')
    writeDerivedGGUF(model, file, meta, new Map([
      ['tokenizer.ggml.tokens', stringArrayRecord('tokenizer.ggml.tokens', hiddenTokens(vocab))],
    ]), false)
  }
  const ctx = await lib.loadModel({ ...loadOptions(file, req), vocab_only: true })
  const tokens = []
  for (const [i, t] of texts.entries()) {
    if (t === null) { tokens.push(null); continue }
    if (t.includes(HIDDEN)) { tokens.push(null); errors[i] = 'text contains the oracle\'s reserved marker'; continue }
    tokens.push(Array.from((await ctx.tokenize(t)).tokens))
  }
  const out = {
    tokens,
    parse_special: parseSpecial,
    bos_added: false,
    model_add_bos: vocab.addBos,
    bos_id: vocab.bos,
  }
  if (errors.length) out.errors = Array.from({ length: texts.length }, (_, i) => errors[i] ?? null)
  const formable = parseSpecial ? [] : specialsFormable(vocab)
  if (formable.length) out.warning = `parse_special=false emulation may differ: special tokens ${formable.join(',')} can be formed by merges`
  return out
}

// Completion runs on a "marker" copy of the model: same tensors and
// hyperparameters, but token i is a CONTROL token whose text is
// MARK_OPEN + i + MARK_CLOSE, BOS is not added and only eos ends
// generation. llama.node takes text prompts only (tokenized with special
// tokens parsed) and reports candidates as token strings; with markers, the
// text of any id sequence tokenizes to exactly those ids, and every
// reported string names exactly one id. The weights, hence the logits,
// are untouched.
const MARK_OPEN = '\u{F0000}'
const MARK_CLOSE = '\u{F0001}'
const MARK_RE = /^\u{F0000}(\d+)\u{F0001}$/u

function markerText (ids) {
  return ids.map((id) => MARK_OPEN + id + MARK_CLOSE).join('')
}

function markerId (s) {
  const m = MARK_RE.exec(s)
  return m ? Number(m[1]) : null
}

function writeMarkerModel (model, dst, meta, vocab, keep = new Map()) {
  const n = vocab.tokens.length
  const tokens = Array.from({ length: n }, (_, i) => keep.has(i) ? Buffer.from(keep.get(i), 'utf8') : Buffer.from(MARK_OPEN + i + MARK_CLOSE, 'utf8'))
  const records = new Map([
    ['tokenizer.ggml.tokens', stringArrayRecord('tokenizer.ggml.tokens', tokens)],
    ['tokenizer.ggml.token_type', int32ArrayRecord('tokenizer.ggml.token_type', new Array(n).fill(TOKEN_TYPE.CONTROL))],
    ['tokenizer.ggml.add_bos_token', boolRecord('tokenizer.ggml.add_bos_token', false)],
  ])
  // Gemma 4's tokenizer model makes llama.cpp add BOS whatever
  // add_bos_token says: the copy is a plain BPE vocabulary (no text reaches
  // its merges, every token being a control marker).
  if (vocab.model === 'gemma4') {
    records.set('tokenizer.ggml.model', stringRecord('tokenizer.ggml.model', 'gpt2'))
    records.set('tokenizer.ggml.pre', stringRecord('tokenizer.ggml.pre', 'default'))
  }
  // llama.cpp stops generating at any end-of-generation id and then does
  // not say which one it sampled: keep a single one.
  if (meta.kv.has('tokenizer.ggml.eos_token_id')) {
    for (const k of ['tokenizer.ggml.eot_token_id', 'tokenizer.ggml.eom_token_id']) {
      if (meta.kv.has(k)) records.set(k, rekey(meta, 'tokenizer.ggml.eos_token_id', k))
    }
  }
  writeDerivedGGUF(model, dst, meta, records, true)
}

// The kv record of `from` under the name `to`.
function rekey (meta, from, to) {
  const rec = meta.raw.find(([key]) => key === from)[1]
  const klen = Number(rec.readBigUInt64LE(0))
  const k = Buffer.from(to, 'utf8')
  const len = Buffer.alloc(8)
  len.writeBigUInt64LE(BigInt(k.length))
  return Buffer.concat([len, k, rec.subarray(8 + klen)])
}

function readSessionTokens (file) {
  const b = fs.readFileSync(file)
  if (b.readUInt32LE(0) !== 0x6767736e) throw new Error('unexpected session file magic')
  const n = b.readUInt32LE(8)
  const out = []
  for (let i = 0; i < n; i++) out.push(b.readInt32LE(12 + 4 * i))
  return out
}

class Completer {
  constructor (ctx, vocab, scratch, eos) {
    this.ctx = ctx
    this.vocab = vocab
    this.eos = eos
    this.pieces = vocab.pieces()
    this.lossy = new TextDecoder('utf-8', { ignoreBOM: true })
    this.session = path.join(scratch, 'session.bin')
    this.seenProbs = 0 // llama.node keeps appending probabilities across calls
  }

  // What llama.cpp evaluated (read back from its saved state) must start
  // with the prompt we meant.
  async checkPrompt (ids) {
    await this.ctx.saveSession(this.session)
    const ev = readSessionTokens(this.session)
    if (ids.some((t, i) => ev[i] !== t)) {
      throw new Error(`llama.cpp evaluated [${ev.slice(0, ids.length)}], expected [${ids}]`)
    }
  }

  async run (ids, nPredict, nProbs, temperature, seed) {
    const res = await this.ctx.completion({
      prompt: markerText(ids),
      n_predict: nPredict,
      n_probs: nProbs,
      ...untouchedSampling(temperature, seed),
    })
    const all = res.completion_probabilities ?? []
    const fresh = all.slice(this.seenProbs)
    this.seenProbs = all.length
    return fresh
  }

  topList (probs) {
    return probs.map((p) => {
      const id = this.kept?.get(p.tok_str) ?? markerId(p.tok_str)
      if (id === null) throw new Error(`unexpected candidate string ${JSON.stringify(p.tok_str)}`)
      return { id, prob: p.prob, logprob: p.prob > 0 ? Math.log(p.prob) : null, piece: this.lossy.decode(this.pieces[id]) }
    })
  }

  // Greedy: one call per step asking for a single token under the
  // untouched distribution; its most probable token is the next one.
  // llama.node reuses the KV cache for the common prefix, so each step
  // evaluates only the new token.
  async greedy (ids, r) {
    const steps = []
    for (let s = 0; s < r.n_predict; s++) {
      const probs = await this.run(ids, 1, r.n_probs, 1.0, r.seed)
      if (probs.length !== 1) throw new Error(`expected 1 step of probabilities, got ${probs.length}`)
      if (s === 0) await this.checkPrompt(ids)
      const top = this.topList(probs[0].probs)
      steps.push({ token: top[0].id, top })
      ids = ids.concat([top[0].id])
    }
    return { steps, stopped: 'n_predict' }
  }

  // Sampling at `temperature` with llama.cpp's sampler: one call.
  async sample (ids, r) {
    const all = await this.run(ids, r.n_predict, r.n_probs, r.temperature, r.seed)
    await this.checkPrompt(ids)
    const steps = all.map((p) => ({
      // an end-of-generation token is reported as an empty string
      token: p.content === '' ? this.eos : markerId(p.content),
      top: this.topList(p.probs),
    }))
    const last = steps.length ? steps[steps.length - 1].token : null
    return { steps, stopped: steps.length < r.n_predict || (last !== null && last === this.eos) ? 'eog' : 'n_predict' }
  }
}

async function cmdComplete (lib, model, req, vocab, meta, scratch) {
  const requests = req.requests ?? [req]
  const nCtx = req.n_ctx ?? Math.max(2048, ...requests.map((r) => r.n_ctx ?? 0))
  // Text prompts: tokenized as llama.node's completion does it (specials
  // parsed, BOS when the model asks for it), with the real vocabulary.
  const prompts = requests.map(() => null)
  const errors = requests.map(() => null)
  if (requests.some((r) => !r.prompt_tokens)) {
    const vctx = await lib.loadModel({ ...loadOptions(model, req), vocab_only: true })
    for (const [i, r] of requests.entries()) {
      if (r.prompt_tokens) continue
      if (typeof r.prompt !== 'string') { errors[i] = 'request needs prompt_tokens or prompt'; continue }
      if (!r.prompt.isWellFormed()) { errors[i] = 'prompt has a lone UTF-16 surrogate'; continue }
      const ids = Array.from((await vctx.tokenize(r.prompt)).tokens)
      prompts[i] = vocab.addBos ? [vocab.bos, ...ids] : ids
    }
  }
  for (const [i, r] of requests.entries()) {
    if (!r.prompt_tokens) continue
    const ids = r.prompt_tokens
    if (!Array.isArray(ids) || ids.length === 0 || !ids.every((t) => Number.isInteger(t) && t >= 0 && t < vocab.tokens.length)) {
      errors[i] = `prompt_tokens must be a non-empty array of ids in [0, ${vocab.tokens.length})`
    } else {
      prompts[i] = ids.slice()
    }
  }

  const marked = path.join(scratch, 'marked.gguf')
  writeMarkerModel(model, marked, meta, vocab)
  const ctx = await lib.loadModel(loadOptions(marked, { ...req, n_ctx: nCtx }))
  const eos = meta.kv.get('tokenizer.ggml.eos_token_id')
  const c = new Completer(ctx, vocab, scratch, eos ? eos.value : null)
  const results = []
  for (const [i, r0] of requests.entries()) {
    if (errors[i]) { results.push({ error: errors[i] }); continue }
    const r = {
      n_predict: r0.n_predict ?? 32,
      n_probs: r0.n_probs ?? 5,
      temperature: r0.temperature ?? 1.0,
      seed: r0.seed ?? 42,
    }
    if (prompts[i].length + r.n_predict > nCtx) { results.push({ error: `prompt + n_predict exceeds n_ctx ${nCtx}` }); continue }
    ctx.clearCache(false) // no state shared between requests
    const out = (r0.greedy ?? true) ? await c.greedy(prompts[i], r) : await c.sample(prompts[i], r)
    results.push({ prompt_tokens: prompts[i], ...out })
  }
  return req.requests ? { results } : results[0]
}

// ------------------------------------------------------- complete-image
// One image inside a prompt, through llama.cpp's multimodal path (mtmd):
// the prompt text carries llama.node's media marker where the image goes,
// and mtmd replaces it with the projector's begin text, the image
// embeddings and its end text (<start_of_image> ... <end_of_image> for
// Gemma 3, <|image> ... <image|> for Gemma 4: the request's image_begin and
// image_end). The marker copy of the model keeps the real texts of those
// two tokens so mtmd's tokenization of them yields their ids.
const MEDIA_MARKER = '<__media__>'

async function cmdCompleteImage (lib, model, req, vocab, meta, scratch) {
  if (typeof req.mmproj !== 'string') throw new Error('request needs "mmproj" (path of the projector GGUF)')
  const IMAGE_BEGIN = req.image_begin ?? '<start_of_image>'
  const IMAGE_END = req.image_end ?? '<end_of_image>'
  const textOf = (t) => vocab.tokens.findIndex((b) => b.toString('utf8') === t)
  const begin = textOf(IMAGE_BEGIN)
  const end = textOf(IMAGE_END)
  if (begin < 0 || end < 0) throw new Error(`the vocabulary lacks ${IMAGE_BEGIN} or ${IMAGE_END}`)
  const requests = req.requests ?? [req]
  const nCtx = req.n_ctx ?? 2048
  const marked = path.join(scratch, 'marked.gguf')
  const keep = new Map([[begin, IMAGE_BEGIN], [end, IMAGE_END]])
  writeMarkerModel(model, marked, meta, vocab, keep)
  const ctx = await lib.loadModel(loadOptions(marked, { ...req, n_ctx: nCtx }))
  if (!(await ctx.initMultimodal({ path: req.mmproj, use_gpu: false }))) throw new Error(`initMultimodal failed for ${req.mmproj}`)
  const eos = meta.kv.get('tokenizer.ggml.eos_token_id')
  const c = new Completer(ctx, vocab, scratch, eos ? eos.value : null)
  c.kept = new Map([[IMAGE_BEGIN, begin], [IMAGE_END, end]])
  const valid = (ids) => Array.isArray(ids) && ids.every((t) => Number.isInteger(t) && t >= 0 && t < vocab.tokens.length)
  const results = []
  for (const r0 of requests) {
    const before = r0.before
    const after = r0.after
    if (!valid(before) || !valid(after) || before[before.length - 1] !== begin || after[0] !== end) {
      results.push({ error: `"before" must be ids ending with ${begin} (${IMAGE_BEGIN}), "after" ids starting with ${end} (${IMAGE_END})` })
      continue
    }
    if (typeof r0.image !== 'string' || !fs.existsSync(r0.image)) {
      results.push({ error: `image ${JSON.stringify(r0.image)} does not exist` })
      continue
    }
    const nPredict = r0.n_predict ?? 8
    const nProbs = r0.n_probs ?? 5
    ctx.clearCache(false)
    const head = markerText(before.slice(0, -1)) + MEDIA_MARKER
    let tail = after.slice(1)
    const steps = []
    for (let s = 0; s < nPredict; s++) {
      const res = await ctx.completion({
        prompt: head + markerText(tail),
        media_paths: [r0.image],
        n_predict: 1,
        n_probs: nProbs,
        ...untouchedSampling(1.0, r0.seed ?? 42),
      })
      const all = res.completion_probabilities ?? []
      const fresh = all.slice(c.seenProbs)
      c.seenProbs = all.length
      if (fresh.length !== 1) throw new Error(`expected 1 step of probabilities, got ${fresh.length}`)
      const top = c.topList(fresh[0].probs)
      steps.push({ token: top[0].id, top })
      tail = tail.concat([top[0].id])
    }
    await ctx.saveSession(c.session)
    const evaluated = readSessionTokens(c.session)
    results.push({ evaluated, steps })
  }
  return req.requests ? { results } : results[0]
}

async function cmdInfo (lib, model, req, vocab) {
  const ctx = await lib.loadModel(loadOptions(model, { ...req, n_ctx: req.n_ctx ?? 256 }))
  const info = ctx.getModelInfo()
  return {
    desc: info.desc,
    n_params: info.nParams,
    n_embd: info.nEmbd,
    size: info.size,
    metadata: info.metadata,
    tokenizer: { model: vocab.model, n_tokens: vocab.tokens.length, bos_id: vocab.bos, add_bos: vocab.addBos, eog_ids: [...vocab.eogIds] },
  }
}

// Embedding model: {texts} -> {embeddings: [[...]]}, each vector pooled as
// the file says and L2-normalised (embd_normalize 2). One batch holds a
// whole text (an encoder sees all its tokens at once). Each text gets a
// context of its own: a second embedding() call on a context does not
// start from empty (positions go on), clearCache or not.
async function cmdEmbed (lib, model, req, vocab) {
  const nCtx = req.n_ctx ?? 512
  const opts = { ...loadOptions(model, { ...req, n_ctx: nCtx }), n_batch: nCtx, n_ubatch: nCtx, embedding: true, embd_normalize: 2 }
  const embeddings = []
  const tokens = []
  for (const t of req.texts ?? []) {
    const ctx = await lib.loadModel(opts)
    const r = await ctx.embedding(t, { embd_normalize: 2 })
    embeddings.push(Array.from(r.embedding))
    tokens.push(Array.from((await ctx.tokenize(t)).tokens))
  }
  return { embeddings, tokens, add_bos: vocab.addBos, bos_id: vocab.bos }
}

// Reranker: {query, documents, sep} -> {scores, rerank}. scores[i]: the
// model's score of the pair "[CLS] query [SEP] document [SEP]", through
// embedding() of query + sep + document (the first value of a rank-pooled
// result); rerank: llama.node's own rerank() scores in the documents'
// order (its pairs start with a second [CLS], so they differ a little).
// A file with tokenizer.chat_template.rerank (Qwen3-Reranker) scores that
// prompt with {query} and {document} filled in (as llama.cpp's server
// builds it), the first value being the softmax's "yes"; rerank is null.
async function cmdRerank (lib, model, req, vocab, meta) {
  const nCtx = req.n_ctx ?? 512
  const opts = { ...loadOptions(model, { ...req, n_ctx: nCtx }), n_batch: nCtx, n_ubatch: nCtx, embedding: true, embd_normalize: -1 }
  const tmpl = meta.kv.get('tokenizer.chat_template.rerank')?.value?.toString('utf8')
  const pair = (d) => tmpl !== undefined
    ? tmpl.replaceAll('{query}', req.query).replaceAll('{document}', d)
    : req.query + (req.sep ?? '[SEP]') + d
  const scores = []
  for (const d of req.documents ?? []) {
    const ctx = await lib.loadModel(opts)
    const r = await ctx.embedding(pair(d), { embd_normalize: -1 })
    scores.push(r.embedding[0])
  }
  // llama.node's rerank() does not use a rerank prompt: nothing to show
  if (tmpl !== undefined) return { scores, rerank: null }
  const ctx = await lib.loadModel(opts)
  const ranked = await ctx.rerank(req.query, req.documents ?? [], {})
  const rerank = new Array(ranked.length)
  for (const r of ranked) rerank[r.index] = r.score
  return { scores, rerank }
}

async function child (argv) {
  const [cmd, model, scratch] = argv
  const lib = require('@fugood/llama.node')
  const raw = (await readAll(process.stdin)).toString('utf8').trim()
  const req = raw ? JSON.parse(raw) : {}
  const meta = readGGUFMetadata(model)
  const vocab = new Vocab(meta)
  const handlers = { tokenize: cmdTokenize, complete: cmdComplete, info: cmdInfo, 'complete-image': cmdCompleteImage, embed: cmdEmbed, rerank: cmdRerank }
  const out = await handlers[cmd](lib, model, req, vocab, meta, scratch)
  fs.writeSync(3, JSON.stringify(out) + '\n')
  // Contexts are not released: llama.node has been seen to crash while
  // freeing one, and the process ends right here anyway.
}

if (process.argv[2] === '--child') {
  child(process.argv.slice(3)).then(() => process.exit(0), (e) => {
    // Native destructors log after us on stderr: send the error on fd 3.
    fs.writeSync(3, JSON.stringify({ oracle_error: String(e.stack ?? e) }) + '\n')
    process.exit(1)
  })
} else {
  parent(process.argv.slice(2))
}
