import { describe, expect, it } from 'vitest';
import { validateCoordinatorConfig } from '../config/coordinator-config.js';
import { StaticInstanceSource, type Instance } from './instance-source.js';
import { MotorError } from './motor-error.js';
import { selectRoute, topologyReport, type Route } from './route-selection.js';
import { RoundRobinScheduler } from './scheduler.js';

const H = { dispatchProfile: 'handoff' };
const T = { dispatchProfile: 'trigger' };
const S = { engine: 'sglang' };
const N = {}; // unknown profile: no capability

function fleet(...specs: Array<[string, Record<string, unknown>]>): Instance[] {
  const config = validateCoordinatorConfig({
    instances: specs.map(([role, extra], i) => ({
      id: `${role[0]}${i}`,
      url: `http://h${i}:1`,
      role,
      ...extra,
    })),
  });
  return [...new StaticInstanceSource(config.instances).routable()];
}

function route(instances: Instance[], fallbackToSingle = false, exclude: string[] = []): Route | string {
  try {
    return selectRoute(
      instances,
      'm',
      new RoundRobinScheduler(),
      { fallbackToSingle, planPreference: ['prefill_handoff_decode', 'concurrent_engine_sync'] },
      new Set(exclude),
    );
  } catch (err) {
    if (err instanceof MotorError) return `${err.status} ${err.message}`;
    throw err;
  }
}

const describeRoute = (r: Route | string): string =>
  typeof r === 'string'
    ? r
    : r.kind === 'pd'
      ? `pd ${r.flow} ${r.prefill.id}->${r.decode.id}`
      : `single ${r.instance.id}${r.degraded ? ' degraded' : ''}`;

describe('route selection (conformance 12–16)', () => {
  it.each<[string, Instance[], boolean, string]>([
    ['12 P+D handoff', fleet(['prefill', H], ['decode', H]), false, 'pd handoff p0->d1'],
    ['12 P+D trigger', fleet(['prefill', T], ['decode', T]), false, 'pd trigger p0->d1'],
    ['12 P+D sglang bootstrap', fleet(['prefill', S], ['decode', S]), false, 'pd bootstrap p0->d1'],
    ['13 only U', fleet(['union', N]), false, 'single u0'],
    ['14 no shared plan, no U', fleet(['prefill', H], ['decode', T]), true, '503 no prefill/decode pair'],
    ['14 no shared plan, U, fallback', fleet(['prefill', H], ['decode', T], ['union', N]), true, 'single u2'],
    ['14 no shared plan, U, no fallback', fleet(['prefill', H], ['decode', T], ['union', N]), false, '503'],
    [
      '14 unknown profile fails closed',
      fleet(['prefill', N], ['decode', H]),
      false,
      'prefill instances advertise no dispatch capability',
    ],
    ['15 only P, fallback', fleet(['prefill', H]), true, 'single p0 degraded'],
    ['15 only P, no fallback', fleet(['prefill', H]), false, '503 no decode instance'],
    [
      '16 mixed fleet pairs compatibly',
      fleet(['prefill', H], ['decode', T], ['prefill', T]),
      false,
      'pd trigger p2->d1',
    ],
    [
      '16 mixed fleet pairs compatibly (2)',
      fleet(['prefill', T], ['decode', H], ['decode', N], ['prefill', H]),
      false,
      'pd handoff p3->d1',
    ],
  ])('%s', (_name, instances, fallback, expected) => {
    expect(describeRoute(route(instances, fallback))).toContain(expected);
  });

  it('names the missing capability', () => {
    expect(route(fleet(['prefill', H], ['decode', T]))).toMatch(
      /missing capability: decode instances lack prefill_handoff_decode and prefill instances lack concurrent_engine_sync/,
    );
  });

  it('avoids excluded instances when another route exists, else reuses them', () => {
    const f = fleet(['prefill', H], ['decode', H], ['decode', H]);
    expect(describeRoute(route(f, false, ['d1']))).toBe('pd handoff p0->d2');
    expect(describeRoute(route(f, false, ['p0']))).toMatch(/^pd handoff p0->/);
  });

  it('unknown model → 404', () => {
    const f = fleet(['union', { models: ['other'] }]);
    expect(route(f)).toMatch(/^404 The model 'm'/);
  });

  it('topology report drives /ready', () => {
    const opts = { fallbackToSingle: false, planPreference: ['prefill_handoff_decode' as const] };
    expect(topologyReport(fleet(['prefill', H], ['decode', H]), opts).ready).toBe(true);
    expect(topologyReport(fleet(['prefill', H], ['decode', T]), opts).ready).toBe(false);
    expect(topologyReport([], opts).ready).toBe(false);
  });
});
