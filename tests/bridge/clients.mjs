// The official npm clients `ollama` and `openai` against npullm-bridge.
// Usage: node clients.mjs BASE_URL IMAGE_PNG [CASE,CASE...]
// Prints "ok NAME" per case; throws (exit 1) on the first failure.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import Ajv from 'ajv';
import { Ollama } from 'ollama';
import OpenAI from 'openai';

const [base, imagePath, only] = process.argv.slice(2);
const image = readFileSync(imagePath).toString('base64');
const ollama = new Ollama({ host: base });
const openai = new OpenAI({ baseURL: base + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const few = { num_predict: 4 };
const user = (content) => [{ role: 'user', content }];

// Structured output: a random-weight model gives valid JSON only because
// the grammar holds it to the schema (bounded, so it closes in the tokens).
const ajv = new Ajv({ strict: false });
const personSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 8 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, maxItems: 3 },
    member: { type: 'boolean' },
  },
  required: ['name', 'age', 'tags', 'member'],
  additionalProperties: false,
};
const validPerson = ajv.compile(personSchema);

function assertValid(text) {
  const value = JSON.parse(text);
  assert.ok(validPerson(value), text + ': ' + ajv.errorsText(validPerson.errors));
}

// Tool calls: with random weights only tool_choice required / a named
// function (enforced by a grammar) makes a call; its arguments must
// validate against the function's parameters.
const addParams = {
  type: 'object',
  properties: { a: { type: 'integer', minimum: 0, maximum: 99 }, b: { type: 'integer', minimum: 0, maximum: 99 } },
  required: ['a', 'b'],
  additionalProperties: false,
};
const weatherParams = {
  type: 'object',
  properties: { city: { type: 'string', minLength: 1, maxLength: 8 }, unit: { enum: ['c', 'f'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'add', description: 'Adds two numbers', parameters: addParams } },
  { type: 'function', function: { name: 'get_weather', description: 'The weather', parameters: weatherParams } },
];
const validArgs = { add: ajv.compile(addParams), get_weather: ajv.compile(weatherParams) };

function assertCall(name, args) {
  const valid = validArgs[name];
  assert.ok(valid, 'a tool that was offered: ' + name);
  const value = typeof args === 'string' ? JSON.parse(args) : args;
  assert.ok(valid(value), JSON.stringify(value) + ': ' + ajv.errorsText(valid.errors));
}

function ok(name) {
  console.log('ok ' + name);
}

async function collect(stream, piece) {
  const parts = [];
  let last;
  for await (const chunk of stream) {
    parts.push(piece(chunk));
    last = chunk;
  }
  return { text: parts.join(''), last, n: parts.length };
}

const cases = {
  async 'ollama version'() {
    const v = await ollama.version();
    assert.match(v.version, /^\d+\.\d+\.\d+$/);
  },
  async 'ollama list'() {
    const { models } = await ollama.list();
    const names = models.map((m) => m.name);
    assert.ok(names.includes('tiny:latest'), names.join(','));
    assert.ok(names.includes('vision:latest'), names.join(','));
    assert.ok(!names.some((n) => n.startsWith('broken')), 'an unsupported model is not offered');
  },
  async 'ollama show'() {
    const v = await ollama.show({ model: 'vision' });
    assert.deepEqual(v.capabilities, ['completion', 'vision']);
    const t = await ollama.show({ model: 'tiny:latest' });
    assert.deepEqual(t.capabilities, ['completion']);
  },
  async 'ollama chat stream'() {
    const stream = await ollama.chat({ model: 'tiny', messages: user('Hello'), stream: true, options: few });
    const r = await collect(stream, (c) => c.message.content);
    assert.equal(r.last.done, true);
    assert.equal(r.last.done_reason, 'length');
    assert.equal(r.last.eval_count, 4);
    assert.ok(r.last.prompt_eval_count > 0);
    assert.ok(r.text.length > 0);
  },
  async 'ollama generate stream'() {
    const stream = await ollama.generate({ model: 'tiny:latest', prompt: 'Once', stream: true, options: few });
    const r = await collect(stream, (c) => c.response);
    assert.equal(r.last.done, true);
    assert.equal(r.last.eval_count, 4);
    assert.ok(r.n >= 2);
  },
  async 'ollama non-streaming'() {
    const g = await ollama.generate({ model: 'tiny', prompt: 'Once', options: { ...few, seed: 7, temperature: 0.8 } });
    const g2 = await ollama.generate({ model: 'tiny', prompt: 'Once', options: { ...few, seed: 7, temperature: 0.8 } });
    assert.equal(g.done, true);
    assert.equal(g.response, g2.response, 'same seed, same text');
    const c = await ollama.chat({ model: 'tiny', messages: user('Hi'), options: few });
    assert.equal(c.message.role, 'assistant');
    assert.equal(c.done_reason, 'length');
  },
  async 'ollama image'() {
    const r = await ollama.generate({ model: 'vision', prompt: 'Describe it.', images: [image], options: few });
    assert.equal(r.done, true);
    assert.ok(r.prompt_eval_count > 16, 'the image positions count in the prompt');
    const c = await ollama.chat({ model: 'vision', messages: [{ role: 'user', content: 'What?', images: [image] }],
      options: few });
    assert.equal(c.done, true);
  },
  async 'ollama format schema'() {
    const opts = { num_predict: 96, temperature: 0 };
    const c = await ollama.chat({ model: 'tiny', messages: user('Who?'), format: personSchema, options: opts });
    assert.equal(c.done_reason, 'stop');
    assertValid(c.message.content);
    const stream = await ollama.generate({ model: 'tiny', prompt: 'Who?', format: personSchema, stream: true,
      options: { num_predict: 96, seed: 3, temperature: 0.9 } });
    const r = await collect(stream, (p) => p.response);
    assert.equal(r.last.done_reason, 'stop');
    assertValid(r.text);
    const j = await ollama.generate({ model: 'tiny', prompt: 'Who?', format: 'json', options: { num_predict: 8 } });
    assert.ok(/^\s*[[{"\-0-9tfn]/.test(j.response), j.response);
  },
  async 'ollama chat tools'() {
    // no tool_choice in Ollama's API: a random model calls or not; the
    // tools and a tool round trip are taken
    const messages = [...user('What is 2 + 3?'),
      { role: 'assistant', content: '', tool_calls: [{ function: { name: 'add', arguments: { a: 2, b: 3 } } }] },
      { role: 'tool', content: '5', tool_name: 'add' }];
    const r = await ollama.chat({ model: 'tiny', messages, tools, options: few });
    assert.equal(r.done, true);
    for (const c of r.message.tool_calls ?? []) assertCall(c.function.name, c.function.arguments);
    const stream = await ollama.chat({ model: 'tiny', messages: user('Hi'), tools, stream: true, options: few });
    const s = await collect(stream, (c) => c.message.content);
    assert.equal(s.last.done, true);
  },
  async 'ollama think'() {
    // the template opens <think>: a random model's tokens are thinking
    const c = await ollama.chat({ model: 'think', messages: user('2 + 2?'), think: true, options: few });
    assert.ok(c.message.thinking.length > 0);
    assert.equal(c.message.content, '');
    const stream = await ollama.generate({ model: 'think', prompt: '2 + 2?', think: true, stream: true, options: few });
    const r = await collect(stream, (p) => p.thinking ?? '');
    assert.ok(r.text.length > 0);
    const off = await ollama.chat({ model: 'think', messages: user('2 + 2?'), think: false, options: few });
    assert.ok(off.message.content.length > 0);
    assert.ok(!off.message.thinking);
  },
  async 'ollama abort'() {
    const stream = await ollama.chat({ model: 'tiny', messages: user('Go on'), stream: true,
      options: { num_predict: 3000 } });
    let n = 0;
    try {
      for await (const chunk of stream) {
        if (++n === 2) stream.abort();
        assert.ok(!chunk.done, 'aborted before the end');
      }
      assert.fail('the stream was not aborted');
    } catch (e) {
      assert.equal(e.name, 'AbortError', String(e));
    }
  },
  async 'ollama unknown model'() {
    await assert.rejects(ollama.chat({ model: 'nope:1b', messages: user('x') }), (e) => e.status_code === 404);
  },
  async 'openai models'() {
    const ids = [];
    for await (const m of openai.models.list()) ids.push(m.id);
    assert.ok(ids.includes('tiny') && ids.includes('vision'), ids.join(','));
    const m = await openai.models.retrieve('tiny');
    assert.equal(m.id, 'tiny');
  },
  async 'openai chat stream'() {
    const stream = await openai.chat.completions.create({ model: 'tiny', messages: user('Hello'), stream: true,
      max_tokens: 4, stream_options: { include_usage: true } });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    const usage = chunks[chunks.length - 1];
    assert.deepEqual(usage.choices, []);
    assert.equal(usage.usage.completion_tokens, 4);
    const end = chunks[chunks.length - 2];
    assert.equal(end.choices[0].finish_reason, 'length');
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    assert.ok(text.length > 0);
  },
  async 'openai non-streaming'() {
    const r = await openai.chat.completions.create({ model: 'tiny', messages: user('Hi'),
      max_completion_tokens: 3, seed: 5, temperature: 0.7, top_p: 0.9 });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 3);
    const c = await openai.completions.create({ model: 'tiny', prompt: 'Once upon', max_tokens: 3 });
    assert.equal(c.object, 'text_completion');
    assert.equal(c.usage.completion_tokens, 3);
    assert.equal(typeof c.choices[0].text, 'string');
  },
  async 'openai image'() {
    const r = await openai.chat.completions.create({ model: 'vision', max_tokens: 3, messages: [{ role: 'user',
      content: [{ type: 'text', text: 'Describe it.' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,' + image } }] }] });
    assert.ok(r.usage.prompt_tokens > 16);
  },
  async 'openai response_format json_schema'() {
    const response_format = { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: personSchema } };
    const r = await openai.chat.completions.create({ model: 'tiny', messages: user('Who?'), max_tokens: 96,
      temperature: 0, response_format });
    assert.equal(r.choices[0].finish_reason, 'stop');
    assertValid(r.choices[0].message.content);
    const stream = await openai.chat.completions.create({ model: 'tiny', messages: user('Who?'), max_tokens: 96,
      seed: 11, temperature: 1, response_format, stream: true });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    assert.equal(chunks[chunks.length - 1].choices[0].finish_reason, 'stop');
    assertValid(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''));
    const o = await openai.chat.completions.create({ model: 'tiny', messages: user('JSON?'), max_tokens: 8,
      response_format: { type: 'json_object' } });
    assert.ok(/^\s*[[{"\-0-9tfn]/.test(o.choices[0].message.content), o.choices[0].message.content);
    await assert.rejects(openai.chat.completions.create({ model: 'tiny', messages: user('x'), response_format: {
      type: 'json_schema', json_schema: { name: 'bad', schema: { type: 'object', properties: { a: { type: 'intgr' } } } } } }),
    (e) => e.status === 400 && /properties\/a\/type/.test(e.message));
  },
  async 'openai tool_choice required'() {
    const r = await openai.chat.completions.create({ model: 'tiny', messages: user('What is 2 + 3?'), tools,
      tool_choice: 'required', max_tokens: 96, temperature: 0 });
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    const calls = r.choices[0].message.tool_calls;
    assert.ok(calls.length >= 1 && calls.length <= 8, calls.length); // the generic family writes several
    for (const c of calls) {
      assert.equal(c.type, 'function');
      assert.ok(c.id);
      assertCall(c.function.name, c.function.arguments);
    }
  },
  async 'openai parallel tool calls'() {
    // required and a named function allow one call or more (up to 8) in a
    // family that writes several; parallel_tool_calls false allows one
    const counts = { parallel: [], single: [] };
    for (let seed = 1; seed <= 4; seed++) {
      for (const [kind, choice] of [['required', 'required'], ['named', { type: 'function', function: { name: 'add' } }]]) {
        for (const parallel of [true, false]) {
          const r = await openai.chat.completions.create({ model: 'tiny', messages: user('Add 2 and 3, twice.'), tools,
            tool_choice: choice, parallel_tool_calls: parallel, max_tokens: 400, seed, temperature: 1 });
          assert.equal(r.choices[0].finish_reason, 'tool_calls', kind);
          const calls = r.choices[0].message.tool_calls;
          for (const c of calls) {
            if (kind === 'named') assert.equal(c.function.name, 'add');
            assertCall(c.function.name, c.function.arguments);
          }
          assert.equal(new Set(calls.map((c) => c.id)).size, calls.length, 'ids differ');
          counts[parallel ? 'parallel' : 'single'].push(calls.length);
        }
      }
    }
    assert.ok(counts.single.every((n) => n === 1), JSON.stringify(counts));
    assert.ok(counts.parallel.every((n) => n >= 1 && n <= 8), JSON.stringify(counts));
    assert.ok(counts.parallel.some((n) => n >= 2), JSON.stringify(counts));
  },
  async 'openai named tool streamed'() {
    const stream = await openai.chat.completions.create({ model: 'tiny', messages: user('Weather in Oslo?'), tools,
      tool_choice: { type: 'function', function: { name: 'get_weather' } }, parallel_tool_calls: false,
      max_tokens: 96, seed: 5, temperature: 1, stream: true });
    const calls = [];
    let finish;
    for await (const c of stream) {
      for (const d of c.choices[0]?.delta?.tool_calls ?? []) {
        // as OpenAI streams them: the first delta of a call has its id and
        // name, the arguments are concatenated over the deltas
        if (!calls[d.index]) calls[d.index] = { id: d.id, name: d.function.name, arguments: '' };
        calls[d.index].arguments += d.function.arguments ?? '';
      }
      finish = c.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(finish, 'tool_calls');
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, 'get_weather');
    assertCall('get_weather', calls[0].arguments);
  },
  async 'openai tool round trip'() {
    const messages = user('What is 2 + 3?');
    const r = await openai.chat.completions.create({ model: 'tiny', messages, tools,
      tool_choice: { type: 'function', function: { name: 'add' } }, parallel_tool_calls: false, max_tokens: 96,
      temperature: 0 });
    const call = r.choices[0].message.tool_calls[0];
    messages.push(r.choices[0].message);
    messages.push({ role: 'tool', tool_call_id: call.id, content: '5' });
    const answer = await openai.chat.completions.create({ model: 'tiny', messages, tools, max_tokens: 4,
      temperature: 0 });
    assert.ok(['stop', 'length', 'tool_calls'].includes(answer.choices[0].finish_reason));
    assert.ok(answer.usage.prompt_tokens > r.usage.prompt_tokens);
  },
  async 'openai reasoning_content'() {
    const r = await openai.chat.completions.create({ model: 'think', messages: user('2 + 2?'), max_tokens: 4 });
    assert.ok(r.choices[0].message.reasoning_content.length > 0);
    const stream = await openai.chat.completions.create({ model: 'think', messages: user('2 + 2?'), max_tokens: 4,
      stream: true });
    let thinking = '';
    for await (const c of stream) thinking += c.choices[0]?.delta?.reasoning_content ?? '';
    assert.ok(thinking.length > 0);
  },
  async 'openai abort'() {
    const stream = await openai.chat.completions.create({ model: 'tiny', messages: user('Go on'), stream: true,
      max_tokens: 3000 });
    let n = 0;
    for await (const c of stream) {
      assert.equal(c.choices[0].finish_reason, null, 'aborted before the end');
      if (++n === 2) {
        stream.controller.abort();
        break;
      }
    }
  },
  async 'openai errors'() {
    await assert.rejects(openai.chat.completions.create({ model: 'nope', messages: user('x') }),
      (e) => e.status === 404 && /nope/.test(e.message));
    await assert.rejects(openai.embeddings.create({ model: 'tiny', input: 'x' }), (e) => e.status === 400);
  },
  async 'concurrent streams'() {
    const runs = [];
    for (let i = 0; i < 3; i++) {
      runs.push(ollama.chat({ model: 'tiny', messages: user('Hi ' + i), stream: true, options: few })
        .then((s) => collect(s, (c) => c.message.content)).then((r) => r.last.eval_count));
      runs.push(openai.chat.completions.create({ model: 'tiny2', messages: user('Yo ' + i), stream: true,
        max_tokens: 4, stream_options: { include_usage: true } })
        .then(async (s) => { let u; for await (const c of s) u = c.usage ?? u; return u.completion_tokens; }));
    }
    assert.deepEqual(await Promise.all(runs), [4, 4, 4, 4, 4, 4]);
  },
};

for (const [name, run] of Object.entries(cases)) {
  if (only && !only.split(',').includes(name))
    continue;
  await run();
  ok(name);
}
