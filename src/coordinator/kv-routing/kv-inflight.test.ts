import { describe, expect, it } from 'vitest';
import { InflightBlocks } from './kv-inflight.js';

const keys = (...k: number[]) => BigUint64Array.from(k.map(BigInt));

describe('InflightBlocks', () => {
  it.each([
    // [name, steps, instance, query, from, run]
    [
      'a routed prompt is expected from block 0',
      (o: InflightBlocks) => o.expect('a', keys(1, 2, 3)),
      'a',
      [1, 2, 3, 4],
      0,
      3,
    ],
    [
      '… and from where the events stopped',
      (o: InflightBlocks) => o.expect('a', keys(1, 2, 3)),
      'a',
      [1, 2, 3, 4],
      1,
      2,
    ],
    ['… on its instance only', (o: InflightBlocks) => o.expect('a', keys(1, 2, 3)), 'b', [1, 2, 3], 0, 0],
    [
      'a confirmed block ends the run',
      (o: InflightBlocks) => (o.expect('a', keys(1, 2, 3)), o.confirm('a', [2n])),
      'a',
      [1, 2, 3],
      0,
      1,
    ],
    [
      'a release keeps what another request still expects',
      (o: InflightBlocks) => (
        o.expect('a', keys(1, 2)),
        o.expect('a', keys(1, 2, 3)),
        o.release('a', keys(1, 2, 3))
      ),
      'a',
      [1, 2, 3],
      0,
      2,
    ],
    [
      'the bound drops the oldest, a prompt tail first',
      (o: InflightBlocks) => (o.expect('a', keys(9)), o.expect('a', keys(1, 2, 3, 4, 5))),
      'a',
      [1, 2, 3, 4, 5],
      0,
      4,
    ],
  ] as const)('%s', (_name, steps, instance, query, from, run) => {
    const o = new InflightBlocks(1000, 4, () => 0);
    steps(o);
    expect(o.run(instance, keys(...query), from)).toBe(run);
    expect(o.size).toBeLessThanOrEqual(4);
  });

  it('expires after the TTL (refreshed by a new route) and keeps nothing when off', () => {
    let now = 0;
    const o = new InflightBlocks(100, 10, () => now);
    o.expect('a', keys(1, 2));
    now = 60;
    o.expect('a', keys(2));
    now = 100;
    expect(o.run('a', keys(1, 2), 0)).toBe(0); // block 1 expired (and dropped)
    expect(o.run('a', keys(1, 2), 1)).toBe(1); // block 2 refreshed at 60
    expect(o.size).toBe(1);
    const off = new InflightBlocks(0, 10);
    off.expect('a', keys(1));
    expect(off.size).toBe(0);
  });
});
