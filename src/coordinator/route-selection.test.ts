import { describe, expect, it } from 'vitest';
import { validateCoordinatorConfig } from '../config/coordinator-config.js';
import { StaticInstanceSource, type Instance } from './instance-source.js';
import { topologyReport } from './route-selection.js';

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
describe('topology report', () => {
  it('topology report drives /ready', () => {
    const opts = { fallbackToSingle: false, planPreference: ['prefill_handoff_decode' as const] };
    expect(topologyReport(fleet(['prefill', H], ['decode', H]), opts).ready).toBe(true);
    expect(topologyReport(fleet(['prefill', H], ['decode', T]), opts).ready).toBe(false);
    expect(topologyReport([], opts).ready).toBe(false);
    expect(topologyReport(fleet(['prefill', S], ['decode', S]), opts).models['*']).toBe(
      'concurrent_engine_sync',
    );
    expect(topologyReport(fleet(['union', N]), opts).models['*']).toBe('single');
    expect(topologyReport(fleet(['prefill', N], ['decode', H]), opts).models['*']).toMatch(
      /prefill instances advertise no dispatch capability/,
    );
    expect(topologyReport(fleet(['prefill', H]), { ...opts, fallbackToSingle: true }).models['*']).toBe(
      'single (degraded)',
    );
  });
});
