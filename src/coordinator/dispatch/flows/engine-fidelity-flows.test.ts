import { afterEach, describe, expect, it } from 'vitest';
import { fixtureBody, loadEngineFixture } from '../../../../test/fixtures/engines/load.js';
import type { PrefillResultInput } from '../../../protocol/index.js';
import {
  DispatchHarness,
  type EngineReply,
  type EngineScript,
  type LegCall,
} from '../testing/dispatch-harness.js';
import { COMPLETION, delta, json, proxyPrefillReply } from '../testing/engine-replies.js';

/**
 * Issue 14 item 2, in process against the dispatch harness with the engines' golden bodies:
 * EOS-ended prefills (`kv_transfer_params: null`), `stop_reason: "recomputed"`, error frames before
 * the first token, and expired handoffs — in proxy and direct mode.
 */

const frames = (path: string): string[] =>
  loadEngineFixture(path)
    .frames!.map(String)
    .filter((f) => f !== '[DONE]');
const OK_STREAM: EngineReply = { kind: 'sse', frames: [delta('Hel'), delta('lo')] };

const NIXL_EOS_NULL = fixtureBody('vllm/nixl-2026-01/prefill-response.eos-null.json');
const NIXL_OK = fixtureBody('vllm/nixl-2026-01/prefill-response.chat.json');
const RECOMPUTED_V015 = frames('vllm-ascend/recompute-v0.15/decode-stream.recomputed.chat.json');
const RECOMPUTED_V013 = frames('vllm-ascend/recompute-v0.13/decode-stream.recomputed.chat.json');
const RECOMPUTED_JSON = fixtureBody('vllm-ascend/recompute-v0.15/decode-response.recomputed.chat.json');
const ERROR_FIRST = frames('vllm/openai/stream-error-frame.json');

/** The engine proxy's PrefillResult for `call`'s attempt. */
function proxyResult(call: LegCall, extra: Partial<PrefillResultInput>): EngineReply {
  return proxyPrefillReply(call, { handoff_mode: 'handoff', payload: { remote_engine_id: 'p' }, ...extra });
}

const P = (mode: string) => ({
  id: 'P',
  url: 'http://p.test:1',
  role: 'prefill',
  dispatchProfile: 'handoff',
  mode,
});
const D = (mode: string, id = 'D') => ({
  id,
  url: `http://${id.toLowerCase()}.test:2`,
  role: 'decode',
  dispatchProfile: 'handoff',
  mode,
});

const MODES = {
  /** The prefill proxy answers what its adapter made of the engine's body (prefill-leg.ts). */
  proxy: {
    ok: (call: LegCall) => proxyResult(call, {}),
    eosNull: (call: LegCall) => proxyResult(call, { status: 'skipped', payload: {} }),
  },
  direct: {
    ok: () => json(NIXL_OK),
    eosNull: () => json(NIXL_EOS_NULL),
  },
} as const;

const harnesses: DispatchHarness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.close()));
});

function harness(
  mode: keyof typeof MODES,
  engines: Record<string, EngineScript>,
  decodes = ['D'],
  config: Record<string, unknown> = {},
): DispatchHarness {
  const h = new DispatchHarness(
    {
      instances: [P(mode), ...decodes.map((id) => D(mode, id))],
      scheduling: { circuitBreaker: { failureThreshold: 1 } },
      ...config,
    },
    engines,
  );
  harnesses.push(h);
  return h;
}

const breaker = (h: DispatchHarness, id: string): string =>
  h.dispatcher.deps.scheduling.scheduler.breakers.state(id);

describe.each(['proxy', 'direct'] as const)('handoff engine fidelity (%s)', (mode) => {
  const m = MODES[mode];
  const isPrefill = (call: LegCall) => call.instanceId === 'P';

  it('a prefill without kv_transfer_params (EOS) → a plain decode, counted, breaker untouched', async () => {
    const h = harness(mode, { P: m.eosNull, D: () => OK_STREAM });
    const reply = await h.send({ stream: true, max_tokens: 8 });
    expect(reply?.status).toBe(200);
    expect(reply?.text).toContain('Hel');
    const decode = h.callsTo('D');
    expect(decode).toHaveLength(1);
    if (mode === 'direct') expect(decode[0]!.body).not.toHaveProperty('kv_transfer_params');
    else expect(decode[0]!.body._motor_prefill_result).toMatchObject({ status: 'skipped', payload: {} });
    expect(h.observed('prefillKvSkipped')).toEqual([['P', 'no_kv_params']]);
    expect(h.observed('retry')).toEqual([]);
    expect(breaker(h, 'P')).toBe('closed');
  });

  it('the prefill leg: engine request has min_tokens 1 (direct); the envelope body has none (proxy)', async () => {
    const h = harness(mode, { P: m.ok, D: () => OK_STREAM });
    await h.send({ stream: true, max_tokens: 8, min_tokens: 3 });
    const prefill = h.callsTo('P')[0]!;
    if (mode === 'direct') expect(prefill.body.min_tokens).toBe(1);
    else expect(prefill.body).not.toHaveProperty('min_tokens'); // conformance 18: the proxy's adapter adds it
    expect(h.callsTo('D')[0]!.body.min_tokens).toBe(3);
  });

  // Direct results get their expiry from the coordinator itself; the rule is one function (handoff-ttl.ts).
  it.runIf(mode === 'proxy')('an expired handoff → a plain decode', async () => {
    const h = harness(mode, {
      P: (call) => proxyResult(call, { expires_at_ms: Date.now() - 1 }),
      D: () => OK_STREAM,
    });
    expect((await h.send({ stream: true, max_tokens: 8 }))?.status).toBe(200);
    expect(h.callsTo('D')[0]!.body._motor_prefill_result).toMatchObject({ status: 'skipped', payload: {} });
    expect(h.observed('prefillKvSkipped')).toEqual([['P', 'expired']]);
  });

  it('stop_reason recomputed before commit → a new attempt, not charged to the breaker', async () => {
    let n = 0;
    const h = harness(mode, {
      P: m.ok,
      D: (): EngineReply => (++n === 1 ? { kind: 'sse', frames: RECOMPUTED_V015.slice(2) } : OK_STREAM),
    });
    const reply = await h.send({ stream: true, max_tokens: 8 });
    expect(reply?.status).toBe(200);
    expect(reply?.text).toContain('Hel');
    expect(reply?.text).not.toContain('recomputed');
    expect(h.observed('retry')).toEqual([[1, 'decode_recomputed']]);
    expect(h.observed('attemptFailed')[0]).toEqual(['decode_recomputed', 'recompute']);
    expect(breaker(h, 'D')).toBe('closed');
    expect(h.calls.filter(isPrefill)).toHaveLength(2);
  });

  it.each([
    ['v0.13 (repeats the last token)', RECOMPUTED_V013],
    ['v0.15 (no token)', RECOMPUTED_V015],
  ])(
    'stop_reason recomputed after commit, %s, migration off → error frame, never the frame itself',
    async (_n, f) => {
      const h = harness(mode, { P: m.ok, D: () => ({ kind: 'sse', frames: f }) }, ['D'], {
        migration: { maxPerRequest: 0 },
      });
      const reply = await h.send({ stream: true, max_tokens: 8 });
      expect(reply?.status).toBe(200);
      const text = reply!.text;
      expect(text.match(/Hello/g)).toHaveLength(1);
      expect(text).not.toContain('"stop_reason":"recomputed"');
      expect(text).toMatch(/data: \{"error":\{[^\n]*"code":"decode_recomputed"\}\}\n\ndata: \[DONE\]\n\n$/);
      expect(h.callsTo('D')).toHaveLength(1);
      expect(h.callsTo('D')[0]!.aborted).toBe(true); // the decode leg is stopped (proxy: also told)
      if (mode === 'proxy') expect(h.stops.map((s) => s.body.reason)).toContain('recompute');
      expect(breaker(h, 'D')).toBe('closed');
    },
  );

  it.each([
    ['v0.13 (repeats the last token)', RECOMPUTED_V013],
    ['v0.15 (no token)', RECOMPUTED_V015],
  ])(
    'stop_reason recomputed after commit, %s → migrated: the answer so far continues on a new attempt',
    async (_n, f) => {
      let n = 0;
      const h = harness(mode, {
        P: m.ok,
        D: (): EngineReply => (++n === 1 ? { kind: 'sse', frames: f } : OK_STREAM),
      });
      const reply = await h.send({ stream: true, max_tokens: 8 });
      const text = reply!.text;
      expect(text.match(/Hello/g)).toHaveLength(1); // the repeated last token (v0.13) is not relayed
      expect(text).not.toContain('recomputed');
      expect(text).not.toContain('"error"');
      expect(text).toContain('"content":"Hel"');
      const second = h.callsTo('D')[1]!.body;
      expect(second).toMatchObject({ continue_final_message: true, add_generation_prompt: false });
      expect((second.messages as Array<{ role: string }>).at(-1)!.role).toBe('assistant');
      expect(h.observed('migration')).toEqual([
        ['decode_recomputed', 'started'],
        ['decode_recomputed', 'resumed'],
      ]);
      expect(breaker(h, 'D')).toBe('closed');
    },
  );

  it('stop_reason recomputed, non-stream → a new attempt', async () => {
    let n = 0;
    const h = harness(mode, {
      P: m.ok,
      D: (): EngineReply => (++n === 1 ? json(RECOMPUTED_JSON) : json(COMPLETION)),
    });
    const reply = await h.send({ stream: false, max_tokens: 8 });
    expect(reply?.status).toBe(200);
    expect(JSON.parse(reply!.text).choices[0].finish_reason).toBe('stop');
    expect(reply!.text).not.toContain('recomputed');
    expect(h.observed('retry')).toEqual([[1, 'decode_recomputed']]);
    expect(h.callsTo('D')).toHaveLength(2);
  });

  it('an error frame before the first token → a retry on another decode, charged to the first', async () => {
    let n = 0;
    const decode = (): EngineReply => (++n === 1 ? { kind: 'sse', frames: ERROR_FIRST } : OK_STREAM);
    const h = harness(mode, { P: m.ok, D: decode, D2: decode }, ['D', 'D2']);
    const reply = await h.send({ stream: true, max_tokens: 8 });
    expect(reply?.status).toBe(200);
    expect(reply?.text).not.toContain('KV cache load failed');
    expect(reply?.text).toContain('Hel');
    expect(h.observed('retry')).toEqual([[1, 'engine_error']]);
    const [first, second] = h.calls.filter((c) => c.instanceId !== 'P').map((c) => c.instanceId);
    expect(second).not.toBe(first);
    expect(breaker(h, first!)).toBe('open');
    expect(breaker(h, second!)).toBe('closed');
  });
});
