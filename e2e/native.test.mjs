// The native endpoints, driven with curl as a shell user would.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { base, apiKey, parseSSE, waitIdle } from './env.mjs';

const run = promisify(execFile);
const auth = ['-H', `Authorization: Bearer ${apiKey}`];

async function curl(...args) {
  const { stdout } = await run('curl', ['-sS', '--max-time', '120', ...args], { maxBuffer: 64 << 20 });
  return stdout;
}

test('GET /health', async () => {
  const out = await curl('-w', '\n%{http_code}', `${base}/health`);
  const [body, code] = [out.slice(0, out.lastIndexOf('\n')), out.slice(out.lastIndexOf('\n') + 1)];
  assert.equal(code, '200');
  const h = JSON.parse(body);
  assert.equal(h.status, 'ok');
  assert.equal(h.device, 'cpu');
  assert.ok(h.kv.blocks_total > 0);
  assert.equal(typeof h.queue.waiting, 'number');
});

test('POST /execute streams started, token…, metrics, end', async () => {
  const out = await curl('-N', ...auth, '-H', 'X-Request-Id: e2e-exec', '-d',
    JSON.stringify({ prompt: 'The ring buffer', max_tokens: 8, logprobs: true, seed: 5 }), `${base}/execute`);
  const evs = parseSSE(out);
  const names = evs.map((e) => e.event);
  assert.equal(names[0], 'started');
  assert.deepEqual(names.slice(-2), ['metrics', 'end']);
  assert.ok(names.slice(1, -2).every((n) => n === 'token'));
  assert.equal(JSON.parse(evs[0].data).request_id, 'e2e-exec');
  const toks = evs.filter((e) => e.event === 'token').map((e) => JSON.parse(e.data)).filter((t) => t.id !== undefined);
  assert.equal(toks.length, 8);
  for (const t of toks) {
    assert.equal(typeof t.text, 'string');
    assert.ok(t.logprob <= 0);
    assert.ok(t.t_engine_ns > 0);
  }
  const m = JSON.parse(evs.at(-2).data);
  assert.equal(m.generated_tokens, 8);
  assert.ok(m.ttft_ms >= 0 && m.e2e_ms >= m.ttft_ms);
  assert.equal(JSON.parse(evs.at(-1).data).finish_reason, 'length');
});

test('POST /cancel ends a running /execute', async () => {
  const child = spawn('curl', ['-sSN', ...auth, '-H', 'X-Request-Id: e2e-cancel', '-d',
    JSON.stringify({ prompt: 'The ring buffer', max_tokens: 1500, ignore_eos: true }), `${base}/execute`]);
  let out = '';
  child.stdout.setEncoding('utf8');
  const exited = new Promise((resolve) => child.on('close', resolve));
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('event: token')) resolve();
    });
    child.on('error', reject);
  });
  const res = JSON.parse(await curl(...auth, '-X', 'POST', `${base}/cancel?request_id=e2e-cancel`));
  assert.deepEqual(res, { request_id: 'e2e-cancel', cancelled: true });
  assert.equal(await exited, 0);
  const evs = parseSSE(out);
  assert.equal(evs.at(-1).event, 'end');
  assert.equal(JSON.parse(evs.at(-1).data).finish_reason, 'cancelled');
  assert.ok(JSON.parse(evs.at(-2).data).generated_tokens < 1500);
  await waitIdle();

  const missing = await curl('-w', '\n%{http_code}', ...auth, '-d', '{"request_id":"nope"}', `${base}/cancel`);
  assert.ok(missing.endsWith('\n404'));
});

test('GET /metrics in Prometheus text format', async () => {
  const text = await curl(`${base}/metrics`);
  for (const name of [
    'ringlm:time_to_first_token_seconds_bucket', 'ringlm:inter_token_latency_seconds_bucket',
    'ringlm:e2e_request_latency_seconds_count', 'ringlm:prompt_tokens_total', 'ringlm:generation_tokens_total',
    'ringlm:num_requests_running', 'ringlm:num_requests_waiting', 'ringlm:kv_blocks_used', 'ringlm:kv_blocks_free',
    'ringlm:prefix_cache_hits_total', 'ringlm:step_time_seconds_bucket',
    // client_golang's Go and process collectors, and vLLM's names for routers and dashboards
    'go_goroutines', 'process_resident_memory_bytes',
    'vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc', 'vllm:request_success_total',
  ]) {
    assert.ok(text.includes(name), `missing ${name}`);
  }
  const gen = text.split('\n').find((l) => l.startsWith('ringlm:generation_tokens_total{'));
  assert.ok(Number(gen.split(' ').at(-1)) > 0);
});

test('malformed input gets a clear error and the server keeps serving', async () => {
  const status = async (...args) => {
    const out = await curl('-w', '\n%{http_code}', ...auth, ...args);
    const i = out.lastIndexOf('\n');
    return [Number(out.slice(i + 1)), out.slice(0, i)];
  };
  let [code, body] = await status('-d', '{"prompt": "x",', `${base}/v1/completions`);
  assert.equal(code, 400);
  assert.match(JSON.parse(body).error.message, /invalid JSON/);
  // 10 MB is over --max-body (and over what an argument may hold).
  const big = join(tmpdir(), `ringlm-e2e-big-${process.pid}.json`);
  writeFileSync(big, `{"prompt":"${'a'.repeat(10 << 20)}"}`);
  try {
    [code, body] = await status('--data-binary', `@${big}`, `${base}/v1/completions`);
  } finally {
    rmSync(big);
  }
  assert.match(JSON.parse(body).error.message, /exceeds the limit/);
  assert.equal(code, 413);
  [code] = await status('-d', '{"prompt":"ok","max_tokens":2}', `${base}/v1/completions`);
  assert.equal(code, 200);
  const unauth = await curl('-o', '/dev/null', '-w', '%{http_code}', '-H', 'Authorization: Bearer wrong', '-d', '{"prompt":"x"}', `${base}/execute`);
  assert.equal(unauth, '401');
});
