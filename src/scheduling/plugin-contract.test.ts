/**
 * One contract suite run against every registered plugin: whatever a plugin does, it must respect these
 * properties. A new plugin in `schedulingPlugins` is covered automatically.
 */
import { describe, expect, it } from 'vitest';
import { CircuitBreakers } from './circuit-breaker.js';
import { ManualClock } from '../common/clock.js';
import { EngineMetricsStore } from './engine-metrics.js';
import { LoadTracker } from './load-tracker.js';
import type {
  Filter,
  Picker,
  PluginDefinition,
  PluginKind,
  Scorer,
  SchedulingServices,
  SelectionContext,
} from './plugin.js';
import { schedulingPlugins } from './plugin-registry.js';
import { textBlockHashes } from './prefix-hash.js';
import { seededRandom } from './seeded-random.js';
import { fleet, request } from './testing/index.js';
import type { SchedulableInstance, SchedulingRequest } from './types.js';

function services(seed = 1): SchedulingServices & { clock: ManualClock } {
  const clock = new ManualClock();
  const loadTracker = new LoadTracker();
  const engineMetrics = new EngineMetricsStore({ clock });
  const breakers = new CircuitBreakers({ clock, failureThreshold: 1 });
  return { clock, loadTracker, engineMetrics, breakers, random: seededRandom(seed) };
}

/** A busy, varied world: load, metrics (some stale), an open circuit. */
function populate(s: ReturnType<typeof services>, instances: readonly SchedulableInstance[]): void {
  instances.forEach((inst, i) => {
    for (let k = 0; k < i % 5; k++) s.loadTracker.begin(inst.id, { promptTokens: 100 * k });
    if (i % 3 !== 2) {
      s.engineMetrics.update(inst.id, {
        num_requests_running: i % 7,
        num_requests_waiting: i % 4,
        kv_cache_usage_perc: (i % 10) / 10,
        scraped_at_ms: s.clock.now() - (i % 6 === 0 ? 60_000 : 10),
      });
    }
  });
  if (instances[1]) s.breakers.record(instances[1].id, 'failure');
}

function context(req: SchedulingRequest, random = seededRandom(9), nowMs = 1_000_000): SelectionContext {
  const hashes = new Map<number, number[]>();
  return {
    request: req,
    role: 'prefill',
    nowMs,
    random,
    blockHashes: (bs) => {
      let h = hashes.get(bs);
      if (!h) hashes.set(bs, (h = textBlockHashes(req.promptText ?? '', bs)));
      return h;
    },
    noteCachedTokens: () => {},
  };
}

const sizes = [0, 1, 2, 7, 64];
const requests = [
  request(''),
  request('hello'),
  request('system prompt '.repeat(100), { sessionKey: 's-1' }),
];

type AnyDef = PluginDefinition<PluginKind, unknown>;
const defs = schedulingPlugins as readonly AnyDef[];

/** Runs one plugin on candidates with some random scores (pickers) and returns a comparable trace. */
function runOnce(def: AnyDef, seed: number, instances: readonly SchedulableInstance[]): unknown[] {
  const s = services(seed);
  populate(s, instances);
  const plugin = def.create(def.params.parse({}), s);
  const trace: unknown[] = [];
  const random = seededRandom(seed);
  for (const req of requests) {
    for (let round = 0; round < 3; round++) {
      const ctx = context(req, random, s.clock.now());
      if (def.kind === 'filter') trace.push((plugin as Filter).filter(ctx, instances).map((x) => x.id));
      else if (def.kind === 'scorer') {
        const out = new Float64Array(instances.length);
        (plugin as Scorer).score(ctx, instances, out);
        trace.push([...out]);
        if (instances[0]) (plugin as Scorer).onPicked?.(ctx, instances[0]);
      } else {
        const scores = Float64Array.from(instances, (_, i) => (i * 7919) % 13);
        trace.push((plugin as Picker).pick(ctx, instances, scores));
      }
    }
  }
  return trace;
}

describe.each(defs.map((d) => [d.type, d] as const))('plugin contract: %s', (_type, def) => {
  it('has a unique type, a description, and default params that validate', () => {
    expect(defs.filter((d) => d.type === def.type)).toHaveLength(1);
    expect(def.description.length).toBeGreaterThan(10);
    expect(def.params.safeParse({}).success).toBe(true);
    expect(def.params.safeParse({ notAParam: 1 }).success).toBe(false);
  });

  it.each(sizes)('handles %i candidates within the contract', (n) => {
    const s = services();
    const instances = fleet('i', 'prefill', n);
    populate(s, instances);
    const plugin = def.create(def.params.parse({}), s);
    for (const req of requests) {
      const ctx = context(req, seededRandom(n), s.clock.now());
      if (def.kind === 'filter') {
        const kept = (plugin as Filter).filter(ctx, instances);
        // A subset, in the original order.
        let j = 0;
        for (const k of kept) {
          while (j < instances.length && instances[j] !== k) j++;
          expect(j).toBeLessThan(instances.length);
          j++;
        }
      } else if (def.kind === 'scorer') {
        const out = new Float64Array(n).fill(NaN);
        (plugin as Scorer).score(ctx, instances, out);
        for (const v of out) {
          expect(Number.isFinite(v)).toBe(true);
          expect(v).toBeGreaterThanOrEqual(0);
          expect(v).toBeLessThanOrEqual(1);
        }
      } else {
        const scores = Float64Array.from(instances, (_, i) => (i * 31) % 5);
        const index = (plugin as Picker).pick(ctx, instances, scores);
        if (n === 0) expect(index).toBe(-1);
        else {
          expect(Number.isInteger(index)).toBe(true);
          expect(index).toBeGreaterThanOrEqual(0);
          expect(index).toBeLessThan(n);
        }
      }
    }
  });

  it('is deterministic for a seed', () => {
    const instances = fleet('i', 'prefill', 12);
    expect(runOnce(def, 42, instances)).toEqual(runOnce(def, 42, instances));
  });

  it('never lets the scheduler return a filtered-out instance', async () => {
    const { Scheduler } = await import('./scheduler.js');
    const ref = { type: def.type };
    const profile =
      def.kind === 'filter'
        ? { filters: [ref] }
        : def.kind === 'scorer'
          ? { scorers: [ref] }
          : { picker: ref };
    const clock = new ManualClock();
    const s = new Scheduler(
      {
        seed: 11,
        circuitBreaker: { failureThreshold: 1 },
        prefill: profile,
        decode: profile,
        union: profile,
      },
      { clock },
    );
    const instances = [...fleet('p', 'prefill', 6), ...fleet('d', 'decode', 6)];
    const open = new Set(['p0', 'p3', 'p5', 'd1', 'd2']);
    for (const id of open) s.breakers.record(id, 'failure');
    for (let i = 0; i < 60; i++) {
      const d = s.selectPair(request(`req ${i % 4} `.repeat(30), { sessionKey: `s${i % 3}` }), instances);
      expect(d.kind).toBe('pair');
      if (d.kind !== 'pair') continue;
      expect(open.has(d.prefill.id)).toBe(false);
      expect(open.has(d.decode.id)).toBe(false);
    }
  });

  it('scales linearly with the number of candidates (sanity)', () => {
    const time = (n: number) => {
      const s = services();
      const instances = fleet('i', 'prefill', n);
      const plugin = def.create(def.params.parse({}), s);
      const out = new Float64Array(n);
      const ctx = context(request('x'.repeat(2048)));
      const rounds = Math.max(20, Math.floor(40_000 / n));
      // CPU time, not wall time: other processes on the machine do not inflate it.
      const start = process.cpuUsage();
      for (let r = 0; r < rounds; r++) {
        if (def.kind === 'filter') (plugin as Filter).filter(ctx, instances);
        else if (def.kind === 'scorer') (plugin as Scorer).score(ctx, instances, out);
        else (plugin as Picker).pick(ctx, instances, out);
      }
      const used = process.cpuUsage(start);
      return (used.user + used.system) / rounds / n; // µs per candidate
    };
    time(256); // warm up
    const best = (n: number) => Math.min(time(n), time(n), time(n), time(n), time(n)); // least noisy of five
    const small = Math.max(best(256), 1e-4);
    const large = best(4096);
    // Per-candidate cost must not grow with n (quadratic behaviour would make this ~16×).
    expect(large / small).toBeLessThan(8);
  });
});
