import { describe, expect, it } from 'vitest';
import { Scheduler } from './scheduler.js';
import { instance, request } from './testing/index.js';
import type { InstanceRole, SchedulableInstance } from './types.js';

describe('Scheduler.selectOne (requests with no P/D split)', () => {
  const p = instance('p', 'prefill');
  const d = instance('d', 'decode');
  const u = instance('u', 'union', []);
  it.each<[string, SchedulableInstance[], InstanceRole[], string]>([
    ['union first when present', [p, d, u], ['union', 'decode'], 'single u one_instance'],
    ['then the decode', [p, d], ['union', 'decode'], 'single d one_instance'],
    ['never a role not listed', [p], ['union', 'decode'], 'failure no_instances'],
    ['the prefill when listed', [p, d], ['prefill'], 'single p one_instance'],
    ['roles in the order given', [p, d, u], ['decode', 'union'], 'single d one_instance'],
  ])('%s', (_n, instances, roles, want) => {
    const s = new Scheduler({});
    const got = s.selectOne(request(), instances, roles);
    expect(got.kind === 'single' ? `single ${got.instance.id} ${got.reason}` : `failure ${got.code}`).toBe(
      want,
    );
  });

  it('an open circuit moves the pick to the next role; every role held out is a counted failure', () => {
    const s = new Scheduler({ circuitBreaker: { failureThreshold: 1 } });
    s.breakers.record('u', 'failure');
    const next = s.selectOne(request(), [u, d], ['union', 'decode']);
    expect(next.kind === 'single' && next.instance.id).toBe('d');
    s.breakers.record('d', 'failure');
    const none = s.selectOne(request(), [u, d], ['union', 'decode']);
    expect(none).toMatchObject({ kind: 'failure', code: 'no_available_instance' });
    expect(none.kind === 'failure' && none.message).toMatch(/every union and decode instance is unavailable/);
    expect(s.stats.singles.one_instance).toBe(1);
    expect(s.stats.failures.no_available_instance).toBe(1);
  });
});
