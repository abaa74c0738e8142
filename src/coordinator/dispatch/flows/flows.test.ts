import { afterEach, describe, expect, it } from 'vitest';
import type { PrefillHandoffMode } from '../../../protocol/index.js';
import {
  DispatchHarness,
  type EngineReply,
  type EngineScript,
  type LegCall,
} from '../testing/dispatch-harness.js';
import { COMPLETION, delta, json, proxyPrefillReply } from '../testing/engine-replies.js';

/**
 * Every flow (handoff, trigger through engine proxies or direct, bootstrap, single) against the same
 * table of engine behaviours, in process: fake engines behind a fake upstream, the client on loopback.
 */

const USAGE = { prompt_tokens: 5, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 3 } };
const STREAM: EngineReply = {
  kind: 'sse',
  frames: [delta('Hel'), delta('lo'), JSON.stringify({ id: 'c', choices: [], usage: USAGE })],
};

/** The engine proxy's answer to a prefill leg: a PrefillResult for the leg's own attempt. */
const proxyPrefill =
  (mode: PrefillHandoffMode) =>
  (call: LegCall): EngineReply =>
    proxyPrefillReply(call, { handoff_mode: mode, payload: { kv: 'here' }, usage: USAGE });

/** The prefill leg of the same attempt as `call` (none: `call` is a single leg). */
const prefillOf = (h: DispatchHarness, call: LegCall): LegCall | undefined =>
  h.callsTo('P').find((p) => p.headers['x-request-id'] === call.headers['x-request-id']);

interface FlowSpec {
  mode: 'proxy' | 'direct';
  instances: Record<string, unknown>[];
  /** The prefill engine's answer to a successful prefill leg (absent: single flow). */
  prefill?: (call: LegCall) => EngineReply;
  /** Besides closing the connection: the engine's abort call (SGLang). */
  abortPath?: string;
  /** What the decode engine does before it answers. */
  beforeDecode?: (call: LegCall, h: DispatchHarness) => Promise<'hang' | void>;
}

const P = (extra: object) => ({ id: 'P', url: 'http://p.test:1', role: 'prefill', ...extra });
const D = (extra: object) => ({ id: 'D', url: 'http://d.test:2', role: 'decode', ...extra });

const FLOWS: Record<string, FlowSpec> = {
  'handoff (proxy)': {
    mode: 'proxy',
    instances: [P({ dispatchProfile: 'handoff' }), D({ dispatchProfile: 'handoff' })],
    prefill: proxyPrefill('handoff'),
  },
  'handoff (direct)': {
    mode: 'direct',
    instances: [
      P({ dispatchProfile: 'handoff', mode: 'direct' }),
      D({ dispatchProfile: 'handoff', mode: 'direct' }),
    ],
    prefill: () => json({ ...COMPLETION, kv_transfer_params: { remote_engine_id: 'p' }, usage: USAGE }),
  },
  'trigger (proxy)': {
    mode: 'proxy',
    instances: [P({ dispatchProfile: 'trigger' }), D({ dispatchProfile: 'trigger' })],
    prefill: proxyPrefill('trigger'),
  },
  'trigger (direct)': {
    mode: 'direct',
    instances: [
      P({ dispatchProfile: 'trigger', mode: 'direct' }),
      D({ dispatchProfile: 'trigger', mode: 'direct' }),
    ],
    prefill: () => json({ ...COMPLETION, usage: USAGE }),
    // the decode engine's connector asks the coordinator's metaserver for the prefill first
    beforeDecode: async (call, h) => {
      if (call.body.kv_transfer_params) await h.callMetaserver(call);
    },
  },
  'bootstrap (direct)': {
    mode: 'direct',
    instances: [P({ engine: 'sglang', mode: 'direct' }), D({ engine: 'sglang', mode: 'direct' })],
    abortPath: '/abort_request',
    prefill: () => json({ ...COMPLETION, usage: USAGE }),
    // the decode waits for its KV from the prefill; a failed prefill leaves it waiting
    beforeDecode: async (call, h) => {
      const prefill = prefillOf(h, call);
      if (!prefill) return;
      const reply = await prefill.reply;
      if (reply.kind !== 'json' || (reply.status ?? 200) !== 200) return 'hang';
    },
  },
  single: {
    mode: 'proxy',
    instances: [{ id: 'D', url: 'http://u.test:3', role: 'union' }],
  },
};

interface Case {
  name: string;
  pdOnly?: boolean;
  stream?: boolean;
  config?: Record<string, unknown>;
  /** Replies of the first prefill (decode) legs; later legs succeed. */
  prefill?: EngineReply[];
  decode?: EngineReply[];
  /** The client goes away once the decode leg was sent. */
  disconnect?: boolean;
  expect: {
    status?: number;
    /** The client's body, exactly. */
    body?: string;
    errorCode?: string;
    prefillLegs?: number;
    decodeLegs?: number;
    /** The last decode leg ran the whole request (fallback-decode-only). */
    lastDecodeSingle?: boolean;
    /** Both legs of the last attempt were stopped with this reason. */
    stopped?: string;
    /** After commit: the stream ends with one error frame and [DONE]. */
    errorFrame?: boolean;
    endCode?: string | null;
  };
}

const ENGINE_400 = JSON.stringify({ error: { message: "'max_tokens' is too large", code: 400 } });

const CASES: Case[] = [
  { name: 'stream success', expect: { status: 200, decodeLegs: 1, endCode: null } },
  { name: 'non-stream success', stream: false, expect: { status: 200, decodeLegs: 1, endCode: null } },
  {
    name: 'decode engine 4xx is returned as is, not retried',
    decode: [json(ENGINE_400, 400)],
    expect: { status: 400, body: ENGINE_400, decodeLegs: 1, endCode: 'engine_rejected' },
  },
  {
    name: 'prefill engine 4xx is returned as is, not retried',
    pdOnly: true,
    prefill: [json(ENGINE_400, 400)],
    expect: { status: 400, body: ENGINE_400, prefillLegs: 1, endCode: 'engine_rejected' },
  },
  {
    name: 'decode 5xx is retried',
    decode: [json({ error: { message: 'overloaded' } }, 503)],
    expect: { status: 200, decodeLegs: 2 },
  },
  {
    name: 'decode connection error is retried',
    decode: [{ kind: 'refuse' }],
    expect: { status: 200, decodeLegs: 2 },
  },
  {
    name: 'prefill 5xx, policy retry → a new attempt',
    pdOnly: true,
    prefill: [json({ error: { message: 'boom' } }, 500)],
    expect: { status: 200, prefillLegs: 2 },
  },
  {
    name: 'prefill 5xx, policy error → the error, no retry',
    pdOnly: true,
    config: { dispatch: { prefillFailurePolicy: 'error' } },
    prefill: [json({ error: { message: 'boom' } }, 500)],
    expect: { status: 502, errorCode: 'engine_error', prefillLegs: 1 },
  },
  {
    name: 'prefill 5xx, policy fallback-decode-only → the decode instance alone',
    pdOnly: true,
    config: { dispatch: { prefillFailurePolicy: 'fallback-decode-only' } },
    prefill: [json({ error: { message: 'boom' } }, 500)],
    expect: { status: 200, lastDecodeSingle: true },
  },
  {
    name: 'decode fails after commit, migration off → one error frame, [DONE], both legs stopped',
    config: { migration: { maxPerRequest: 0 } },
    decode: [{ kind: 'sse', frames: [delta('a')], end: 'error' }],
    expect: { status: 200, errorFrame: true, stopped: 'peer_failed', decodeLegs: 1 },
  },
  {
    name: 'decode stream truncated after commit, migration off → one error frame, [DONE]',
    config: { migration: { maxPerRequest: 0 } },
    decode: [{ kind: 'sse', frames: [delta('a')], end: 'truncate' }],
    expect: { status: 200, errorFrame: true, stopped: 'peer_failed', decodeLegs: 1 },
  },
  {
    name: 'decode fails after commit → migrated: a new attempt continues the stream, no error frame',
    decode: [{ kind: 'sse', frames: [delta('a')], end: 'error' }],
    expect: { status: 200, decodeLegs: 2, endCode: 'connection_error' },
  },
  {
    name: 'decode stream truncated after commit → migrated, no error frame',
    decode: [{ kind: 'sse', frames: [delta('a')], end: 'truncate' }],
    expect: { status: 200, decodeLegs: 2 },
  },
  {
    name: 'client disconnect → both legs stopped (client_disconnect)',
    decode: [{ kind: 'hang' }],
    disconnect: true,
    expect: { stopped: 'client_disconnect', endCode: 'client_disconnect', decodeLegs: 1 },
  },
  {
    name: 'deadline → 504, both legs stopped (timeout)',
    config: { timeouts: { totalMs: 150 } },
    decode: [{ kind: 'hang' }],
    expect: { status: 504, errorCode: 'deadline_exceeded', stopped: 'timeout', decodeLegs: 1 },
  },
];

/** Engine scripts for a flow: the case's replies for the first legs, the flow's success after. */
function engines(flow: FlowSpec, c: Case): Record<string, EngineScript> {
  const scripted = (replies: EngineReply[] | undefined, ok: EngineScript): EngineScript => {
    let n = 0;
    return (call, h) => {
      const reply = replies?.[n++];
      return reply ?? ok(call, h);
    };
  };
  const decodeOk: EngineScript = async (call, h) => {
    if ((await flow.beforeDecode?.(call, h)) === 'hang') return { kind: 'hang' };
    return call.body.stream === true ? STREAM : json(COMPLETION);
  };
  return {
    D: scripted(c.decode, decodeOk),
    ...(flow.prefill ? { P: scripted(c.prefill, flow.prefill) } : {}),
  };
}

function expectStopped(h: DispatchHarness, flow: FlowSpec, reason: string): void {
  expect(h.observed('attemptFailed').at(-1)?.[1]).toBe(reason);
  const routed = flow.prefill ? ['P', 'D'] : ['D'];
  if (flow.mode === 'proxy') {
    const stops = h.stops.filter((s) => s.path === '/v1/dispatch/stop' && s.body.reason === reason);
    expect(stops.map((s) => s.instanceId).sort()).toEqual(routed.sort());
  } else {
    // a stock engine notices its closed connection; every leg still open was aborted
    const stopped = h
      .observed('stopResult')
      .filter(([r, result]) => r === reason && result === 'connection_closed');
    expect(stopped.length).toBeGreaterThanOrEqual(1);
    expect(h.callsTo('D').at(-1)!.aborted).toBe(true);
    if (flow.abortPath) {
      const rid = h.callsTo('D').at(-1)!.headers['x-request-id'];
      expect(h.stops).toContainEqual({ instanceId: 'D', path: flow.abortPath, body: { rid } });
    }
  }
}

const harnesses: DispatchHarness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.close()));
});

describe.each(Object.entries(FLOWS))('%s flow', (_flowName, flow) => {
  it.each(CASES.filter((c) => flow.prefill || !c.pdOnly))('$name', async (c) => {
    const h = new DispatchHarness({ ...c.config, instances: flow.instances }, engines(flow, c));
    harnesses.push(h);
    const stream = c.stream ?? true;
    const reply = await h.send({ stream, max_tokens: 8 }, c.disconnect ? 'D' : undefined);
    const want = c.expect;
    if (want.status !== undefined) expect(reply?.status).toBe(want.status);
    if (want.body !== undefined) expect(reply?.text).toBe(want.body);
    if (want.errorCode !== undefined) expect(JSON.parse(reply!.text).error.code).toBe(want.errorCode);
    if (want.prefillLegs !== undefined) expect(h.callsTo('P')).toHaveLength(want.prefillLegs);
    if (want.decodeLegs !== undefined) expect(h.callsTo('D')).toHaveLength(want.decodeLegs);
    if (want.lastDecodeSingle) {
      const last = h.callsTo('D').at(-1)!;
      const steering = Object.keys(last.body).filter((k) => /kv_transfer|bootstrap/.test(k));
      // an SGLang decode cannot run alone: it gets an ordinary P/D retry instead
      const sglang = flow.instances.some((i) => i.engine === 'sglang');
      expect(h.callsTo('P')).toHaveLength(sglang ? 2 : 1);
      if (sglang) expect(steering).not.toEqual([]);
      else if (flow.mode === 'proxy') expect(last.role).toBe('single');
      else expect(steering).toEqual([]);
    }
    if (want.stopped !== undefined) expectStopped(h, flow, want.stopped);
    if (want.endCode !== undefined) expect(h.observed('end').at(-1)?.[1]).toBe(want.endCode);
    if (reply?.status === 200 && stream) {
      expect(reply.text.endsWith('data: [DONE]\n\n')).toBe(true);
      expect(reply.text.split('data: [DONE]')).toHaveLength(2);
      expect(reply.text.split('data: {"error"')).toHaveLength(want.errorFrame ? 2 : 1);
      if (!want.errorFrame) expect(reply.text).toContain(delta('lo'));
    }
    if (reply?.status === 200 && !stream) {
      const body = JSON.parse(reply.text);
      expect(body.choices[0].message.content).toBe('Hello');
      // a P/D answer reports the prefill's cached tokens in the client's usage
      if (flow.prefill) expect(body.usage.prompt_tokens_details).toEqual({ cached_tokens: 3 });
    }
  });
});
