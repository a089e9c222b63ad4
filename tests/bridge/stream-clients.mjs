// One streamed chat through npullm-bridge with each official npm client
// (`ollama`, `openai`), greedy and short: every streamed piece is counted
// and the last chunk's counts must agree with them (test_bridge_real_layout.py).
// Usage: node stream-clients.mjs BASE_URL MODEL MAX_TOKENS [EFFORT]
// EFFORT: Ollama's think level and OpenAI's reasoning_effort (gpt-oss).
// Prints "ok NAME {json summary}" per case; throws (exit 1) on a failure.
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import OpenAI from 'openai';

const [base, model, maxArg, effort] = process.argv.slice(2);
const max = Number(maxArg);
const ollama = new Ollama({ host: base });
const openai = new OpenAI({ baseURL: base + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 900000 });
const messages = [{ role: 'user', content: 'Hi' }];

// A random-weight model may end early (end of generation), never before
// its first piece; each piece is at least one generated token.
function checkCounts(pieces, generated, reason) {
  assert.ok(pieces >= 1, 'no streamed piece');
  assert.ok(generated >= pieces && generated <= max, `${pieces} pieces, ${generated} tokens`);
  assert.ok(reason === 'stop' || (reason === 'length' && generated === max), `${reason} after ${generated}`);
}

const cases = {
  async 'ollama chat stream'() {
    const stream = await ollama.chat({ model, messages, stream: true, think: effort,
      options: { num_predict: max, temperature: 0 } });
    let pieces = 0, text = '', last;
    for await (const chunk of stream) {
      const piece = (chunk.message.thinking ?? '') + chunk.message.content;
      if (!chunk.done)
        pieces += piece.length > 0 ? 1 : 0;
      text += piece;
      last = chunk;
    }
    assert.equal(last.done, true);
    checkCounts(pieces, last.eval_count, last.done_reason);
    return { pieces, generated: last.eval_count, prompt: last.prompt_eval_count, text };
  },
  async 'openai chat stream'() {
    const stream = await openai.chat.completions.create({ model, messages, max_tokens: max, temperature: 0,
      stream: true, stream_options: { include_usage: true }, ...(effort ? { reasoning_effort: effort } : {}) });
    let pieces = 0, text = '', usage, reason;
    for await (const c of stream) {
      const d = c.choices[0]?.delta ?? {};
      const piece = (d.reasoning_content ?? '') + (d.content ?? '');
      pieces += piece.length > 0 ? 1 : 0;
      text += piece;
      reason = c.choices[0]?.finish_reason ?? reason;
      usage = c.usage ?? usage;
    }
    checkCounts(pieces, usage.completion_tokens, reason);
    return { pieces, generated: usage.completion_tokens, prompt: usage.prompt_tokens, text };
  },
};

for (const [name, run] of Object.entries(cases)) {
  const summary = await run();
  console.log('ok ' + name + ' ' + JSON.stringify(summary));
}
