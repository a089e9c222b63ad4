// The official npm clients `ollama` and `openai` asking npullm-bridge for
// embeddings; node's fetch on /v1/rerank, as programs written for
// llama.cpp's server call it (no official client has reranking).
// Usage: node embed-clients.mjs BASE_URL
// Prints "ok NAME" per case; throws (exit 1) on the first failure.
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import OpenAI from 'openai';

const [base] = process.argv.slice(2);
const ollama = new Ollama({ host: base });
const openai = new OpenAI({ baseURL: base + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const ok = (name) => console.log('ok ' + name);
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const near = (a, b) => a.length === b.length && a.every((x, i) => Math.abs(x - b[i]) < 1e-6);

let reference;
const cases = {
  async 'ollama embed'() {
    const r = await ollama.embed({ model: 'minilm', input: ['one text', 'another text'], truncate: true });
    assert.equal(r.embeddings.length, 2);
    assert.equal(r.embeddings[0].length, 64);
    assert.ok(Math.abs(norm(r.embeddings[0]) - 1) < 1e-5);
    assert.ok(r.prompt_eval_count > 4);
    reference = r.embeddings[0];
    const one = await ollama.embed({ model: 'minilm', input: 'one text', dimensions: 8 });
    assert.equal(one.embeddings[0].length, 8);
  },
  async 'ollama embeddings'() {
    const r = await ollama.embeddings({ model: 'minilm', prompt: 'one text' });
    assert.ok(near(r.embedding, reference));
  },
  async 'openai float'() {
    const r = await openai.embeddings.create({ model: 'minilm', input: 'one text', encoding_format: 'float' });
    assert.equal(r.object, 'list');
    assert.ok(near(r.data[0].embedding, reference));
    assert.ok(r.usage.prompt_tokens > 2);
  },
  async 'openai base64'() {
    // asked for explicitly, the package hands the base64 text over as is
    const r = await openai.embeddings.create({ model: 'minilm', input: ['one text'], encoding_format: 'base64' });
    const v = r.data[0].embedding;
    const floats = typeof v === 'string' ? Array.from(new Float32Array(new Uint8Array(Buffer.from(v, 'base64')).buffer)) : v;
    assert.ok(near(floats, reference.map((x) => Math.fround(x))));
    // without encoding_format the package asks for base64 and decodes it
    const d = await openai.embeddings.create({ model: 'minilm', input: 'one text', dimensions: 16 });
    assert.equal(d.data[0].embedding.length, 16);
  },
  async 'batch of 64'() {
    const texts = Array.from({ length: 64 }, (_, i) => `document ${i}: notes about topic ${i % 7}`);
    const [a, b] = await Promise.all([
      openai.embeddings.create({ model: 'minilm', input: texts }),
      ollama.embed({ model: 'minilm', input: texts }),
    ]);
    assert.equal(a.data.length, 64);
    assert.deepEqual(a.data.map((d) => d.index), texts.map((_, i) => i));
    assert.equal(b.embeddings.length, 64);
    for (let i = 0; i < 64; i++)
      assert.ok(near(a.data[i].embedding, b.embeddings[i]), `text ${i}`);
  },
  async 'errors'() {
    await assert.rejects(openai.embeddings.create({ model: 'tiny', input: 'x' }),
      (e) => e.status === 400 && /not an embedding model/.test(e.message));
    await assert.rejects(ollama.embed({ model: 'tiny', input: 'x' }), /not an embedding model/);
    await assert.rejects(ollama.generate({ model: 'minilm', prompt: 'x', stream: false }), /embedding model/);
  },
  async 'rerank with fetch'() {
    const documents = ['The giant panda is a bear of China.', 'The llama is a camelid of the Andes.',
      'The guanaco lives in South America.', ''];
    const post = (body) => fetch(base + '/v1/rerank', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
    const r = await post({ model: 'ranker', query: 'What animals live near Peru?', documents, top_n: 3 });
    assert.equal(r.status, 200);
    const doc = await r.json();
    assert.equal(doc.object, 'list');
    assert.equal(doc.results.length, 3);
    const scores = doc.results.map((x) => x.relevance_score);
    assert.deepEqual(scores, [...scores].sort((a, b) => b - a));
    assert.equal(new Set(doc.results.map((x) => x.index)).size, 3);
    assert.ok(doc.results.every((x) => x.index >= 0 && x.index < documents.length));
    const bad = await post({ model: 'minilm', query: 'x', documents: ['y'] });
    assert.equal(bad.status, 400);
    assert.match((await bad.json()).error.message, /not a reranker/);
  },
};

for (const [name, run] of Object.entries(cases)) {
  await run();
  ok(name);
}
