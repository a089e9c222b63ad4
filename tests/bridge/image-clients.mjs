// Images through npullm-bridge with the official npm clients `ollama` and
// `openai`: a PNG and a JPEG to one vision model (Gemma 4 with its gemma4v
// projector in test_bridge_gemma4v.py).
// Usage: node image-clients.mjs BASE_URL MODEL PNG JPEG MIN_ROWS
// MIN_ROWS: the fewest prompt positions the PNG's image gives.
// Prints "ok NAME" per case; throws (exit 1) on the first failure.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Ollama } from 'ollama';
import OpenAI from 'openai';

const [base, model, pngPath, jpegPath, minRowsArg] = process.argv.slice(2);
const png = readFileSync(pngPath).toString('base64');
const jpeg = readFileSync(jpegPath).toString('base64');
const minRows = Number(minRowsArg);
const ollama = new Ollama({ host: base });
const openai = new OpenAI({ baseURL: base + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 600000 });
const few = { num_predict: 3, temperature: 0 };

const cases = {
  async 'ollama show vision'() {
    const v = await ollama.show({ model });
    assert.ok(v.capabilities.includes('vision'), JSON.stringify(v.capabilities));
  },
  async 'ollama generate png'() {
    const r = await ollama.generate({ model, prompt: 'Describe it.', images: [png], options: few });
    assert.equal(r.done, true);
    assert.equal(r.eval_count, 3);
    assert.ok(r.prompt_eval_count > minRows, `${r.prompt_eval_count} prompt positions, an image of ${minRows}`);
  },
  async 'ollama chat jpeg stream'() {
    const stream = await ollama.chat({ model, messages: [{ role: 'user', content: 'What?', images: [jpeg] }],
      stream: true, options: few });
    let last;
    for await (const chunk of stream)
      last = chunk;
    assert.equal(last.done, true);
    assert.equal(last.eval_count, 3);
  },
  async 'openai image_url png'() {
    const r = await openai.chat.completions.create({ model, max_tokens: 3, temperature: 0, messages: [{ role: 'user',
      content: [{ type: 'text', text: 'Describe it.' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,' + png } }] }] });
    assert.equal(r.usage.completion_tokens, 3);
    assert.ok(r.usage.prompt_tokens > minRows, `${r.usage.prompt_tokens} prompt tokens, an image of ${minRows}`);
    assert.equal(typeof r.choices[0].message.content, 'string');
  },
  async 'openai image_url jpeg stream'() {
    const stream = await openai.chat.completions.create({ model, max_tokens: 3, temperature: 0, stream: true,
      stream_options: { include_usage: true }, messages: [{ role: 'user',
        content: [{ type: 'image_url', image_url: { url: 'data:image/jpeg;base64,' + jpeg } },
          { type: 'text', text: 'What?' }] }] });
    let usage;
    for await (const chunk of stream)
      usage = chunk.usage ?? usage;
    assert.equal(usage.completion_tokens, 3);
  },
};

for (const [name, run] of Object.entries(cases)) {
  await run();
  console.log('ok ' + name);
}
