import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixtureBody } from '../../test/fixtures/engines/load.js';
import { createLogger } from '../common/logger.js';
import { defaultSimOptions } from './options.js';
import { startSimulator, type RunningSimulator } from './server.js';
import { http, idleLedger, post, sseEvents } from './testing/index.js';

const log = createLogger('test', 'silent');
const MODEL = 'motor-sim-7b';

/** A mini_lb fixture body aimed at the local prefill; `room` stays an exact integer literal (raw JSON). */
function miniLbBody(fixture: string, patch: Record<string, unknown>, room: string): string {
  const body: Record<string, unknown> = { ...fixtureBody(fixture), ...patch };
  delete body.bootstrap_room;
  const json = JSON.stringify(body);
  return `${json.slice(0, -1)},"bootstrap_room":${room}}`;
}

describe('SGLang bootstrap server on its own port (mini_lb fixtures)', () => {
  let p: RunningSimulator;
  let d: RunningSimulator;
  beforeAll(async () => {
    const common = { port: 0, timeScale: 0, engine: 'sglang' as const, bootstrapTimeoutMs: 2000 };
    p = await startSimulator({ ...common, role: 'prefill', bootstrapPort: 0 }, log);
    // bootstrap_port: null on the decode means the decode's own --bootstrap-port (scheduler.py).
    d = await startSimulator({ ...common, role: 'decode', bootstrapPort: p.bootstrapPort! }, log);
  });
  afterAll(async () => {
    await Promise.all([p?.close(), d?.close()]);
  });

  it('the prefill binds a separate port; the HTTP port no longer serves the rendezvous', async () => {
    expect(defaultSimOptions().bootstrapPort).toBe(8998);
    expect(p.bootstrapPort).toBeGreaterThan(0);
    expect(p.bootstrapPort).not.toBe(Number(new URL(p.url).port));
    expect(d.bootstrapPort).toBeNull();
    expect((await post(p.url, '/internal/bootstrap/join', { room: 1, timeout_ms: 1 })).status).toBe(404);
    expect((await http(`http://127.0.0.1:${p.bootstrapPort}`, 'GET', '/health')).status).toBe(200);
    expect((await http(p.url, 'GET', '/debug/info')).json.bootstrap_port).toBe(p.bootstrapPort);
  });

  it('chat: the same body to prefill and decode at once', async () => {
    const body = miniLbBody(
      'sglang/mini-lb/chat-request.json',
      { model: MODEL, bootstrap_host: '127.0.0.1', bootstrap_port: p.bootstrapPort, max_tokens: 4 },
      '4073374190146881990',
    );
    const [a, b] = await Promise.all([
      post(p.url, '/v1/chat/completions', body),
      post(d.url, '/v1/chat/completions', body),
    ]);
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    const events = sseEvents(b.text) as Array<{ usage?: { completion_tokens: number } }>;
    expect(events.at(-1)).toBe('[DONE]');
    expect(events.at(-2)?.usage?.completion_tokens).toBe(4);
  });

  it('/generate with bootstrap_port null, streaming: cumulative native events', async () => {
    const body = miniLbBody(
      'sglang/mini-lb/generate-request.json',
      { bootstrap_host: '127.0.0.1', sampling_params: { max_new_tokens: 3 } },
      '9223372036854775807',
    );
    const [a, b] = await Promise.all([post(p.url, '/generate', body), post(d.url, '/generate', body)]);
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    const events = sseEvents(b.text) as Array<{
      text: string;
      output_ids: number[];
      meta_info: {
        finish_reason: unknown;
        completion_tokens: number;
        cached_tokens: number;
        prompt_tokens: number;
      };
    }>;
    expect(events.at(-1)).toBe('[DONE]');
    const frames = events.slice(0, -1) as typeof events;
    expect(frames.map((e) => e.meta_info.completion_tokens)).toEqual([1, 2, 3]);
    expect(frames[2]!.text.startsWith(frames[1]!.text)).toBe(true);
    expect(frames[2]!.output_ids).toHaveLength(3);
    expect(frames.map((e) => e.meta_info.finish_reason)).toEqual([null, null, { type: 'length', length: 3 }]);
    expect(frames[2]!.meta_info.cached_tokens).toBe(frames[2]!.meta_info.prompt_tokens);
  });

  it('batched /generate: one room per prompt, answered as a list in order', async () => {
    const fixture = fixtureBody('sglang/mini-lb/generate-request.batch.json');
    const rooms = ['4073374190146881990', '512933702231945210'];
    const body = JSON.stringify({
      ...fixture,
      bootstrap_host: ['127.0.0.1', '127.0.0.1'],
      bootstrap_port: [p.bootstrapPort, p.bootstrapPort],
      bootstrap_room: 0,
      rid: ['batch-0', 'batch-1'],
    }).replace('"bootstrap_room":0', `"bootstrap_room":[${rooms.join(',')}]`);
    const [a, b] = await Promise.all([post(p.url, '/generate', body), post(d.url, '/generate', body)]);
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(b.json).toHaveLength(2);
    expect(b.json.map((r: { meta_info: { id: string } }) => r.meta_info.id)).toEqual(['batch-0', 'batch-1']);
    expect(b.json[0].meta_info.completion_tokens).toBe(16);
    expect(
      a.json.map((r: { meta_info: { completion_tokens: number } }) => r.meta_info.completion_tokens),
    ).toEqual([1, 1]);
    expect((await idleLedger(p.url)).kv_held).toEqual([]);
  });

  it('a decode without a fixed bootstrap port refuses bootstrap_port null clearly', async () => {
    const d0 = await startSimulator(
      { port: 0, timeScale: 0, engine: 'sglang', role: 'decode', bootstrapPort: 0 },
      log,
    );
    try {
      const r = await post(d0.url, '/generate', {
        text: 'hi',
        bootstrap_host: '127.0.0.1',
        bootstrap_port: null,
        bootstrap_room: 7,
      });
      expect(r.status).toBe(400);
      expect(r.json.error.message).toMatch(/bootstrap_port is null .*--bootstrap-port 0/);
    } finally {
      await d0.close();
    }
  });

  it('a taken bootstrap port fails start-up with a message naming it', async () => {
    const port = p.bootstrapPort!;
    await expect(
      startSimulator({ port: 0, engine: 'sglang', role: 'prefill', bootstrapPort: port }, log),
    ).rejects.toThrow(new RegExp(`bootstrap port ${port}`));
  });
});

describe("SGLang Rust server profile: bootstrap on the HTTP port, the Rust frontend's /server_info", () => {
  let p: RunningSimulator;
  let d: RunningSimulator;
  beforeAll(async () => {
    const common = {
      port: 0,
      timeScale: 0,
      engine: 'sglang' as const,
      engineVersion: 'rust-server',
      bootstrapTimeoutMs: 2000,
    };
    p = await startSimulator({ ...common, role: 'prefill' }, log);
    d = await startSimulator({ ...common, role: 'decode' }, log);
  });
  afterAll(async () => {
    await Promise.all([p?.close(), d?.close()]);
  });

  it('serves the rendezvous on its HTTP port and binds no other', async () => {
    expect(p.bootstrapPort).toBe(Number(new URL(p.url).port));
    expect(d.bootstrapPort).toBeNull();
    const info = await http(p.url, 'GET', '/server_info');
    const golden = fixtureBody('sglang/rust-server/server-info.json');
    expect(Object.keys(info.json).sort()).toEqual(Object.keys(golden).sort());
    expect(info.json.frontend).toBe('rust');
    expect((await http(p.url, 'GET', '/get_server_info')).status).toBe(404);
  });

  it('a batched /generate with one scalar room meets in room + i per prompt', async () => {
    const body =
      `{"text":["Hello","Bye"],"sampling_params":{"max_new_tokens":3},"rid":["b-0","b-1"],` +
      `"bootstrap_host":"127.0.0.1","bootstrap_port":${p.bootstrapPort},"bootstrap_room":9223372036854775000}`;
    const [a, b] = await Promise.all([post(p.url, '/generate', body), post(d.url, '/generate', body)]);
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect((b.json as unknown[]).length).toBe(2);
    const rooms = ((await http(p.url, 'GET', '/debug/requests')).json as { finished: Array<{ id: string }> })
      .finished;
    expect(rooms.map((f) => f.id).sort()).toEqual(['b-0', 'b-1']);
  });
});
