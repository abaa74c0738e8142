import { describe, expect, it } from 'vitest';
import { Faults } from './faults.js';

describe('Faults', () => {
  it('no faults: nothing is injected', () => {
    expect(new Faults().forRequest('/v1/completions', false)).toMatchObject({ errorStatus: null, hangMs: 0 });
  });

  it.each([
    [{ error_every: 2 }, [null, 500, null, 500]],
    [{ error_next: 1, error_status: 429 as const }, [429, null, null, null]],
    [{ error_every: 1, match_kv: 'with' as const }, [null, null, null, null]],
    [{ error_every: 1, match_path: '/v1/chat/completions' }, [null, null, null, null]],
  ])('%j', (cfg, want) => {
    const f = new Faults(cfg);
    expect(want.map(() => f.forRequest('/v1/completions', false).errorStatus)).toEqual(want);
  });

  it('refuse_connections counts down; -1 refuses forever', () => {
    const f = new Faults({ refuse_connections: 2 });
    expect([f.refuseConnection(), f.refuseConnection(), f.refuseConnection()]).toEqual([true, true, false]);
    const g = new Faults({ refuse_connections: -1 });
    expect([g.refuseConnection(), g.refuseConnection()]).toEqual([true, true]);
  });

  it('rejects invalid configs', () => {
    expect(() => new Faults({ error_rate: 2 })).toThrow();
  });
});
