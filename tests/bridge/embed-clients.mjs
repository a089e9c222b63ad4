// The official npm clients `ollama` and `openai` asking npullm-bridge for
// embeddings. Usage: node embed-clients.mjs BASE_URL
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
};

for (const [name, run] of Object.entries(cases)) {
  await run();
  ok(name);
}
