// Reasoning effort through npullm-bridge with the official npm clients:
// Ollama's `think` level and OpenAI's `reasoning_effort` reach the chat
// template of the model `think` (tests/service/think-template.jinja names
// the level once for low, twice for medium, three times for high), so the
// prompt's token count grows level by level.
// Usage: node effort-clients.mjs BASE_URL
// Prints "ok NAME" per case; throws (exit 1) on the first failure.
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import OpenAI from 'openai';

const [base] = process.argv.slice(2);
const ollama = new Ollama({ host: base });
const openai = new OpenAI({ baseURL: base + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const model = 'think';
const messages = [{ role: 'user', content: '2 + 2?' }];

function assertAscending(counts) {
  for (let i = 1; i < counts.length; i++)
    assert.ok(counts[i] > counts[i - 1], 'prompt tokens by level: ' + counts.join(', '));
}

const cases = {
  async 'ollama think levels'() {
    const counts = [];
    for (const think of [true, 'low', 'medium', 'high']) {
      const r = await ollama.chat({ model, messages, think, options: { num_predict: 1, temperature: 0 } });
      assert.equal(r.message.content, '', 'a level is thinking on');
      counts.push(r.prompt_eval_count);
    }
    assertAscending(counts);
    const stream = await ollama.chat({ model, messages, think: 'medium', stream: true,
      options: { num_predict: 2, temperature: 0 } });
    let last, thinking = '';
    for await (const chunk of stream) {
      thinking += chunk.message.thinking ?? '';
      last = chunk;
    }
    assert.equal(last.prompt_eval_count, counts[2]);
    assert.ok(thinking.length > 0);
    await assert.rejects(ollama.chat({ model, messages, think: 'max' }),
      (e) => e.status_code === 400 && /"think" must be true, false, "low", "medium" or "high"/.test(e.message));
  },
  async 'openai reasoning_effort'() {
    const usage = async (reasoning_effort) => (await openai.chat.completions.create({ model, messages, max_tokens: 1,
      temperature: 0, reasoning_effort })).usage.prompt_tokens;
    const counts = [];
    for (const effort of [undefined, 'low', 'medium', 'high'])
      counts.push(await usage(effort));
    assertAscending(counts);
    assert.equal(await usage('minimal'), counts[1], 'minimal is low');
    const stream = await openai.chat.completions.create({ model, messages, max_tokens: 2, temperature: 0,
      reasoning_effort: 'high', stream: true, stream_options: { include_usage: true } });
    let last, thinking = '';
    for await (const c of stream) {
      thinking += c.choices[0]?.delta?.reasoning_content ?? '';
      last = c.usage ?? last;
    }
    assert.equal(last.prompt_tokens, counts[3]);
    assert.ok(thinking.length > 0);
    // none: thinking off, so the answer is content
    const none = await openai.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0,
      reasoning_effort: 'none' });
    assert.ok(none.choices[0].message.content.length > 0);
    assert.ok(!none.choices[0].message.reasoning_content);
    await assert.rejects(openai.chat.completions.create({ model, messages, reasoning_effort: 'max' }),
      (e) => e.status === 400 &&
        /"reasoning_effort" must be "none", "minimal", "low", "medium" or "high"/.test(e.message));
  },
};

for (const [name, run] of Object.entries(cases)) {
  await run();
  console.log('ok ' + name);
}
