import { describe, expect, it } from 'vitest';
import { backoffDelayMs } from './backoff.js';

describe('backoffDelayMs', () => {
  const cfg = { baseDelayMs: 100, maxDelayMs: 1000, jitter: 0.5 };
  it.each([
    [1, 0, 0],
    [2, 0, 50],
    [2, 0.999, 100],
    [3, 0, 100],
    [4, 0, 200],
    [5, 0.5, 600],
    [10, 0, 500], // capped at 1000, half of it fixed
  ])('attempt %i with random %f → %i ms', (attempt, r, expected) => {
    expect(backoffDelayMs(attempt, cfg, () => r)).toBe(expected);
  });
  it('no jitter is deterministic', () => {
    expect(backoffDelayMs(3, { baseDelayMs: 10, maxDelayMs: 100, jitter: 0 }, Math.random)).toBe(20);
  });
});
