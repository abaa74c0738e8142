import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BenchRun, discoverModel, endpointOf, type RunOptions } from './runner.js';
import { createWorkload } from './workloads.js';

/**
 * An in-process OpenAI-ish server whose behaviour is picked by the model name: `ok` streams 3
 * tokens with usage, `http500`, `sseError`, `truncated` (no [DONE]), `reset` (socket destroyed
 * mid-stream) and `nonstream` answers.
 */
let server: Server;
let base: string;
const bodies: Array<Record<string, unknown>> = [];
/** performance.now() at each request's arrival, in the order of `bodies`. */
const arrivedAt: number[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'ok' }] }));
      return;
    }
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw) as { model: string; stream?: boolean };
      bodies.push(body);
      arrivedAt.push(performance.now());
      const frame = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;
      const tok = (t: string): string => frame({ choices: [{ index: 0, delta: { content: t } }] });
      const usage = frame({
        choices: [],
        usage: { prompt_tokens: 10, completion_tokens: 3, prompt_tokens_details: { cached_tokens: 4 } },
      });
      switch (body.model) {
        case 'http500':
          res.writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: 'boom', type: 'server_error' } }));
          return;
        case 'nonstream':
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              choices: [{ message: { content: 'a b c' } }],
              usage: { prompt_tokens: 10, completion_tokens: 3 },
            }),
          );
          return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(tok('a'));
      if (body.model === 'reset') {
        setTimeout(() => res.socket?.destroy(), 5);
        return;
      }
      setTimeout(() => {
        if (body.model === 'sseError') {
          res.end(
            frame({ error: { message: 'decode leg failed', type: 'server_error' } }) + 'data: [DONE]\n\n',
          );
          return;
        }
        res.write(tok('b') + tok('c'));
        if (body.model === 'truncated') return void res.end();
        res.end(usage + 'data: [DONE]\n\n');
      }, 5);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

afterAll(() => new Promise<void>((r) => server.close(() => r())));

function options(model: string, over: Partial<RunOptions> = {}): RunOptions {
  return {
    target: { name: model, url: base },
    model,
    workload: createWorkload('short-chat', { seed: 1, maxTokens: 3 }),
    load: { kind: 'closed', concurrency: 2 },
    stop: { requests: 6 },
    stream: true,
    seed: 1,
    timeoutMs: 5_000,
    ...over,
  };
}

describe('BenchRun', () => {
  it('measures a good stream: TTFT, ITL, tokens and the prefix-cache hit rate', async () => {
    bodies.length = 0;
    const r = await new BenchRun(options('ok')).run();
    expect(r).toMatchObject({
      requests: 6,
      ok: 6,
      failed: 0,
      outputTokens: 18,
      promptTokens: 60,
      cachedTokens: 24,
    });
    expect(r.prefixCacheHitRate).toBeCloseTo(0.4);
    expect(r.ttftMs.count).toBe(6);
    expect(r.itlMs.count).toBe(12); // a→b (≈5 ms) and b→c (same packet, ≈0 ms) per request
    expect(r.ttftMs.p50).toBeLessThanOrEqual(r.e2eMs.p50);
    expect(r.errors).toEqual({});
    // The request asks for usage in the stream and carries the workload's messages.
    expect(bodies[0]).toMatchObject({
      model: 'ok',
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 3,
    });
  });

  it.each([
    ['http500', 'http_500', 'boom'],
    ['sseError', 'sse_error', 'decode leg failed'],
    ['truncated', 'truncated', 'stream ended without [DONE] after 3 chunks'],
  ])('counts %s as %s', async (model, kind, example) => {
    const r = await new BenchRun(options(model)).run();
    expect(r).toMatchObject({ ok: 0, failed: 6, errors: { [kind]: 6 }, errorExamples: { [kind]: example } });
  });

  it('counts a connection broken mid-stream as truncated', async () => {
    const r = await new BenchRun(options('reset', { stop: { requests: 2 } })).run();
    expect(r.errors).toEqual({ truncated: 2 });
  });

  it('counts a refused connection as a connection error', async () => {
    const closed = createServer();
    await new Promise<void>((res) => closed.listen(0, '127.0.0.1', res));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((res) => closed.close(() => res()));
    const r = await new BenchRun(
      options('ok', { target: { name: 'down', url: `http://127.0.0.1:${port}/v1` }, stop: { requests: 3 } }),
    ).run();
    expect(r.errors).toEqual({ connection: 3 });
    expect(r.errorExamples.connection).toMatch(/ECONNREFUSED/);
  });

  it('non-stream: TTFT equals end-to-end latency, tokens from usage', async () => {
    const r = await new BenchRun(options('nonstream', { stream: false })).run();
    expect(r).toMatchObject({ ok: 6, outputTokens: 18 });
    expect(r.ttftMs.p50).toBe(r.e2eMs.p50);
    expect(r.itlMs.count).toBe(0);
  });

  it('open loop: sends exactly --requests at about the requested rate; warm-up is not counted', async () => {
    bodies.length = 0;
    const t0 = performance.now();
    const r = await new BenchRun(
      options('ok', { load: { kind: 'open', rate: 200 }, stop: { requests: 40 }, warmup: { requests: 5 } }),
    ).run();
    expect(r.requests).toBe(40);
    expect(bodies).toHaveLength(45);
    expect(performance.now() - t0).toBeLessThan(5_000);
  });

  it('trace: sends request i at arrivalsMs[i] after the start, whatever the answers, up to --requests', async () => {
    bodies.length = arrivedAt.length = 0;
    const load = { kind: 'trace', arrivalsMs: [0, 0, 150, 300] } as const;
    const t0 = performance.now();
    const r = await new BenchRun(options('ok', { load, stop: {} })).run();
    expect(r.requests).toBe(4);
    const at = arrivedAt.map((t) => t - t0);
    // lower bounds only: on a loaded machine the server may see any request late
    expect(at[2]).toBeGreaterThanOrEqual(149);
    expect(at[3]).toBeGreaterThanOrEqual(299);
    expect((await new BenchRun(options('ok', { load, stop: { requests: 2 } })).run()).requests).toBe(2);
  });

  it('stops a closed loop at --duration', async () => {
    const r = await new BenchRun(options('ok', { stop: { durationMs: 300 } })).run();
    expect(r.ok).toBeGreaterThan(2);
    expect(r.durationS).toBeLessThan(1.5);
  });

  it('discovers the model and splits base URLs', async () => {
    expect(await discoverModel(base)).toBe('ok');
    expect(endpointOf('http://h:1/v1/')).toEqual({ origin: 'http://h:1', basePath: '/v1' });
    expect(endpointOf('http://h:1')).toEqual({ origin: 'http://h:1', basePath: '/v1' });
    expect(endpointOf('https://h/openai/v1')).toEqual({ origin: 'https://h', basePath: '/openai/v1' });
  });
});
