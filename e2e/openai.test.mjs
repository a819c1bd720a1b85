// ringlm driven by the official openai client: the API must look exactly
// like OpenAI's (and vLLM's) to it.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { client, waitIdle, base } from './env.mjs';

let model;
const prompt = 'The ring buffer';

before(async () => {
  const list = await client.models.list();
  assert.ok(list.data.length >= 1, 'no model listed');
  model = list.data[0].id;
  assert.equal(list.data[0].object, 'model');
});

test('models.retrieve', async () => {
  const m = await client.models.retrieve(model);
  assert.equal(m.id, model);
  await assert.rejects(client.models.retrieve('no-such-model'), (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
});

test('completion, not streaming', async () => {
  const r = await client.completions.create({ model, prompt, max_tokens: 12, seed: 7 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  assert.equal(typeof r.choices[0].text, 'string');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 12);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 12);
  assert.match(r.system_fingerprint, /^fp_/);
});

test('completion, streaming, equals the non-streamed text for the same seed', async () => {
  const want = (await client.completions.create({ model, prompt, max_tokens: 16, seed: 21 })).choices[0].text;
  const stream = await client.completions.create({
    model, prompt, max_tokens: 16, seed: 21, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.choices.length === 0) {
      usage = chunk.usage;
      continue;
    }
    text += chunk.choices[0].text;
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  assert.ok(chunks > 2, `only ${chunks} chunks: tokens are not streamed one by one`);
  assert.equal(text, want);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 16);
});

test('chat completion, streaming and not', async () => {
  const messages = [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Say something about rings.' },
  ];
  const r = await client.chat.completions.create({ model, messages, max_completion_tokens: 10, seed: 3 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));

  const stream = await client.chat.completions.create({ model, messages, max_completion_tokens: 10, seed: 3, stream: true });
  let text = '';
  let role = null;
  let finish = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    const d = chunk.choices[0].delta;
    role ??= d.role;
    text += d.content ?? '';
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  assert.equal(role, 'assistant');
  assert.equal(text, r.choices[0].message.content);
  assert.equal(finish, r.choices[0].finish_reason);
});

test('n = 2, streaming and not: seeds seed and seed+1', async () => {
  const one = async (seed) => (await client.completions.create({ model, prompt, max_tokens: 8, seed })).choices[0].text;
  const [a, b] = [await one(40), await one(41)];
  const r = await client.completions.create({ model, prompt, max_tokens: 8, seed: 40, n: 2 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  assert.deepEqual(r.choices.map((c) => c.text), [a, b]);

  const stream = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 6, n: 2, stream: true,
  });
  const texts = ['', ''];
  const finishes = [0, 0];
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      texts[c.index] += c.delta.content ?? '';
      if (c.finish_reason) finishes[c.index]++;
    }
  }
  assert.deepEqual(finishes, [1, 1]);
});

test('stop strings end the text before them with finish_reason stop', async () => {
  const full = (await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0 })).choices[0].text;
  const chars = Array.from(full).filter((c) => c !== '\uFFFD');
  assert.ok(chars.length >= 8, `greedy text too short: ${JSON.stringify(full)}`);
  const mid = Math.floor(Array.from(full).length / 2);
  const stop = Array.from(full).slice(mid, mid + 2).join('');
  const want = full.slice(0, full.indexOf(stop));
  const r = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, stop: ['never-appears', stop] });
  assert.equal(r.choices[0].text, want);
  assert.equal(r.choices[0].finish_reason, 'stop');

  const stream = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, stop, stream: true });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, want);
  assert.equal(finish, 'stop');
});

test('seeds reproduce', async () => {
  const run = (seed) => client.completions.create({ model, prompt, max_tokens: 20, seed, temperature: 1 });
  const [a, b, c] = await Promise.all([run(1234), run(1234), run(999)]);
  assert.equal(a.choices[0].text, b.choices[0].text);
  assert.notEqual(a.choices[0].text, c.choices[0].text);
  assert.equal(a.system_fingerprint, b.system_fingerprint);
});

test('logprobs of the chosen tokens', async () => {
  const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, logprobs: true });
  const content = r.choices[0].logprobs.content;
  assert.ok(content.length > 0);
  for (const t of content) {
    assert.equal(typeof t.token, 'string');
    assert.ok(t.logprob <= 0);
    assert.ok(Array.isArray(t.bytes));
    assert.deepEqual(t.top_logprobs, []);
  }
});

// checkTop checks one chat logprobs entry with n alternatives: OpenAI's
// {token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}, most
// likely first; greedy, the chosen token leads them.
function checkTop(t, n, greedy) {
  assert.equal(typeof t.token, 'string');
  assert.ok(t.logprob <= 0);
  assert.ok(Array.isArray(t.bytes));
  assert.equal(t.top_logprobs.length, n, JSON.stringify(t));
  let prev = 0;
  for (const a of t.top_logprobs) {
    assert.deepEqual(Object.keys(a).sort(), ['bytes', 'logprob', 'token']);
    assert.equal(typeof a.token, 'string');
    assert.ok(Array.isArray(a.bytes) && a.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256));
    assert.ok(a.logprob <= prev, `alternatives not sorted: ${JSON.stringify(t.top_logprobs)}`);
    if (greedy) assert.ok(t.logprob >= a.logprob, `greedy token below an alternative: ${JSON.stringify(t)}`);
    prev = a.logprob;
  }
  if (greedy) {
    assert.equal(t.top_logprobs[0].token, t.token);
    assert.equal(t.top_logprobs[0].logprob, t.logprob);
  }
}

test('chat top_logprobs: 3, streaming and not', async () => {
  const messages = [{ role: 'user', content: 'Say something about rings.' }];
  for (const temperature of [0, 1]) {
    const req = { model, messages, max_tokens: 8, temperature, seed: 5, logprobs: true, top_logprobs: 3 };
    const r = await client.chat.completions.create(req);
    const content = r.choices[0].logprobs.content;
    assert.ok(content.length > 0);
    for (const t of content) checkTop(t, 3, temperature === 0);

    const stream = await client.chat.completions.create({ ...req, stream: true });
    const streamed = [];
    for await (const chunk of stream) {
      for (const t of chunk.choices[0]?.logprobs?.content ?? []) {
        checkTop(t, 3, temperature === 0);
        streamed.push(t);
      }
    }
    assert.deepEqual(streamed, content);
  }
  await assert.rejects(
    client.chat.completions.create({ model, messages, logprobs: true, top_logprobs: 21 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'top_logprobs',
  );
});

test('completions logprobs: 2 gives top_logprobs objects', async () => {
  const r = await client.completions.create({ model, prompt, max_tokens: 6, temperature: 0, logprobs: 2 });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.top_logprobs.length, lp.tokens.length);
  lp.top_logprobs.forEach((m, i) => {
    const keys = Object.keys(m);
    assert.ok(keys.length >= 1 && keys.length <= 3, JSON.stringify(m));
    assert.equal(m[lp.tokens[i]], lp.token_logprobs[i]);
    for (const v of Object.values(m)) assert.ok(v <= lp.token_logprobs[i]);
  });
});

test('an aborted stream cancels its request and frees its KV blocks', async () => {
  // Counted in /metrics with finish reason abort, as vLLM counts it.
  const aborted = async () => {
    const text = await (await fetch(`${base}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('vllm:request_success_total{') && l.includes('finished_reason="abort"'));
    return Number(line.split(' ').at(-1));
  };
  const before = await aborted();
  const stream = await client.completions.create({ model, prompt, max_tokens: 1500, ignore_eos: true, stream: true });
  let n = 0;
  for await (const chunk of stream) {
    if (++n === 5) {
      const h = await (await fetch(`${base}/health`)).json();
      assert.ok(h.kv.blocks_used > 0, 'no KV blocks held by the running request');
      stream.controller.abort();
      break;
    }
  }
  assert.equal(n, 5);
  const idle = await waitIdle();
  assert.equal(idle.kv.blocks_used, 0);
  // The writer counts it just after cancelling, so the blocks may be free first.
  let after = await aborted();
  for (let i = 0; i < 100 && after === before; i++) {
    await new Promise((r) => setTimeout(r, 20));
    after = await aborted();
  }
  assert.equal(after, before + 1);
  // The server keeps serving.
  const r = await client.completions.create({ model, prompt, max_tokens: 2 });
  assert.equal(r.choices.length, 1);
});

test('errors come back as OpenAI errors with the right status', async () => {
  await assert.rejects(
    client.completions.create({ model: 'gpt-imaginary', prompt, max_tokens: 2 }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'model_not_found',
  );
  await assert.rejects(
    client.completions.create({ model, prompt, max_tokens: -1 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'max_tokens' && /at least 1/.test(e.message),
  );
  await assert.rejects(
    client.completions.create({ model, prompt, temperature: 'warm' }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature',
  );
  const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'wrong-key', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});
