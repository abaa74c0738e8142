import { describe, expect, it } from 'vitest';
import { ManualClock } from '../common/clock.js';
import { Scheduler } from './scheduler.js';
import { fleet, instance, request } from './testing/index.js';
import type { SchedulableInstance, SchedulingDecision } from './types.js';

const H = 'prefill_handoff_decode';
const C = 'concurrent_engine_sync';

function describeDecision(d: SchedulingDecision): string {
  if (d.kind === 'pair') return `pair ${d.prefill.id}+${d.decode.id} ${d.plan}`;
  if (d.kind === 'single') return `single ${d.instance.id} ${d.reason}`;
  return `failure ${d.code}`;
}

describe('Scheduler.selectPair topology (conformance 12–16)', () => {
  const cases: {
    name: string;
    instances: SchedulableInstance[];
    config?: object;
    expect: RegExp;
    message?: RegExp;
  }[] = [
    {
      name: '12: P + D sharing a plan → pair',
      instances: [instance('p', 'prefill', [H]), instance('d', 'decode', [H])],
      expect: /^pair p\+d prefill_handoff_decode$/,
    },
    {
      name: '13: only U → single on U',
      instances: [instance('u', 'union', [])],
      expect: /^single u union$/,
    },
    {
      name: '13: only U, union fallback disabled → still single on U',
      instances: [instance('u', 'union', [])],
      config: { fallback: { union: false } },
      expect: /^single u union$/,
    },
    {
      name: '14: P, D without a shared plan, no U → failure naming the capability',
      instances: [instance('p', 'prefill', [H]), instance('d', 'decode', [C])],
      expect: /^failure no_compatible_pair$/,
      message: /no decode instance supports prefill_handoff_decode/,
    },
    {
      name: '14: P, D without a shared plan, U present → single on U',
      instances: [instance('p', 'prefill', [H]), instance('d', 'decode', [C]), instance('u', 'union', [])],
      expect: /^single u union$/,
    },
    {
      name: '14: P, D without a shared plan, U present, fallback off → failure',
      instances: [instance('p', 'prefill', [H]), instance('d', 'decode', [C]), instance('u', 'union', [])],
      config: { fallback: { union: false } },
      expect: /^failure no_compatible_pair$/,
    },
    {
      name: '14: decode with unknown capability → failure saying so',
      instances: [instance('p', 'prefill', [H]), instance('d', 'decode', ['unknown'])],
      expect: /^failure no_compatible_pair$/,
      message: /decode instances advertise no dispatch plan/,
    },
    {
      name: '15: only P → degraded single on P',
      instances: [instance('p', 'prefill', [H])],
      expect: /^single p degraded_prefill$/,
    },
    {
      name: '15: only P, fallback off → failure',
      instances: [instance('p', 'prefill', [H])],
      config: { fallback: { degradedPrefill: false } },
      expect: /^failure no_instances$/,
      message: /no decode instance is registered/,
    },
    {
      name: 'only D → failure',
      instances: [instance('d', 'decode', [H])],
      expect: /^failure no_instances$/,
    },
    {
      name: 'empty fleet → failure',
      instances: [],
      expect: /^failure no_instances$/,
    },
    {
      name: 'plan preference picks among shared plans',
      instances: [instance('p', 'prefill', [H, C]), instance('d', 'decode', [C, H])],
      config: { planPreference: [H, C] },
      expect: /^pair p\+d prefill_handoff_decode$/,
    },
    {
      name: 'P + D + U compatible → pair preferred',
      instances: [instance('p', 'prefill', [C]), instance('d', 'decode', [C]), instance('u', 'union', [])],
      expect: /^pair p\+d concurrent_engine_sync$/,
    },
    {
      name: 'conditional disaggregation: short prompt → union',
      instances: [instance('p', 'prefill', [C]), instance('d', 'decode', [C]), instance('u', 'union', [])],
      config: { disaggregation: { mode: 'conditional', shortPromptTokens: 100 } },
      expect: /^single u short_prompt$/,
    },
  ];
  it.each(cases)('$name', ({ instances, config, expect: pattern, message }) => {
    const decision = new Scheduler({ seed: 1, ...config }).selectPair(request(), instances);
    expect(describeDecision(decision)).toMatch(pattern);
    if (message) expect(decision.kind === 'failure' && decision.message).toMatch(message);
  });

  it.each(cases)('explain agrees with selectPair: $name', ({ instances, config }) => {
    const decision = new Scheduler({ seed: 1, ...config }).selectPair(request(), instances);
    const explained = new Scheduler({ seed: 1, ...config }).explain(request(), instances);
    if (decision.kind === 'pair') expect(explained).toMatchObject({ kind: 'pair', plan: decision.plan });
    else if (decision.kind === 'single')
      expect(explained).toMatchObject({ kind: 'single', reason: decision.reason });
    else expect(explained).toMatchObject({ kind: 'failure', failure: decision });
  });

  it('conditional disaggregation: long prompt → pair', () => {
    const s = new Scheduler({ disaggregation: { mode: 'conditional', shortPromptTokens: 100 } });
    const d = s.selectPair(request('x'.repeat(4000)), [
      instance('p', 'prefill', [C]),
      instance('d', 'decode', [C]),
      instance('u', 'union', []),
    ]);
    expect(d.kind).toBe('pair');
  });

  it('16: a mixed fleet never pairs incompatible instances', () => {
    const fleetMix = [
      ...fleet('ph', 'prefill', 5, [H]),
      ...fleet('pc', 'prefill', 5, [C]),
      ...fleet('dh', 'decode', 3, [H]),
      ...fleet('dc', 'decode', 7, [C]),
      ...fleet('px', 'prefill', 3, ['unknown']),
      ...fleet('dx', 'decode', 3, []),
    ];
    for (const scorer of ['prefix-affinity', 'least-load']) {
      for (const picker of ['max-score', 'random', 'round-robin', 'power-of-two']) {
        const s = new Scheduler({
          seed: 7,
          prefill: { scorers: [{ type: scorer }], picker: { type: picker } },
          decode: { picker: { type: picker } },
        });
        for (let i = 0; i < 200; i++) {
          const d = s.selectPair(request(`prompt ${i % 13} `.repeat(40)), fleetMix);
          expect(d.kind).toBe('pair');
          if (d.kind !== 'pair') continue;
          expect(d.prefill.dispatch_capabilities).toContain(d.plan);
          expect(d.decode.dispatch_capabilities).toContain(d.plan);
        }
      }
    }
  });

  it('16: only the compatible subset is used when most decodes lack the prefill plan', () => {
    const s = new Scheduler({ seed: 3, decode: { picker: { type: 'random' } } });
    const instances = [
      instance('p', 'prefill', [H]),
      ...fleet('dc', 'decode', 9, [C]),
      instance('dh', 'decode', [H]),
    ];
    for (let i = 0; i < 50; i++)
      expect(describeDecision(s.selectPair(request(), instances))).toBe(`pair p+dh ${H}`);
  });
});

describe('Scheduler with circuit breakers (conformance 31)', () => {
  it('routes around an open circuit, probes after the timeout, closes on success', () => {
    const clock = new ManualClock();
    const s = new Scheduler(
      { circuitBreaker: { failureThreshold: 2, openMs: 1000 }, prefill: { picker: { type: 'round-robin' } } },
      { clock },
    );
    const instances = [instance('p0', 'prefill'), instance('p1', 'prefill'), instance('d', 'decode')];
    s.breakers.record('p0', 'failure');
    s.breakers.record('p0', 'failure');
    for (let i = 0; i < 10; i++) {
      const d = s.selectPair(request(), instances);
      expect(d.kind === 'pair' && d.prefill.id).toBe('p1');
    }
    clock.advance(1000);
    expect(s.breakers.state('p0')).toBe('half_open');
    const picks = Array.from({ length: 6 }, () => {
      const d = s.selectPair(request(), instances);
      return d.kind === 'pair' ? d.prefill.id : '-';
    });
    expect(picks.filter((id) => id === 'p0')).toHaveLength(1); // one probe at a time
    s.breakers.record('p0', 'success');
    expect(s.breakers.state('p0')).toBe('closed');
  });

  it('all decodes open → degraded prefill; all prefills open → failure naming the filter', () => {
    const s = new Scheduler({ circuitBreaker: { failureThreshold: 1 } }, { clock: new ManualClock() });
    const instances = [instance('p', 'prefill'), instance('d', 'decode')];
    s.breakers.record('d', 'failure');
    expect(describeDecision(s.selectPair(request(), instances))).toBe('single p degraded_prefill');
    s.breakers.record('p', 'failure');
    const d = s.selectPair(request(), instances);
    expect(d.kind).toBe('failure');
    if (d.kind === 'failure') {
      expect(d.code).toBe('no_available_instance');
      expect(d.message).toMatch(/circuit-breaker/);
      expect(d.filtered['circuit-breaker']).toBe(2);
    }
  });

  it('filtering that leaves only incompatible instances falls back to union', () => {
    const s = new Scheduler({ circuitBreaker: { failureThreshold: 1 } }, { clock: new ManualClock() });
    const instances = [
      instance('ph', 'prefill', [H]),
      instance('dh', 'decode', [H]),
      instance('dc', 'decode', [C]),
      instance('u', 'union', []),
    ];
    s.breakers.record('dh', 'failure');
    expect(describeDecision(s.selectPair(request(), instances))).toBe('single u union');
  });
});

describe('Scheduler prefix affinity end to end', () => {
  it('keeps a conversation on the instance that holds its prefix and reports cached tokens', () => {
    const s = new Scheduler({ seed: 5 });
    const instances = [...fleet('p', 'prefill', 4), instance('d', 'decode')];
    const system = 'You are a helpful assistant. '.repeat(40);
    let conversation = system;
    const first = s.selectPair(request(conversation), instances);
    expect(first.kind).toBe('pair');
    if (first.kind !== 'pair') return;
    expect(first.cachedPromptTokens).toBe(0);
    for (let turn = 0; turn < 5; turn++) {
      conversation += ` user: question ${turn}? assistant: answer ${turn}.`;
      const d = s.selectPair(request(conversation), instances);
      expect(d.kind === 'pair' && d.prefill.id).toBe(first.prefill.id);
      expect(d.kind === 'pair' && d.cachedPromptTokens).toBeGreaterThan(200);
    }
  });

  it('spreads a hot prefix once the holder is loaded', () => {
    const s = new Scheduler({ seed: 5 });
    const instances = [...fleet('p', 'prefill', 4), instance('d', 'decode')];
    const hot = 'shared system prompt '.repeat(100);
    const used = new Set<string>();
    for (let i = 0; i < 64; i++) {
      const req = request(hot + ` user ${i}`);
      const d = s.selectPair(req, instances);
      if (d.kind !== 'pair') throw new Error('expected pair');
      used.add(d.prefill.id);
      s.loadTracker.begin(d.prefill.id, {
        promptTokens: req.promptTokens,
        cachedPromptTokens: d.cachedPromptTokens,
      });
    }
    expect(used.size).toBe(4);
    const inflight = [...s.loadTracker.snapshot().values()].map((l) => l.inflightRequests);
    expect(Math.max(...inflight) - Math.min(...inflight)).toBeLessThanOrEqual(20);
  });

  it('forgetInstance drops learnt prefixes', () => {
    const s = new Scheduler({ seed: 5 });
    const instances = [...fleet('p', 'prefill', 2), instance('d', 'decode')];
    const text = 'abc '.repeat(200);
    const first = s.selectPair(request(text), instances);
    if (first.kind !== 'pair') throw new Error('expected pair');
    expect(s.selectPair(request(text), instances)).toMatchObject({ cachedPromptTokens: 192 }); // 800 chars = 12 full 64-char blocks;
    s.forgetInstance(first.prefill.id);
    expect(s.selectPair(request(text), instances)).toMatchObject({ cachedPromptTokens: 0 });
  });

  it('keys the prefix index with the cache salt: another tenant never sees a cache hit (issue 15 #8)', () => {
    const s = new Scheduler({ seed: 5 });
    const instances = [...fleet('p', 'prefill', 2), instance('d', 'decode')];
    const text = 'victim system prompt '.repeat(40);
    const salted = (cacheSalt: string) => ({ ...request(text), cacheSalt });
    expect(s.selectPair(salted('tenant-a'), instances)).toMatchObject({ cachedPromptTokens: 0 });
    expect(s.selectPair(salted('tenant-a'), instances).kind === 'pair').toBe(true);
    expect(s.selectPair(salted('tenant-a'), instances)).not.toMatchObject({ cachedPromptTokens: 0 });
    expect(s.selectPair(salted('tenant-b'), instances)).toMatchObject({ cachedPromptTokens: 0 });
    expect(s.selectPair(request(text), instances)).toMatchObject({ cachedPromptTokens: 0 });
  });

  it('uses token ids when given', () => {
    const s = new Scheduler({ seed: 5 });
    const instances = [...fleet('p', 'prefill', 3), instance('d', 'decode')];
    const ids = Array.from({ length: 100 }, (_, i) => i * 7);
    const req = { model: 'm', promptTokenIds: ids, promptTokens: ids.length };
    const a = s.selectPair(req, instances);
    const b = s.selectPair(req, instances);
    expect(a.kind === 'pair' && b.kind === 'pair' && a.prefill.id === b.prefill.id).toBe(true);
    expect(b).toMatchObject({ cachedPromptTokens: 96 });
  });
});

describe('Scheduler stats', () => {
  it('counts decisions by kind', () => {
    const s = new Scheduler();
    s.selectPair(request(), [instance('p', 'prefill'), instance('d', 'decode')]);
    s.selectPair(request(), [instance('u', 'union')]);
    s.selectPair(request(), []);
    expect(s.stats).toMatchObject({ pairs: 1, singles: { union: 1 }, failures: { no_instances: 1 } });
  });
});

describe('Scheduler.explain is side-effect free', () => {
  const pairs = (s: Scheduler, instances: SchedulableInstance[], n: number) =>
    Array.from({ length: n }, () => describeDecision(s.selectPair(request(), instances)));

  it.each(['round-robin', 'random', 'power-of-two'])(
    '%s: explaining moves no picker state, random draw or stat',
    (picker) => {
      const config = { seed: 9, prefill: { picker: { type: picker } }, decode: { picker: { type: picker } } };
      const instances = [...fleet('p', 'prefill', 3), ...fleet('d', 'decode', 3)];
      const explained = new Scheduler(config);
      for (let i = 0; i < 7; i++) explained.explain(request(), instances);
      expect(explained.stats).toMatchObject({ pairs: 0, failures: { no_instances: 0 } });
      expect(pairs(explained, instances, 6)).toEqual(pairs(new Scheduler(config), instances, 6));
    },
  );

  it('takes no half-open probe slot and counts no failure', () => {
    const clock = new ManualClock();
    const s = new Scheduler({ circuitBreaker: { failureThreshold: 1, openMs: 1000 } }, { clock });
    const instances = [instance('p', 'prefill'), instance('d', 'decode')];
    s.breakers.record('p', 'failure');
    expect(s.explain(request(), instances)).toMatchObject({
      kind: 'failure',
      failure: { code: 'no_available_instance', filtered: { 'circuit-breaker': 1 } },
    });
    clock.advance(1000);
    for (let i = 0; i < 3; i++) expect(s.explain(request(), instances)).toMatchObject({ kind: 'pair' });
    expect(s.breakers.isAvailable('p')).toBe(true);
    expect(s.stats.failures.no_available_instance).toBe(0);
    expect(describeDecision(s.selectPair(request(), instances))).toBe(`pair p+d ${H}`);
    expect(s.breakers.isAvailable('p')).toBe(false); // the real pick took the one probe slot
  });

  it.each<[string, object, string]>([
    ['filters applied', {}, 'single'],
    ['assumeAvailable: the topology', { assumeAvailable: true }, 'pair'],
  ])('open decode circuit, %s → %s', (_name, options, kind) => {
    const s = new Scheduler({ circuitBreaker: { failureThreshold: 1 } }, { clock: new ManualClock() });
    const instances = [instance('p', 'prefill', [H, C]), instance('d', 'decode', [C])];
    s.breakers.record('d', 'failure');
    const explained = s.explain(request(), instances, options);
    expect(explained.kind).toBe(kind);
    expect(explained.fleet).toEqual({
      prefill: 1,
      decode: 1,
      union: 0,
      prefillPlans: [C, H],
      decodePlans: [C],
    });
  });
});
