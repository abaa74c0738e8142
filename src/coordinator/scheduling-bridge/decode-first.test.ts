import { afterEach, describe, expect, it } from 'vitest';
import type { Instance } from '../fleet/instance-source.js';
import type { Selection } from './scheduling-adapter.js';
import type { SchedulingRequest } from '../../scheduling/index.js';
import {
  DispatchHarness,
  type EngineReply,
  type EngineScript,
  type LegCall,
} from '../dispatch/testing/dispatch-harness.js';
import {
  DecodeFirst,
  decodeFirstOutcome,
  decodePrediction,
  type DecodeFirstOutcome,
  type PredictionSource,
} from './decode-first.js';
import { COMPLETION, delta, json, proxyPrefillReply } from '../dispatch/testing/engine-replies.js';

const RULES = { minCachedFraction: 0.8, maxUncachedTokens: 64 };

describe('decodeFirstOutcome', () => {
  it.each<[string, boolean, number, number, DecodeFirstOutcome]>([
    ['most of the prompt cached', true, 1000, 800, 'cached'],
    ['just below the fraction, long rest', true, 1000, 799, 'prefill'],
    ['nothing cached, short prompt', true, 64, 0, 'short'],
    ['nothing cached, one token over', true, 65, 0, 'prefill'],
    ['little cached, short rest', true, 1000, 940, 'cached'],
    ['rest exactly maxUncachedTokens', true, 1000, 600, 'prefill'],
    ['a prediction above the prompt is clamped', true, 100, 500, 'cached'],
    ['an SGLang decode, everything cached', false, 1000, 999, 'unsupported'],
  ])('%s', (_name, supported, promptTokens, cachedTokens, want) => {
    expect(decodeFirstOutcome(RULES, supported, { source: 'precise', promptTokens, cachedTokens })).toBe(
      want,
    );
  });

  it('minCachedFraction 0 still needs some cached tokens for the cached rule', () => {
    const rules = { minCachedFraction: 0, maxUncachedTokens: 0 };
    expect(decodeFirstOutcome(rules, true, { source: 'none', promptTokens: 10, cachedTokens: 0 })).toBe(
      'prefill',
    );
  });
});

describe('decodePrediction', () => {
  const kv = { promptTokens: 120, cachedTokens: new Map([['D', 96]]) };
  const base: SchedulingRequest = { model: 'm', promptTokens: 100 };
  it.each<[string, SchedulingRequest, string, boolean, PredictionSource, number, number]>([
    ['KV events index the decode', { ...base, kvPrediction: kv }, 'D', true, 'precise', 120, 96],
    ['indexed, no decode scorer', { ...base, kvPrediction: kv }, 'D', false, 'precise', 120, 96],
    ['another decode, scorer on decode', { ...base, kvPrediction: kv }, 'D2', true, 'approximate', 120, 40],
    ['no events, scorer on decode', base, 'D', true, 'approximate', 100, 40],
    ['no events, no scorer', base, 'D', false, 'none', 100, 0],
  ])('%s', (_name, request, id, scorer, source, promptTokens, cachedTokens) => {
    expect(decodePrediction(request, id, 40, scorer)).toEqual({ source, promptTokens, cachedTokens });
  });
});

describe('DecodeFirst.apply', () => {
  const instance = (id: string, engine: 'vllm' | 'sglang') => ({ id, engine }) as unknown as Instance;
  const pair = (engine: 'vllm' | 'sglang', released: string[]): Selection => ({
    route: {
      kind: 'pd',
      plan: 'prefill_handoff_decode',
      flow: 'handoff',
      prefill: instance('P', engine),
      decode: instance('D', engine),
    },
    cachedPromptTokens: 0,
    decodeCachedPromptTokens: 90,
    picked: [instance('P', engine), instance('D', engine)],
    reservation: { release: () => released.push('reservation') } as unknown as Selection['reservation'],
  });

  /** A DecodeFirst on the default rules that records what it gives back and what it counts. */
  const counting = () => {
    const released: string[] = [];
    const counted: string[] = [];
    const first = new DecodeFirst(
      { enabled: true, ...RULES },
      ['prefix-affinity'],
      { unused: (i) => released.push(i.id) },
      (outcome, source) => counted.push(`${outcome}/${source}`),
    );
    return { first, released, counted };
  };

  it('turns a pair into one leg on its decode, giving back the prefill pick and the reservation', () => {
    const { first, released, counted } = counting();
    const out = first.apply(pair('vllm', released), { model: 'm', promptTokens: 100 });
    expect(out.route).toMatchObject({ kind: 'single', degraded: false, instance: { id: 'D' } });
    expect(out.picked.map((i) => i.id)).toEqual(['D']);
    expect(out.cachedPromptTokens).toBe(90);
    expect(out.reservation).toBeNull();
    expect(released.sort()).toEqual(['P', 'reservation']);
    expect(counted).toEqual(['cached/approximate']);
  });

  it('reads the KV events prediction first: the decode holds too little, so the pair stays', () => {
    const { first, released, counted } = counting();
    const kvPrediction = { promptTokens: 1000, cachedTokens: new Map([['D', 16]]) };
    const selection = pair('vllm', released);
    expect(first.apply(selection, { model: 'm', promptTokens: 100, kvPrediction })).toBe(selection);
    expect(released).toEqual([]);
    expect(counted).toEqual(['prefill/precise']);
  });

  it('moves the in-flight expectation of the prompt from the prefill to the decode', () => {
    const calls: string[] = [];
    const first = new DecodeFirst({ enabled: true, ...RULES }, [], { unused: () => undefined });
    const kvPrediction = {
      promptTokens: 100,
      cachedTokens: new Map([['D', 96]]),
      routed: (id: string) => calls.push(`routed ${id}`),
      release: () => calls.push('release'),
    };
    const out = first.apply(pair('vllm', []), { model: 'm', promptTokens: 100, kvPrediction });
    expect(out.route.kind).toBe('single');
    expect(calls).toEqual(['release', 'routed D']);
  });

  it('leaves an SGLang pair alone (and counts it unsupported)', () => {
    const { first, released, counted } = counting();
    const selection = pair('sglang', released);
    expect(first.apply(selection, { model: 'm', promptTokens: 100 })).toBe(selection);
    expect(released).toEqual([]);
    expect(counted).toEqual(['unsupported/approximate']);
  });
});

// ---- in process, through the Dispatcher: which legs each engine kind gets ----

const USAGE = { prompt_tokens: 120, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 3 } };
/** What the decode engine reports when it ran the whole request: most of the prompt from its cache. */
const DECODE_USAGE = {
  prompt_tokens: 120,
  completion_tokens: 2,
  prompt_tokens_details: { cached_tokens: 96 },
};
/** A long user turn (several 64-character prefix blocks), the same every time: a repeated conversation. */
const TURN = 'Please summarise the attached quarterly report for the board. '.repeat(8);

interface EngineKind {
  instances: Record<string, unknown>[];
  prefill: (call: LegCall) => EngineReply;
  sglang?: boolean;
}

const P = (extra: object) => ({ id: 'P', url: 'http://p.test:1', role: 'prefill', ...extra });
const D = (extra: object) => ({ id: 'D', url: 'http://d.test:2', role: 'decode', ...extra });
const proxyPrefill = (mode: 'handoff' | 'trigger') => (call: LegCall) =>
  proxyPrefillReply(call, { handoff_mode: mode, payload: { kv: 'here' }, usage: USAGE });

const KINDS: Record<string, EngineKind> = {
  'vLLM NIXL handoff (proxy)': {
    instances: [P({ dispatchProfile: 'handoff' }), D({ dispatchProfile: 'handoff' })],
    prefill: proxyPrefill('handoff'),
  },
  'vLLM NIXL handoff (direct)': {
    instances: [
      P({ dispatchProfile: 'handoff', mode: 'direct' }),
      D({ dispatchProfile: 'handoff', mode: 'direct' }),
    ],
    prefill: () => json({ ...COMPLETION, kv_transfer_params: { remote_engine_id: 'p' }, usage: USAGE }),
  },
  'vllm-ascend layer-wise trigger (proxy)': {
    instances: [P({ dispatchProfile: 'trigger' }), D({ dispatchProfile: 'trigger' })],
    prefill: proxyPrefill('trigger'),
  },
  'SGLang bootstrap (direct)': {
    instances: [P({ engine: 'sglang', mode: 'direct' }), D({ engine: 'sglang', mode: 'direct' })],
    prefill: () => json({ ...COMPLETION, usage: USAGE }),
    sglang: true,
  },
};

interface Row {
  name: string;
  decodeFirst: Record<string, unknown>;
  /** Legs of the second, identical request: `single` = one plain leg on D, `pd` = prefill + decode. */
  first: 'single' | 'pd';
  second: 'single' | 'pd';
}

const ROWS: Row[] = [
  {
    name: 'cached rule hit on the repeated turn',
    decodeFirst: { minCachedFraction: 0.8, maxUncachedTokens: 0 },
    first: 'pd',
    second: 'single',
  },
  {
    name: 'cached rule missed (fraction 1 is never reached)',
    decodeFirst: { minCachedFraction: 1, maxUncachedTokens: 0 },
    first: 'pd',
    second: 'pd',
  },
  {
    name: 'short rule hit from the first request',
    decodeFirst: { minCachedFraction: 1, maxUncachedTokens: 100_000 },
    first: 'single',
    second: 'single',
  },
  { name: 'disabled', decodeFirst: { enabled: false }, first: 'pd', second: 'pd' },
];

const harnesses: DispatchHarness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.close()));
});

function engines(kind: EngineKind): Record<string, EngineScript> {
  return {
    P: (call) => kind.prefill(call),
    D: async (call, h) => {
      const steering = Object.keys(call.body).some((k) => /kv_transfer|bootstrap|_motor_prefill/.test(k));
      const pd = call.role === 'decode' || steering;
      if (kind.instances[1]!.dispatchProfile === 'trigger' && call.body.kv_transfer_params)
        await h.callMetaserver(call);
      const usage = pd ? USAGE : DECODE_USAGE;
      if (call.body.stream !== true) return json({ ...COMPLETION, usage });
      return {
        kind: 'sse',
        frames: [delta('Hel'), delta('lo'), JSON.stringify({ id: 'c', choices: [], usage })],
      };
    },
  };
}

/** `single`: the request's only leg went to D, plain (no KV steering; envelope role `single` by proxy). */
function legsOf(h: DispatchHarness, before: { P: number; D: number }): 'single' | 'pd' {
  const p = h.callsTo('P').length - before.P;
  const d = h.callsTo('D').slice(before.D);
  expect(d).toHaveLength(1);
  if (p === 1) return 'pd';
  expect(p).toBe(0);
  const leg = d[0]!;
  expect(Object.keys(leg.body).filter((k) => /kv_transfer|bootstrap/.test(k))).toEqual([]);
  if (leg.body._motor_dispatch) expect(leg.role).toBe('single'); // proxy mode: the envelope's role
  return 'single';
}

describe.each(Object.entries(KINDS))('%s', (_kindName, kind) => {
  it.each(ROWS)('$name', async (row) => {
    const h = new DispatchHarness(
      {
        instances: kind.instances,
        decodeFirst: { enabled: true, ...row.decodeFirst },
        scheduling: { decode: { scorers: [{ type: 'prefix-affinity' }] } },
      },
      engines(kind),
    );
    harnesses.push(h);
    const body = { messages: [{ role: 'user', content: TURN }], max_tokens: 8 };
    const want = kind.sglang ? ['pd', 'pd'] : [row.first, row.second];
    const got: string[] = [];
    for (const stream of [true, false]) {
      const before = { P: h.callsTo('P').length, D: h.callsTo('D').length };
      const reply = await h.send({ ...body, stream });
      expect(reply?.status).toBe(200);
      const legs = legsOf(h, before);
      got.push(legs);
      // decode-first answers like a P/D one, with the decode engine's own cached tokens in its usage
      const cached = legs === 'single' ? 96 : 3;
      if (stream) {
        expect(reply!.text).toContain(delta('lo'));
        expect(reply!.text.endsWith('data: [DONE]\n\n')).toBe(true);
        expect(reply!.text).toContain(`"cached_tokens":${cached}`);
      } else {
        const answer = JSON.parse(reply!.text);
        expect(answer.choices[0].message.content).toBe('Hello');
        expect(answer.usage.prompt_tokens_details).toEqual({ cached_tokens: cached });
      }
    }
    expect(got).toEqual(want);
  });
});

describe('decode-first and the rest of the attempt loop', () => {
  const instances = KINDS['vLLM NIXL handoff (proxy)']!.instances;
  const short = { enabled: true, minCachedFraction: 1, maxUncachedTokens: 100_000 };

  it('a decode-first stream that breaks after commit is migrated (continued on a new attempt)', async () => {
    let n = 0;
    const ok = engines(KINDS['vLLM NIXL handoff (proxy)']!);
    const h = new DispatchHarness(
      { instances, decodeFirst: short },
      {
        ...ok,
        D: (call, harness) =>
          n++ === 0 ? { kind: 'sse', frames: [delta('Hel')], end: 'truncate' } : ok.D!(call, harness),
      },
    );
    harnesses.push(h);
    const reply = await h.send({ messages: [{ role: 'user', content: TURN }], stream: true, max_tokens: 8 });
    expect(reply?.status).toBe(200);
    expect(h.callsTo('P')).toHaveLength(0);
    expect(h.callsTo('D').map((c) => c.role)).toEqual(['single', 'single']);
    expect(reply!.text.split('data: {"error"')).toHaveLength(1);
    expect(reply!.text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(h.observed('migration').length).toBeGreaterThan(0);
  });

  it('a decode-first leg refused before commit is retried (and the instance counted failed, not the prefill)', async () => {
    let n = 0;
    const ok = engines(KINDS['vLLM NIXL handoff (proxy)']!);
    const h = new DispatchHarness(
      { instances, decodeFirst: short },
      {
        ...ok,
        D: (call, harness) => (n++ === 0 ? { kind: 'refuse' } : ok.D!(call, harness)),
      },
    );
    harnesses.push(h);
    const reply = await h.send({ messages: [{ role: 'user', content: TURN }], stream: false, max_tokens: 8 });
    expect(reply?.status).toBe(200);
    expect(h.callsTo('P')).toHaveLength(0);
    expect(h.callsTo('D')).toHaveLength(2);
    expect(h.scheduling.scheduler.loadTracker.get('P').inflightRequests).toBe(0);
    expect(h.scheduling.scheduler.loadTracker.get('D').inflightRequests).toBe(0);
  });
});
