import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MODEL,
  NIXL,
  startCoordinatorProcess,
  startSim,
  stopAllSpawned,
  type CoordinatorHandle,
} from './e2e-cluster.js';

/**
 * The one-instance endpoints through a coordinator (direct mode) on `motor sim` engines: a vLLM P/D
 * pair, where they run on the decode alone, and a fleet of a scripted union engine plus a decode
 * simulator, where the union is tried first and a failure before the answer is retried on the decode.
 */
const KEY = 'one-instance-key';
let pd: CoordinatorHandle;
let mixed: CoordinatorHandle;
let prefillUrl: string;
let decodeUrl: string;

/** The scripted union engine: records each POST's raw bytes and answers what `reply` says. */
const fake = {
  server: null as Server | null,
  posts: [] as { path: string; bytes: Buffer }[],
  reply: { status: 200, body: '{}' },
};

async function startFake(): Promise<string> {
  fake.server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST') {
        fake.posts.push({ path: req.url ?? '', bytes: Buffer.concat(chunks) });
        res.writeHead(fake.reply.status, { 'content-type': 'application/json' });
        return res.end(fake.reply.body);
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: MODEL, object: 'model' }] }));
    });
  });
  await new Promise<void>((r) => fake.server!.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(fake.server.address() as AddressInfo).port}`;
}

async function ready(c: CoordinatorHandle): Promise<void> {
  // /ready waits for discovery; event-driven: poll the coordinator's own answer, bounded by the test timeout
  while ((await fetch(`${c.url}/ready`)).status !== 200) await new Promise((r) => setImmediate(r));
}

beforeAll(async () => {
  try {
    const [p, d, f] = await Promise.all([
      startSim({ role: 'prefill' }),
      startSim({ role: 'decode' }),
      startFake(),
    ]);
    prefillUrl = p.url;
    decodeUrl = d.url;
    const direct = { mode: 'direct', models: [MODEL], kvTransferConfig: NIXL };
    [pd, mixed] = await Promise.all([
      startCoordinatorProcess({
        server: { apiKeys: [KEY], maxBodyBytes: 65_536 },
        instances: [
          { id: 'P', url: p.url, role: 'prefill', ...direct },
          { id: 'D', url: d.url, role: 'decode', ...direct },
        ],
      }),
      startCoordinatorProcess({
        // no breaker: the scripted engine's 503s must not take it out between cases; the union
        // fallback makes the fleet ready for chat (no prefill to pair the decode with)
        scheduling: { circuitBreaker: { enabled: false } },
        dispatch: { fallbackToSingle: true },
        instances: [
          { id: 'U', url: f, role: 'union', mode: 'direct', models: [MODEL] },
          { id: 'D', url: d.url, role: 'decode', ...direct },
        ],
      }),
    ]);
    await Promise.all([ready(pd), ready(mixed)]);
  } catch (err) {
    await stopAllSpawned();
    throw err;
  }
}, 120_000);

afterAll(async () => {
  await stopAllSpawned();
  await new Promise((r) => fake.server?.close(r));
});

const post = (base: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}`, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

/** Paths a simulator received (its own record, every route). */
async function seen(url: string): Promise<string[]> {
  const r = await fetch(`${url}/debug/recorded`);
  return ((await r.json()) as { method: string; path: string }[]).map((x) => `${x.method} ${x.path}`);
}

describe('one-instance endpoints on a P/D pair', () => {
  it('openai embeddings.create: answered by the decode alone, vectors as the engine computes them', async () => {
    const client = new OpenAI({ baseURL: `${pd.url}/v1`, apiKey: KEY, maxRetries: 0 });
    const got = await client.embeddings.create({
      model: MODEL,
      input: ['red apple', 'blue sky'],
      dimensions: 8,
    });
    const direct = (await (
      await post(decodeUrl, '/v1/embeddings', {
        model: MODEL,
        input: ['red apple', 'blue sky'],
        dimensions: 8,
      })
    ).json()) as { data: { embedding: number[] }[] };
    expect(got.data.map((d) => d.embedding)).toEqual(direct.data.map((d) => d.embedding));
    expect(await seen(decodeUrl)).toContain('POST /v1/embeddings');
    expect(await seen(prefillUrl)).not.toContain('POST /v1/embeddings');
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['/tokenize', { model: MODEL, prompt: 'Hello, world' }, 'tokens'],
    ['/detokenize', { model: MODEL, tokens: [9906, 11, 1917] }, 'prompt'],
    ['/rerank', { model: MODEL, query: 'red apple', documents: ['blue sky', 'red apple'] }, 'results'],
    ['/v1/rerank', { query: 'red apple', documents: ['red', 'apple pie'], top_n: 1 }, 'results'],
    ['/v2/rerank', { model: MODEL, query: 'a', documents: ['a', 'b'] }, 'results'],
    ['/score', { model: MODEL, text_1: 'red apple', text_2: ['red apple', 'sky'] }, 'data'],
    ['/v1/score', { model: MODEL, queries: 'x', documents: ['x y'] }, 'data'],
    ['/pooling', { model: MODEL, input: 'hello', dimensions: 4 }, 'data'],
  ])('%s: the engine answer relayed', async (path, body, field) => {
    const [viaMotor, direct] = await Promise.all([post(pd.url, path, body), post(decodeUrl, path, body)]);
    expect(viaMotor.status).toBe(200);
    expect(viaMotor.headers.get('x-request-id')).toMatch(/^req-/);
    const [a, b] = (await Promise.all([viaMotor.json(), direct.json()])) as Record<string, unknown>[];
    expect(a![field]).toEqual(b![field]);
  });

  it('an engine 4xx is relayed with its status and body', async () => {
    const body = { model: MODEL, documents: ['x'] };
    const [viaMotor, direct] = await Promise.all([
      post(pd.url, '/rerank', body),
      post(decodeUrl, '/rerank', body),
    ]);
    expect(viaMotor.status).toBe(400);
    expect(await viaMotor.text()).toBe(await direct.text());
  });

  it.each<[string, () => Promise<Response>, number, string]>([
    [
      'no API key',
      () => post(pd.url, '/tokenize', { prompt: 'a' }, { authorization: '' }),
      401,
      'unauthorized',
    ],
    [
      'an internal field',
      () => post(pd.url, '/pooling', { input: 'a', kv_transfer_params: {} }),
      400,
      'invalid_request',
    ],
    [
      'a body over server.maxBodyBytes',
      () => post(pd.url, '/v1/embeddings', { input: 'x'.repeat(70_000) }),
      413,
      'body_too_large',
    ],
    [
      'an unknown model',
      () => post(pd.url, '/score', { model: 'nope', text_1: 'a', text_2: 'b' }),
      404,
      'model_not_found',
    ],
    ['not JSON', () => post(pd.url, '/rerank', '{"query":'), 400, 'invalid_request'],
  ])('%s is refused as for chat', async (_n, send, status, code) => {
    const r = await send();
    expect(r.status).toBe(status);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe(code);
  });

  it('GET is 405 with Allow', async () => {
    const r = await fetch(`${pd.url}/v1/rerank`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(r.status).toBe(405);
    expect(r.headers.get('allow')).toBe('POST');
  });
});

describe('one-instance endpoints on a union + decode fleet', () => {
  it('the union goes first; the body and the answer pass as bytes', async () => {
    fake.posts = [];
    fake.reply = { status: 200, body: '{"object" : "list",  "data":[ ]}' };
    const sent = '{"model":"motor-sim-7b",  "input" : "hi", "extra": {"kept": true}}';
    const r = await post(mixed.url, '/v1/embeddings', sent);
    expect(r.status).toBe(200);
    expect(await r.text()).toBe(fake.reply.body);
    expect(fake.posts.map((p) => [p.path, p.bytes.toString()])).toEqual([['/v1/embeddings', sent]]);
  });

  it('a 503 before the answer is retried on the next role', async () => {
    fake.posts = [];
    fake.reply = { status: 503, body: '{"error":{"message":"busy"}}' };
    const r = await post(mixed.url, '/tokenize', { model: MODEL, prompt: 'Hello' });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { count: number }).count).toBeGreaterThan(0);
    expect(fake.posts.map((p) => p.path)).toEqual(['/tokenize']);
  });
});
