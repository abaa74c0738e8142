import { describe, expect, it } from 'vitest';
import { MAX_WORKERS, parseWorkers } from './workers-count.js';

describe('parseWorkers', () => {
  it.each([
    ['1', { workers: 1 }],
    ['2', { workers: 2 }],
    [' 3 ', { workers: 3 }],
    [String(MAX_WORKERS), { workers: MAX_WORKERS }],
    ['auto', { workers: 6 }],
  ])('%j → %j', (value, expected) => {
    expect(parseWorkers(value, () => 6)).toEqual(expected);
  });

  it('auto stays within 1..MAX_WORKERS', () => {
    expect(parseWorkers('auto', () => 0)).toEqual({ workers: 1 });
    expect(parseWorkers('auto', () => 512)).toEqual({ workers: MAX_WORKERS });
  });

  it.each(['0', '-1', '1.5', 'two', '', String(MAX_WORKERS + 1), '0x2'])(
    '%j is refused on one line',
    (value) => {
      const out = parseWorkers(value);
      expect(out).toHaveProperty('problem');
      expect((out as { problem: string }).problem).toMatch(/^--workers .*expected 'auto' or a whole number/);
    },
  );
});
