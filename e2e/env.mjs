// Shared setup: the server under test is started by e2e/run.sh, which
// passes its address and API key in the environment.
import OpenAI from 'openai';

export const base = process.env.RINGLM_URL;
export const apiKey = process.env.RINGLM_API_KEY ?? '';
if (!base) {
  throw new Error('RINGLM_URL is not set: run the tests with `make e2e` (e2e/run.sh starts the server)');
}

export const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 120_000 });

export async function health() {
  const r = await fetch(`${base}/health`);
  return { status: r.status, body: await r.json() };
}

// waitIdle polls /health until no request runs and no KV block is held.
export async function waitIdle(ms = 30_000) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    last = (await health()).body;
    if (last.queue.running === 0 && last.queue.waiting === 0 && last.kv.blocks_used === 0) return last;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`server not idle after ${ms} ms: ${JSON.stringify(last)}`);
}

// parseSSE splits an SSE body into {event, data} records.
export function parseSSE(text) {
  return text
    .split('\n\n')
    .filter((b) => b.length > 0)
    .map((block) => {
      const ev = { event: '', data: '' };
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) ev.event = line.slice(7);
        else if (line.startsWith('data: ')) ev.data = line.slice(6);
        else throw new Error(`bad SSE line ${JSON.stringify(line)}`);
      }
      return ev;
    });
}
