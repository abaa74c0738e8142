import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEngineFixture } from '../../test/fixtures/engines/load.js';
import { createLogger } from '../common/logger.js';
import type { SimEngine } from './options.js';
import { startSimulator, type RunningSimulator } from './server.js';
import { chatBody, http, idleLedger, post, sseEvents } from './testing/index.js';

const log = createLogger('test', 'silent');

/** Keys and value kinds, recursively: what a fixture pins (its texts are illustrative). */
function shape(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(shape);
  if (typeof v === 'object' && v !== null)
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, shape(x)]));
  return v === null ? null : typeof v;
}

const streamFrames = (fixture: string): unknown[] =>
  (loadEngineFixture(fixture).frames as string[]).map((f) => (f === '[DONE]' ? f : JSON.parse(f)));

describe('--fault-stream-error-first: the engine’s generation error, first (fixtures)', () => {
  const sims = new Map<SimEngine, RunningSimulator>();
  beforeAll(async () => {
    for (const engine of ['vllm', 'sglang'] as const)
      sims.set(engine, await startSimulator({ port: 0, engine, timeScale: 0 }, log));
  });
  afterAll(async () => {
    await Promise.all([...sims.values()].map((s) => s.close()));
  });
  const arm = (engine: SimEngine, n = 1) =>
    post(sims.get(engine)!.url, '/debug/faults', { stream_error_first: n });

  it.each([
    ['vllm', '/v1/chat/completions', 'vllm/openai/stream-error-frame.json'],
    ['vllm', '/v1/completions', 'vllm/openai/stream-error-frame.json'],
    ['sglang', '/v1/chat/completions', 'sglang/server/stream-error-frame.chat.json'],
    ['sglang', '/v1/completions', 'sglang/server/stream-error-frame.chat.json'],
    ['sglang', '/generate', 'sglang/server/stream-error-frame.generate.json'],
  ] as const)('%s %s stream: 200, then the error event, then [DONE]', async (engine, path, fixture) => {
    await arm(engine);
    const body =
      path === '/generate'
        ? { text: 'hello', stream: true }
        : path === '/v1/completions'
          ? { model: 'motor-sim-7b', prompt: 'hello', stream: true }
          : chatBody('hello', { stream: true });
    const r = await post(sims.get(engine)!.url, path, body);
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toMatch(/^text\/event-stream/);
    const events = sseEvents(r.text);
    const expected = streamFrames(fixture);
    expect(events.map(shape)).toEqual(expected.map(shape));
    const first = JSON.stringify(events[0]);
    if (engine === 'sglang')
      expect(first).toMatch(/Decode transfer failed for request .*KVTransferError\(bootstrap_room=None\)/);
    // the next request is served normally
    const ok = await post(sims.get(engine)!.url, path, body);
    expect(ok.text).not.toContain('"error"');
  });

  it('sglang: the usage chunk follows the error event when asked', async () => {
    await arm('sglang');
    const r = await post(
      sims.get('sglang')!.url,
      '/v1/chat/completions',
      chatBody('hello', { stream: true, stream_options: { include_usage: true } }),
    );
    const events = sseEvents(r.text) as Array<{ error?: unknown; usage?: { completion_tokens: number } }>;
    expect(events).toHaveLength(3);
    expect(events[0]!.error).toBeDefined();
    expect(events[1]!.usage?.completion_tokens).toBe(0);
  });

  it.each([
    [
      'vllm',
      '/v1/chat/completions',
      { error: { message: 'string', type: 'string', param: null, code: 'number' } },
    ],
    [
      'sglang',
      '/v1/chat/completions',
      shape(loadEngineFixture('sglang/server/generation-error.non-stream.json').body),
    ],
    ['sglang', '/generate', shape(loadEngineFixture('sglang/server/generation-error.non-stream.json').body)],
  ] as const)('%s %s non-stream: 500 in the engine’s shape', async (engine, path, expected) => {
    await arm(engine);
    const body = path === '/generate' ? { text: 'hello' } : chatBody('hello');
    const r = await post(sims.get(engine)!.url, path, body);
    expect(r.status).toBe(500);
    expect(shape(r.json)).toEqual(expected);
    if (engine === 'vllm') expect(r.json.error).toMatchObject({ type: 'InternalServerError', code: 500 });
    else expect(r.json).toMatchObject({ object: 'error', type: '500', code: 500 });
    const l = await idleLedger(sims.get(engine)!.url);
    expect(l.finished.at(-1)).toMatchObject({ outcome: 'failed', reason: 'fault:stream_error_first' });
  });

  it('prefill legs never count', async () => {
    const p = await startSimulator(
      { port: 0, role: 'prefill', timeScale: 0, faults: { stream_error_first: 1 } },
      log,
    );
    try {
      const r = await post(
        p.url,
        '/v1/chat/completions',
        chatBody('hello', { max_tokens: 1, kv_transfer_params: { do_remote_decode: true } }),
      );
      expect(r.status).toBe(200);
      expect((await http(p.url, 'GET', '/debug/faults')).json.stream_error_first).toBe(1);
    } finally {
      await p.close();
    }
  });
});
