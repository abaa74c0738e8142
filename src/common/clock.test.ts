import { describe, expect, it } from 'vitest';
import { ManualClock, systemClock } from './clock.js';

/** Schedules timers `[name, delayMs]` on a fresh clock and records which fired, in order. */
function scheduled(timers: Array<[string, number]>): { clock: ManualClock; fired: string[] } {
  const clock = new ManualClock(0);
  const fired: string[] = [];
  for (const [name, delayMs] of timers) clock.setTimeout(() => fired.push(name), delayMs);
  return { clock, fired };
}

describe('ManualClock.advance', () => {
  it.each<[string, Array<[string, number]>, number, string[]]>([
    ['nothing due', [['a', 10]], 9, []],
    ['due exactly at the target', [['a', 10]], 10, ['a']],
    [
      'in due order, not scheduling order',
      [
        ['late', 20],
        ['early', 5],
      ],
      30,
      ['early', 'late'],
    ],
    [
      'same due time: scheduling order',
      [
        ['first', 5],
        ['second', 5],
      ],
      5,
      ['first', 'second'],
    ],
    ['negative delays are due at once', [['a', -5]], 0, ['a']],
  ])('%s', (_name, timers, advanceMs, expected) => {
    const { clock, fired } = scheduled(timers);
    clock.advance(advanceMs);
    expect(fired).toEqual(expected);
    expect(clock.now()).toBe(advanceMs);
    expect(clock.pendingTimers).toBe(timers.length - expected.length);
  });

  it('fires timers scheduled by a firing timer when they fall due in the same advance', () => {
    const clock = new ManualClock(0);
    const seen: number[] = [];
    clock.setTimeout(() => {
      seen.push(clock.now());
      clock.setTimeout(() => seen.push(clock.now()), 10);
    }, 10);
    clock.advance(25);
    expect(seen).toEqual([10, 20]);
    expect(clock.now()).toBe(25);
  });

  it('a cleared timer never fires, even when cleared by another timer', () => {
    const clock = new ManualClock(0);
    const fired: string[] = [];
    const b = clock.setTimeout(() => fired.push('b'), 20);
    clock.setTimeout(() => {
      fired.push('a');
      clock.clearTimeout(b);
    }, 10);
    clock.advance(30);
    expect(fired).toEqual(['a']);
    expect(clock.pendingTimers).toBe(0);
  });
});

describe('ManualClock.advanceAsync', () => {
  it('lets promise chains started by a timer settle before the next timer is chosen', async () => {
    const clock = new ManualClock(0);
    const seen: number[] = [];
    const probe = (): void => {
      seen.push(clock.now());
      // Like a health probe: the successor is scheduled when the async work ends.
      void Promise.resolve().then(() => clock.setTimeout(probe, 100));
    };
    clock.setTimeout(probe, 0);
    await clock.advanceAsync(250);
    expect(seen).toEqual([0, 100, 200]);
    expect(clock.now()).toBe(250);
    expect(clock.pendingTimers).toBe(1);
  });
});

it('systemClock timers fire and can be cleared', async () => {
  const fired = await new Promise<boolean>((resolve) => {
    const cleared = systemClock.setTimeout(() => resolve(false), 1);
    systemClock.clearTimeout(cleared);
    systemClock.setTimeout(() => resolve(true), 1);
  });
  expect(fired).toBe(true);
  expect(Math.abs(systemClock.now() - Date.now())).toBeLessThan(1000);
});
