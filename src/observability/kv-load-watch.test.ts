import { describe, expect, it } from 'vitest';
import type { KvLoadVerdict } from '../engine-adapters/kv-load.js';
import { KV_LOAD_WINDOW, KvLoadWatch } from './kv-load-watch.js';

const L: KvLoadVerdict = 'loaded';
const N: KvLoadVerdict = 'not_loaded';
const U: KvLoadVerdict = 'unknown';

describe('KvLoadWatch', () => {
  it.each<[string, KvLoadVerdict[], boolean]>([
    ['no requests', [], false],
    ['two recomputes are not yet a pattern', [N, N], false],
    ['three recomputes', [N, N, N], true],
    ['half of the recent ones recomputed', [L, N, L, N], true],
    ['mostly loaded', [L, L, N, L], false],
    ['unknown verdicts are not counted', [U, U, U, N, N], false],
    [
      'recovered: the window moved past the recomputes',
      [N, N, N, ...Array<KvLoadVerdict>(KV_LOAD_WINDOW).fill(L)],
      false,
    ],
  ])('%s → degraded %s', (_name, verdicts, degraded) => {
    const w = new KvLoadWatch();
    for (const v of verdicts) w.record('p0', 'd0', v);
    w.record('p1', 'd0', 'loaded');
    const report = w.degraded();
    expect('p0 → d0' in report).toBe(degraded);
    expect('p1 → d0' in report).toBe(false);
    if (degraded) expect(report['p0 → d0']).toMatch(/kv_not_loaded .* recomputed the prompt/);
  });
});
