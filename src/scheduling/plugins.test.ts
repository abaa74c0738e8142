/** Table-driven unit tests, one block per plugin. */
import { describe, expect, it } from 'vitest';
import { CircuitBreakers } from './circuit-breaker.js';
import { ManualClock } from '../common/clock.js';
import { EngineMetricsStore } from './engine-metrics.js';
import { LoadTracker } from './load-tracker.js';
import type { Picker, Scorer, SchedulingServices, SelectionContext } from './plugin.js';
import { engineMetricsScorer } from './plugins/engine-metrics-scorer.js';
import { kvPressureFilter } from './plugins/kv-pressure-filter.js';
import { leastLoadScorer } from './plugins/least-load-scorer.js';
import { maxScorePicker } from './plugins/max-score-picker.js';
import { powerOfTwoPicker } from './plugins/power-of-two-picker.js';
import { precisePrefixScorer } from './plugins/precise-prefix-scorer.js';
import { prefixAffinityScorer } from './plugins/prefix-affinity-scorer.js';
import { randomPicker } from './plugins/random-picker.js';
import { roundRobinPicker } from './plugins/round-robin-picker.js';
import { sessionAffinityScorer } from './plugins/session-affinity-scorer.js';
import { textBlockHashes } from './prefix-hash.js';
import { seededRandom } from './seeded-random.js';
import { fleet, instance, request } from './testing/index.js';
import type { SchedulableInstance, SchedulingRequest } from './types.js';

function services(): SchedulingServices & { clock: ManualClock } {
  const clock = new ManualClock();
  return {
    clock,
    loadTracker: new LoadTracker(),
    engineMetrics: new EngineMetricsStore({ clock, staleAfterMs: 1000 }),
    breakers: new CircuitBreakers({ clock }),
    random: seededRandom(1),
  };
}

function ctx(
  req: SchedulingRequest = request(),
  random = seededRandom(3),
  cached?: Map<string, number>,
): SelectionContext {
  return {
    request: req,
    role: 'prefill',
    nowMs: 1_000_000,
    random,
    blockHashes: (bs) => textBlockHashes(req.promptText ?? '', bs),
    noteCachedTokens: (id, t) => cached?.set(id, t),
  };
}

function scores(scorer: Scorer, candidates: readonly SchedulableInstance[], c = ctx()): number[] {
  const out = new Float64Array(candidates.length);
  scorer.score(c, candidates, out);
  return [...out].map((x) => Math.round(x * 1000) / 1000);
}

function picks(
  picker: Picker,
  candidates: readonly SchedulableInstance[],
  n: number,
  s?: number[],
): string[] {
  const c = ctx();
  const arr = Float64Array.from(s ?? candidates.map(() => 0));
  return Array.from({ length: n }, () => candidates[picker.pick(c, candidates, arr)]!.id);
}

const three = fleet('i', 'prefill', 3);

describe('least-load scorer', () => {
  it.each([
    { name: 'idle fleet → all equal', loads: [[], [], []], expected: [1, 1, 1] },
    { name: 'fewer requests wins', loads: [[0, 0], [0], []], expected: [0, 0.5, 1] },
    {
      name: 'tokens count (1024 tokens ≈ 1 request)',
      loads: [[1024], [0, 0, 0], [0]],
      expected: [0.5, 0, 1],
    },
  ])('$name', ({ loads, expected }) => {
    const s = services();
    loads.forEach((reqs, i) => reqs.forEach((t) => s.loadTracker.begin(`i${i}`, { promptTokens: t })));
    expect(scores(leastLoadScorer.create(leastLoadScorer.params.parse({}), s), three)).toEqual(expected);
  });

  it('divides load by instance weight', () => {
    const s = services();
    const cands = [instance('a', 'prefill', [], 4), instance('b', 'prefill')];
    for (let k = 0; k < 4; k++) s.loadTracker.begin('a', { promptTokens: 0 });
    s.loadTracker.begin('b', { promptTokens: 0 });
    s.loadTracker.begin('b', { promptTokens: 0 });
    expect(scores(leastLoadScorer.create(leastLoadScorer.params.parse({}), s), cands)).toEqual([1, 0]);
  });
});

describe('engine-metrics scorer', () => {
  it.each([
    {
      name: 'shorter queue wins',
      metrics: [
        { w: 4, kv: 0 },
        { w: 0, kv: 0 },
        { w: 2, kv: 0 },
      ],
      expected: [0, 1, 0.5],
    },
    {
      name: 'KV usage counts',
      metrics: [
        { w: 0, kv: 0.9 },
        { w: 0, kv: 0.1 },
        { w: 0, kv: 0.5 },
      ],
      expected: [0, 1, 0.5],
    },
    {
      name: 'stale and missing are neutral',
      metrics: [{ w: 5, kv: 0, ageMs: 5000 }, { w: 0, kv: 0 }, null],
      expected: [0.5, 1, 0.5],
      fallbacks: { missing: 1, stale: 1 },
    },
  ])('$name', ({ metrics, expected, fallbacks }) => {
    const s = services();
    metrics.forEach((m, i) => {
      if (m)
        s.engineMetrics.update(`i${i}`, {
          num_requests_running: 0,
          num_requests_waiting: m.w,
          kv_cache_usage_perc: m.kv,
          scraped_at_ms: s.clock.now() - ((m as { ageMs?: number }).ageMs ?? 0),
        });
    });
    expect(scores(engineMetricsScorer.create(engineMetricsScorer.params.parse({}), s), three)).toEqual(
      expected,
    );
    if (fallbacks) expect(s.engineMetrics.fallbacks).toEqual(fallbacks);
  });
});

describe('kv-pressure filter', () => {
  it.each([
    { name: 'drops instances above the KV threshold', kv: [0.99, 0.5, 0.2], expected: ['i1', 'i2'] },
    { name: 'keeps all when every instance is above', kv: [0.99, 0.98, 0.97], expected: ['i0', 'i1', 'i2'] },
    { name: 'keeps instances without fresh metrics', kv: [0.99, null, 0.2], expected: ['i1', 'i2'] },
  ])('$name', ({ kv, expected }) => {
    const s = services();
    kv.forEach((v, i) => {
      if (v !== null)
        s.engineMetrics.update(`i${i}`, {
          num_requests_running: 0,
          num_requests_waiting: 0,
          kv_cache_usage_perc: v,
          scraped_at_ms: s.clock.now(),
        });
    });
    const filter = kvPressureFilter.create(kvPressureFilter.params.parse({}), s);
    expect(filter.filter(ctx(), three).map((x) => x.id)).toEqual(expected);
  });
});

describe('session-affinity scorer', () => {
  const scorer = sessionAffinityScorer.create({}, services());
  const ten = fleet('i', 'prefill', 10);

  it('no session key → neutral', () => {
    expect(scores(scorer, ten)).toEqual(new Array(10).fill(0));
  });

  it('same key → same instance; keys spread over instances', () => {
    const owners = new Map<string, string>();
    for (let k = 0; k < 200; k++) {
      const out = scores(scorer, ten, ctx(request('x', { sessionKey: `session-${k}` })));
      expect(out.filter((x) => x === 1)).toHaveLength(1);
      owners.set(`session-${k}`, ten[out.indexOf(1)]!.id);
      const again = scores(scorer, ten, ctx(request('x', { sessionKey: `session-${k}` })));
      expect(again).toEqual(out);
    }
    expect(new Set(owners.values()).size).toBe(10);
  });

  it('removing an instance only moves its own sessions (consistent hashing)', () => {
    const owner = (cands: readonly SchedulableInstance[], key: string) => {
      const out = scores(scorer, cands, ctx(request('x', { sessionKey: key })));
      return cands[out.indexOf(1)]!.id;
    };
    const without = ten.filter((x) => x.id !== 'i3');
    let moved = 0;
    for (let k = 0; k < 300; k++) {
      const before = owner(ten, `k${k}`);
      const after = owner(without, `k${k}`);
      if (before !== 'i3') expect(after).toBe(before);
      else moved++;
    }
    expect(moved).toBeGreaterThan(10);
  });
});

describe('prefix-affinity scorer', () => {
  const system = 'S'.repeat(64 * 30); // 30 blocks = 480 tokens
  const make = (s: SchedulingServices, params: object = {}) =>
    prefixAffinityScorer.create(prefixAffinityScorer.params.parse(params), s);

  it('idle, nothing cached → all equal', () => {
    expect(scores(make(services()), three, ctx(request(system)))).toEqual([1, 1, 1]);
  });

  it('prefers the holder of the longest prefix and notes cached tokens', () => {
    const s = services();
    const scorer = make(s);
    scorer.onPicked!(ctx(request(system)), three[1]!);
    scorer.onPicked!(ctx(request(system.slice(0, 64 * 10))), three[2]!);
    const cached = new Map<string, number>();
    const out = scores(scorer, three, ctx(request(system + ' more text'), seededRandom(1), cached));
    expect(out[1]).toBe(1);
    expect(out[2]).toBeLessThan(1);
    expect(out[2]).toBeGreaterThan(out[0]!);
    expect(cached.get('i1')).toBe(480);
    expect(cached.get('i2')).toBe(160);
    expect(cached.has('i0')).toBe(false);
  });

  it.each([
    { name: 'small queue on the holder → holder still wins', pendingTokens: 200, holderWins: true },
    {
      name: 'queued prefill beyond the recompute cost → another instance wins',
      pendingTokens: 2000,
      holderWins: false,
    },
  ])('cost trade-off: $name', ({ pendingTokens, holderWins }) => {
    const s = services();
    const scorer = make(s, { requestTokens: 0 });
    scorer.onPicked!(ctx(request(system)), three[0]!);
    s.loadTracker.begin('i0', { promptTokens: pendingTokens });
    const out = scores(scorer, three, ctx(request(system)));
    expect(out[0]! === 1).toBe(holderWins);
  });

  it('imbalance guard ignores the cache of an overloaded holder', () => {
    const s = services();
    const scorer = make(s, {
      imbalanceAbsolute: 4,
      imbalanceRatio: 2,
      requestTokens: 0,
      uncachedTokenWeight: 100,
    });
    scorer.onPicked!(ctx(request(system)), three[0]!);
    for (let k = 0; k < 4; k++) s.loadTracker.begin('i0', { promptTokens: 0 }).firstToken();
    expect(scores(scorer, three, ctx(request(system)))[0]).toBe(1); // at the limit: still preferred
    s.loadTracker.begin('i0', { promptTokens: 0 }).firstToken();
    const cached = new Map<string, number>();
    const out = scores(scorer, three, ctx(request(system), seededRandom(1), cached));
    expect(out).toEqual([1, 1, 1]); // beyond: treated as uncached
    expect(cached.size).toBe(0);
  });

  it('at most promptTokens - 1 tokens count as cached', () => {
    const s = services();
    const scorer = make(s);
    const req = { model: 'm', promptTokenIds: Array.from({ length: 32 }, (_, i) => i), promptTokens: 32 };
    const c = (cached?: Map<string, number>): SelectionContext => ({
      ...ctx(req, seededRandom(1), cached),
      blockHashes: () => [1, 2],
    });
    scorer.onPicked!(c(), three[0]!);
    const cached = new Map<string, number>();
    scorer.score(c(cached), three, new Float64Array(3));
    expect(cached.get('i0')).toBe(31);
  });

  it('forget drops an instance', () => {
    const s = services();
    const scorer = make(s);
    scorer.onPicked!(ctx(request(system)), three[0]!);
    scorer.forget!('i0');
    expect(scores(scorer, three, ctx(request(system)))).toEqual([1, 1, 1]);
  });
});

describe('max-score picker', () => {
  const picker = maxScorePicker.create({}, services());
  it.each([
    { scores: [0.1, 0.9, 0.5], expected: 'i1' },
    { scores: [2, 1, 0], expected: 'i0' },
  ])('highest of $scores → $expected', ({ scores: s, expected }) => {
    expect(new Set(picks(picker, three, 20, s))).toEqual(new Set([expected]));
  });
  it('breaks ties at random among the best only', () => {
    expect(new Set(picks(picker, three, 200, [1, 0, 1]))).toEqual(new Set(['i0', 'i2']));
  });
});

describe('random picker', () => {
  it('is uniform-ish and seedable', () => {
    const a = picks(randomPicker.create({ seed: 5 }, services()), three, 3000);
    const b = picks(randomPicker.create({ seed: 5 }, services()), three, 3000);
    expect(a).toEqual(b);
    for (const id of ['i0', 'i1', 'i2']) expect(a.filter((x) => x === id).length).toBeGreaterThan(850);
  });
  it('respects instance weights', () => {
    const cands = [instance('heavy', 'prefill', [], 3), instance('light', 'prefill')];
    const got = picks(randomPicker.create({ seed: 5 }, services()), cands, 4000);
    const heavy = got.filter((x) => x === 'heavy').length;
    expect(heavy / 4000).toBeGreaterThan(0.7);
    expect(heavy / 4000).toBeLessThan(0.8);
  });
});

describe('round-robin picker', () => {
  it.each([
    { name: 'rotates equal weights', cands: three, expected: ['i0', 'i1', 'i2', 'i0', 'i1', 'i2'] },
    {
      name: 'smooth weighted rotation',
      cands: [instance('a', 'prefill', [], 2), instance('b', 'prefill')],
      expected: ['a', 'b', 'a', 'a', 'b', 'a'],
    },
  ])('$name', ({ cands, expected }) => {
    expect(picks(roundRobinPicker.create({}, services()), cands, expected.length)).toEqual(expected);
  });
});

describe('power-of-two picker', () => {
  const picker = powerOfTwoPicker.create({}, services());
  it('never picks the worst of three', () => {
    expect(picks(picker, three, 300, [0.5, 1, 0])).not.toContain('i2');
  });
  it('picks the only candidate', () => {
    expect(picks(picker, three.slice(0, 1), 3)).toEqual(['i0', 'i0', 'i0']);
  });
  it('samples every candidate when scores tie', () => {
    expect(new Set(picks(picker, fleet('i', 'prefill', 8), 400)).size).toBe(8);
  });
});

describe('precise-prefix scorer', () => {
  const system = 'S'.repeat(64 * 30); // 30 text blocks of history
  const make = (s: SchedulingServices) => precisePrefixScorer.create(precisePrefixScorer.params.parse({}), s);
  const kv = (cachedTokens: Record<string, number>) => ({
    kvPrediction: { promptTokens: 800, cachedTokens: new Map(Object.entries(cachedTokens)) },
  });

  it("scores by the engines' reported blocks, not by routed history", () => {
    const scorer = make(services());
    scorer.onPicked!(ctx(request(system)), three[0]!); // history says i0 holds the prompt …
    const cached = new Map<string, number>();
    // … the events say i0 evicted it and i2 (served by another coordinator) holds 512 tokens
    const out = scores(scorer, three, ctx(request(system, kv({ i0: 0, i1: 0, i2: 512 })), undefined, cached));
    expect(out[2]).toBe(1);
    expect(out[0]).toBe(out[1]);
    expect(out[0]).toBeLessThan(1);
    expect(cached).toEqual(new Map([['i2', 512]]));
  });

  it('falls back to routed history per instance without events, and for a request without a prediction', () => {
    const scorer = make(services());
    scorer.onPicked!(ctx(request(system)), three[1]!);
    const partial = scores(scorer, three, ctx(request(system, kv({ i0: 0 }))));
    expect(partial[1]).toBe(1);
    const none = scores(scorer, three, ctx(request(system)));
    const approximate = prefixAffinityScorer.create(prefixAffinityScorer.params.parse({}), services());
    approximate.onPicked!(ctx(request(system)), three[1]!);
    expect(none).toEqual(scores(approximate, three, ctx(request(system))));
  });

  it('prefix-affinity ignores a prediction (the approximate scorer is unchanged)', () => {
    const scorer = prefixAffinityScorer.create(prefixAffinityScorer.params.parse({}), services());
    expect(scores(scorer, three, ctx(request(system, kv({ i2: 512 }))))).toEqual([1, 1, 1]);
  });
});
