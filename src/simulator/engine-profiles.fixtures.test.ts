import { afterAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { fixtureBody, loadEngineFixture } from '../../test/fixtures/engines/load.js';
import { createLogger } from '../common/logger.js';
import type { SimEngine } from './engine-profiles.js';
import type { SimOptions } from './options.js';
import { startSimulator, type RunningSimulator } from './server.js';
import { post, sseEvents } from './testing/index.js';

/**
 * Contract: what the simulator SENDS (handoff prefill params, metaserver calls, recompute frames)
 * and ACCEPTS (the reference proxies' requests) per engine profile, against the golden fixtures in
 * test/fixtures/engines — same key set, nesting and value kinds; ids, hosts and ports may differ.
 */

const MODEL = 'motor-sim-7b';
const log = createLogger('sim-contract', 'silent');
const started: RunningSimulator[] = [];
afterAll(async () => {
  await Promise.all(started.map((s) => s.close()));
});

async function sim(partial: Partial<SimOptions>): Promise<RunningSimulator> {
  const s = await startSimulator({ timeScale: 0, ...partial }, log);
  started.push(s);
  return s;
}

/** Key set, nesting and value kinds of a JSON value (array kinds from their elements). */
function shape(v: unknown): unknown {
  if (v === null) return 'null';
  if (Array.isArray(v)) return ['array', ...new Set(v.map((x) => JSON.stringify(shape(x))))];
  if (typeof v === 'object') {
    return Object.fromEntries(Object.entries(v as object).map(([k, x]) => [k, shape(x)]));
  }
  return typeof v;
}

/** A fixture's request body, for this simulator's model. */
const request = (path: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  ...fixtureBody(path),
  model: MODEL,
  ...extra,
});

const TOY_PREFILL = 'vllm/nixl-2026-01/prefill-request.chat.json';
const ASCEND_PREFILL = 'vllm-ascend/proxy-main/prefill-request.chat.json';

describe.each([
  ['vllm', 'nixl-2026-01', null, TOY_PREFILL, 'vllm/nixl-2026-01/prefill-response.chat.json'],
  ['vllm', 'nixl-newest', null, TOY_PREFILL, 'vllm/nixl-newest/prefill-response.chat.json'],
  ['vllm', 'nixl-push', null, TOY_PREFILL, 'vllm/nixl-push/prefill-response.chat.json'],
  ['vllm-ascend', 'v0.13', null, ASCEND_PREFILL, 'vllm-ascend/mooncake-v0.13/prefill-response.chat.json'],
  ['vllm-ascend', 'v0.14', null, ASCEND_PREFILL, 'vllm-ascend/mooncake-v0.14/prefill-response.chat.json'],
  ['vllm-ascend', 'v0.15', null, ASCEND_PREFILL, 'vllm-ascend/mooncake-v0.18/prefill-response.chat.json'],
  ['vllm-ascend', 'v0.17', null, ASCEND_PREFILL, 'vllm-ascend/mooncake-v0.18/prefill-response.chat.json'],
  ['vllm-ascend', 'v0.18', null, ASCEND_PREFILL, 'vllm-ascend/mooncake-v0.18/prefill-response.chat.json'],
  ['vllm-ascend', 'main', null, ASCEND_PREFILL, 'vllm-ascend/mooncake-main/prefill-response.chat.json'],
  [
    'vllm-ascend',
    'main',
    'MooncakeHybridConnector',
    ASCEND_PREFILL,
    'vllm-ascend/mooncake-hybrid-main/prefill-response.chat.json',
  ],
] as const)('handoff prefill %s %s %s', (engine, version, connector, req, res) => {
  it('accepts the reference proxy prefill and answers kv_transfer_params shaped as upstream', async () => {
    const p = await sim({ engine, engineVersion: version, kvConnector: connector, role: 'prefill' });
    const r = await post(p.url, '/v1/chat/completions', request(req), { 'x-request-id': 'ctr-1' });
    expect(r.status).toBe(200);
    const golden = fixtureBody(res);
    expect(shape(r.json.kv_transfer_params)).toEqual(shape(golden.kv_transfer_params));
    expect(r.json.choices[0]).toMatchObject({ finish_reason: 'length', stop_reason: null });
    const rid = r.json.kv_transfer_params.remote_request_id as string | undefined;
    // The prefill holds the KV under the id it hands out (vllm-ascend v0.13: the external id).
    expect(p.core.kv.held.list().map((h) => h.request_id)).toEqual([rid ?? 'chatcmpl-ctr-1']);
  });
});

describe.each([
  ['vllm', 'nixl-2026-01', TOY_PREFILL, 'vllm/nixl-2026-01/prefill-response.eos-null.json'],
  ['vllm', 'nixl-newest', TOY_PREFILL, 'vllm/nixl-newest/prefill-response.eos.json'],
  ['vllm', 'nixl-push', TOY_PREFILL, 'vllm/nixl-push/prefill-response.eos.json'],
  ['vllm-ascend', 'v0.13', TOY_PREFILL, 'vllm-ascend/mooncake-v0.13/prefill-response.eos-null.json'],
  ['vllm-ascend', 'main', TOY_PREFILL, 'vllm-ascend/mooncake-v0.13/prefill-response.eos-null.json'],
] as const)('EOS-ended one-token prefill %s %s (--eos-at 1)', (engine, version, req, res) => {
  it('answers kv_transfer_params as upstream (null unless the connector hands over stopped requests)', async () => {
    const p = await sim({ engine, engineVersion: version, role: 'prefill', eosAt: 1 });
    const r = await post(p.url, '/v1/chat/completions', request(req));
    expect(r.status).toBe(200);
    const golden = fixtureBody(res);
    expect(shape(r.json.kv_transfer_params)).toEqual(shape(golden.kv_transfer_params));
    expect(r.json.choices[0]).toMatchObject({ finish_reason: 'stop', stop_reason: null });
    expect(r.json.choices[0].message.content).toBe('');
    expect(r.json.usage.completion_tokens).toBe(1);
    expect(p.core.kv.held.list()).toHaveLength(golden.kv_transfer_params === null ? 0 : 1);
  });
});

it("vllm-ascend proxies' min_tokens: 1 keeps EOS off the one-token prefill, so params come back", async () => {
  const p = await sim({ engine: 'vllm-ascend', engineVersion: 'v0.13', role: 'prefill', eosAt: 1 });
  const r = await post(p.url, '/v1/chat/completions', request(ASCEND_PREFILL));
  expect(r.json.choices[0].finish_reason).toBe('length');
  expect(r.json.kv_transfer_params).not.toBeNull();
});

describe('layer-wise trigger (vllm-ascend MooncakeLayerwiseConnector)', () => {
  let meta: Server;
  let metaUrl = '';
  const calls: Array<Record<string, unknown>> = [];
  let prefillUrl = '';
  afterAll(async () => {
    if (meta) await new Promise((r) => meta.close(r));
  });
  /** The reference layer-wise proxy's metaserver: runs the prefill with the call verbatim, then answers ok. */
  const metaserver = async (text: string): Promise<[number, string]> => {
    const call = JSON.parse(text) as Record<string, unknown>;
    calls.push(call);
    const r = await post(
      prefillUrl,
      '/v1/chat/completions',
      request('vllm-ascend/layerwise-v0.17/prefill-request.chat.json', {
        messages: [{ role: 'user', content: 'Hello' }],
        kv_transfer_params: call,
      }),
      { 'x-request-id': 'abc' },
    );
    return r.status === 200 ? [200, '{"status":"ok"}'] : [502, r.text];
  };

  it.each([
    ['v0.13', 'vllm-ascend/layerwise-v0.13/metaserver-call.chat.json', /^chatcmpl-abc$/],
    ['v0.14', 'vllm-ascend/layerwise-v0.14/metaserver-call.chat.json', /^chatcmpl-abc-[0-9a-f]{8}$/],
    ['v0.15', 'vllm-ascend/layerwise-v0.15/metaserver-call.chat.json', /^chatcmpl-abc$/],
    ['v0.16', 'vllm-ascend/layerwise-v0.15/metaserver-call.chat.json', /^chatcmpl-abc$/],
    ['v0.17', 'vllm-ascend/layerwise-v0.17/metaserver-call.chat.json', /^chatcmpl-abc$/],
    ['v0.18', 'vllm-ascend/layerwise-v0.17/metaserver-call.chat.json', /^chatcmpl-abc$/],
    ['main', 'vllm-ascend/layerwise-v0.17/metaserver-call.chat.json', /^chatcmpl-abc$/],
  ] as const)(
    '%s: accepts the proxy decode request, calls the metaserver as upstream',
    async (version, golden, id) => {
      if (!meta) {
        meta = createServer((req, res) => {
          let text = '';
          req.on('data', (c) => (text += c));
          req.on('end', () => {
            void metaserver(text).then(([status, body]) =>
              res.writeHead(status, { 'content-type': 'application/json' }).end(body),
            );
          });
        });
        await new Promise<void>((r) => meta.listen(0, '127.0.0.1', r));
        metaUrl = `http://127.0.0.1:${(meta.address() as { port: number }).port}/v1/metaserver`;
      }
      const common = { engine: 'vllm-ascend' as SimEngine, engineVersion: version, kvWaitMs: 5_000 };
      prefillUrl = (await sim({ ...common, role: 'prefill' })).url;
      const d = await sim({ ...common, role: 'decode' });
      const body = request('vllm-ascend/layerwise-v0.13/decode-request.chat.json');
      body.kv_transfer_params = { ...(body.kv_transfer_params as object), metaserver: metaUrl };
      const r = await post(d.url, '/v1/chat/completions', body, { 'x-request-id': 'abc' });
      expect(r.status).toBe(200);
      const frames = sseEvents(r.text) as Array<{
        usage?: { prompt_tokens_details: { cached_tokens: number } };
      }>;
      expect(frames.at(-2)!.usage!.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
      const call = calls.at(-1)!;
      expect(shape(call)).toEqual(shape(fixtureBody(golden)));
      expect(call.request_id).toMatch(id);
    },
  );

  it.each([
    ['v0.13', 'vllm-ascend/layerwise-v0.13/metaserver-call.completions.json'],
    ['main', 'vllm-ascend/layerwise-v0.17/metaserver-call.completions.json'],
  ] as const)('%s completions: request_id is cmpl-<X-Request-Id>-<prompt index>', async (version, golden) => {
    const fixture = fixtureBody(golden);
    const seen: Array<Record<string, unknown>> = [];
    const m = createServer((req, res) => {
      let text = '';
      req.on('data', (c) => (text += c));
      req.on('end', () => {
        seen.push(JSON.parse(text) as Record<string, unknown>);
        res.writeHead(404).end('{"detail":"Unknown metaserver request_id"}'); // ignored by the connector
      });
    });
    await new Promise<void>((r) => m.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(m.address() as { port: number }).port}/v1/metaserver`;
      const d = await sim({ engine: 'vllm-ascend', engineVersion: version, role: 'decode', kvWaitMs: 150 });
      const r = await post(
        d.url,
        '/v1/completions',
        {
          model: MODEL,
          prompt: 'Hello',
          max_tokens: 4,
          kv_transfer_params: { do_remote_decode: false, do_remote_prefill: true, metaserver: url },
        },
        { 'x-request-id': 'xyz' },
      );
      // The 404 is ignored: the decode waits for KV until its bound.
      expect(r.status).toBe(500);
      expect(r.json.error.message).toMatch(/did not arrive within 150 ms \(metaserver .* answered 404\)/);
      expect(seen).toHaveLength(1);
      expect(shape(seen[0])).toEqual(shape(fixture));
      expect(seen[0]!.request_id).toBe('cmpl-xyz-0');
    } finally {
      await new Promise((r) => m.close(r));
    }
  });
});

describe.each([
  ['v0.13', 'vllm-ascend/recompute-v0.13/decode-stream.recomputed.chat.json', true],
  ['v0.15', 'vllm-ascend/recompute-v0.15/decode-stream.recomputed.chat.json', false],
  ['main', 'vllm-ascend/recompute-v0.15/decode-stream.recomputed.chat.json', false],
] as const)('recompute scheduler %s (fault recompute_after 1)', (version, golden, repeats) => {
  it('stream: ends with stop_reason "recomputed" framed as upstream', async () => {
    const d = await sim({
      engine: 'vllm-ascend',
      engineVersion: version,
      role: 'decode',
      faults: { recompute_after: 1 },
    });
    const r = await post(
      d.url,
      '/v1/chat/completions',
      request('vllm-ascend/layerwise-v0.13/decode-request.chat.json', {
        kv_transfer_params: undefined,
        stream_options: undefined,
      }),
    );
    const frames = sseEvents(r.text);
    const want = loadEngineFixture(golden).frames!.map((f) => (f === '[DONE]' ? f : JSON.parse(f as string)));
    expect(frames.map(shape)).toEqual(want.map(shape));
    type Chunk = {
      choices: Array<{ delta: { content: string }; finish_reason: string; stop_reason: string }>;
    };
    const [, tok, last] = frames as Chunk[];
    expect(last!.choices[0]).toMatchObject({ finish_reason: 'stop', stop_reason: 'recomputed' });
    expect(last!.choices[0]!.delta.content).toBe(repeats ? tok!.choices[0]!.delta.content : '');
  });
});

it('recompute, non-stream (v0.15+): one token, stop_reason "recomputed" as upstream', async () => {
  const d = await sim({ engine: 'vllm-ascend', role: 'decode', faults: { recompute_after: 1 } });
  const r = await post(d.url, '/v1/chat/completions', {
    model: MODEL,
    messages: [{ role: 'user', content: 'Hi' }],
  });
  const golden = fixtureBody('vllm-ascend/recompute-v0.15/decode-response.recomputed.chat.json');
  expect(r.json.choices[0]).toEqual({ ...(golden.choices as object[])[0], message: expect.any(Object) });
  expect(r.json.usage.completion_tokens).toBe(1);
});

it.each([
  ['vllm', 'nixl-2026-01'],
  ['vllm', 'nixl-newest'],
] as const)('%s %s: no recompute scheduler, the fault does nothing', async (engine, version) => {
  const d = await sim({ engine, engineVersion: version, role: 'decode', faults: { recompute_after: 1 } });
  const r = await post(d.url, '/v1/chat/completions', {
    model: MODEL,
    messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 3,
  });
  expect(r.json.choices[0]).toMatchObject({ finish_reason: 'length', stop_reason: null });
});

it.each([
  ['vllm', null, null, 'nixl-newest', 30_000],
  ['vllm', 'nixl-2026-01', null, 'nixl-2026-01', 480_000],
  ['vllm-ascend', 'v0.16', 1234, 'v0.15', 1234],
] as const)(
  '/debug/info reports %s %s (lease %s) as %s, lease %i',
  async (engine, version, lease, want, ms) => {
    const s = await sim({ engine, engineVersion: version, kvLeaseMs: lease });
    const info = (await (await fetch(`${s.url}/debug/info`)).json()) as Record<string, unknown>;
    expect(info).toMatchObject({ engine, engine_version: want, kv_lease_ms: ms });
  },
);
