import { describe, expect, it } from 'vitest';
import { Samples, distribution, percentile } from './samples.js';

describe('percentile (linear interpolation between closest ranks)', () => {
  const cases: Array<[number[], number, number]> = [
    [[5], 50, 5],
    [[5], 99, 5],
    [[1, 2], 50, 1.5],
    [[1, 2, 3, 4], 50, 2.5],
    [[1, 2, 3, 4], 0, 1],
    [[1, 2, 3, 4], 100, 4],
    [[1, 2, 3, 4, 5], 90, 4.6],
    [[10, 20, 30, 40, 50, 60, 70, 80, 90, 100], 90, 91],
    [[10, 20, 30, 40, 50, 60, 70, 80, 90, 100], 99, 99.1],
  ];
  it.each(cases)('%j p%d = %d', (values, p, expected) => {
    expect(percentile(values, p)).toBeCloseTo(expected, 10);
  });

  it('is NaN for no samples', () => {
    expect(percentile([], 50)).toBeNaN();
    expect(distribution(new Samples()).p99).toBeNaN();
  });

  it('matches numpy on 1..1000', () => {
    const s = new Samples(1);
    for (let i = 1000; i >= 1; i--) s.push(i); // unsorted input, growing from capacity 1
    const d = distribution(s);
    expect(d).toMatchObject({ count: 1000, min: 1, max: 1000, mean: 500.5 });
    expect(d.p50).toBeCloseTo(500.5, 10);
    expect(d.p90).toBeCloseTo(900.1, 10);
    expect(d.p99).toBeCloseTo(990.01, 10);
  });

  it('sorts numerically, not lexically', () => {
    const s = new Samples();
    for (const v of [100, 9, 20, 3]) s.push(v);
    expect([...s.sorted()]).toEqual([3, 9, 20, 100]);
  });
});
