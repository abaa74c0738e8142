import { describe, expect, it } from 'vitest';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { StaticInstanceSource, type Instance } from '../fleet/instance-source.js';
import { notReadyReason, ReadinessCauseLog, topologyReport } from './readiness.js';

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

// Request routing (conformance 12–16) is tested through the scheduler in scheduling-adapter.test.ts.
describe("topology report (/ready), with the scheduler's fallback rules", () => {
  const off = {
    unionFallback: false,
    degradedPrefill: false,
    planPreference: ['prefill_handoff_decode' as const],
  };
  const on = { ...off, unionFallback: true, degradedPrefill: true };
  it.each<[string, Instance[], typeof off, string | RegExp, boolean]>([
    ['compatible pair', fleet(['prefill', H], ['decode', H]), off, 'prefill_handoff_decode', true],
    ['SGLang pair', fleet(['prefill', S], ['decode', S]), off, 'concurrent_engine_sync', true],
    [
      'incompatible pair, no fallback',
      fleet(['prefill', H], ['decode', T]),
      off,
      /shares a dispatch plan/,
      false,
    ],
    [
      'unknown profile',
      fleet(['prefill', N], ['decode', H]),
      off,
      /prefill instances advertise no dispatch capability/,
      false,
    ],
    ['union only', fleet(['union', N]), off, 'single', true],
    [
      'incompatible pair + union, union fallback',
      fleet(['prefill', H], ['decode', T], ['union', N]),
      { ...off, unionFallback: true },
      'single',
      true,
    ],
    [
      'incompatible pair + union, no fallback',
      fleet(['prefill', H], ['decode', T], ['union', N]),
      off,
      /scheduling\.fallback/,
      false,
    ],
    [
      'prefill only, degraded fallback',
      fleet(['prefill', H]),
      { ...off, degradedPrefill: true },
      'single (degraded)',
      true,
    ],
    [
      'prefill only, no fallback',
      fleet(['prefill', H]),
      { ...off, unionFallback: true },
      /prefill-only fleet/,
      false,
    ],
    // the scheduler has no degraded decode-only route: /ready must not claim one
    ['decode only, fallbacks on', fleet(['decode', H]), on, /decode-only fleet/, false],
  ])('%s', (_name, instances, opts, expected, ready) => {
    const report = topologyReport(instances, opts);
    if (typeof expected === 'string') expect(report.models['*']).toBe(expected);
    else expect(report.models['*']).toMatch(expected);
    expect(report.ready).toBe(ready);
  });

  it('an empty fleet is not ready', () => {
    expect(topologyReport([], on).ready).toBe(false);
  });
});

describe('notReadyReason: the root cause first', () => {
  const on = {
    unionFallback: true,
    degradedPrefill: true,
    planPreference: ['prefill_handoff_decode' as const],
  };
  const source = (all: Instance[], routable: Instance[], why = 'unhealthy') => ({
    all: () => all,
    routable: () => routable,
    unroutableReason: () => why,
  });
  const pd = fleet(['prefill', H], ['decode', H]);
  it.each<[string, ReturnType<typeof source>, RegExp | undefined]>([
    ['ready: no reason', source(pd, pd), undefined],
    ['nothing registered', source([], []), /^no instance is registered: add instances to the config/],
    [
      'registered, none routable',
      source(pd, []),
      /^no instance can take work: 1 prefill instance registered, none routable: 1 unhealthy; 1 decode/,
    ],
    ['decodes down: the route message', source(pd, [pd[0]!]), /^no decode instance for model/],
  ])('%s', (_name, src, reason) => {
    const report = topologyReport(src.routable(), { ...on, degradedPrefill: false, unionFallback: false });
    const got = notReadyReason(report, src);
    if (reason === undefined) expect(got).toBeUndefined();
    else expect(got).toMatch(reason);
  });

  it('logs once per cause change', () => {
    const lines: string[] = [];
    const log = new ReadinessCauseLog({
      warn: (o: unknown, msg?: string) => lines.push(`warn ${msg} ${(o as { reason: string }).reason}`),
      info: (msg: unknown) => lines.push(`info ${String(msg)}`),
    } as never);
    for (const reason of ['a', 'a', 'b', undefined, undefined, 'a']) log.note(reason);
    expect(lines).toEqual(['warn not ready a', 'warn not ready b', 'info ready', 'warn not ready a']);
  });
});
