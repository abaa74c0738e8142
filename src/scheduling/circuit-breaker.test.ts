import { describe, expect, it } from 'vitest';
import { CircuitBreakers, type CircuitState } from './circuit-breaker.js';
import { ManualClock } from '../common/clock.js';
import type { RequestOutcome } from './load-tracker.js';

type Step =
  | { record: RequestOutcome }
  | { advance: number }
  | { pick: true }
  | { expect: CircuitState; available?: boolean };

function run(steps: Step[], options = { failureThreshold: 3, openMs: 1000, halfOpenMaxProbes: 1 }) {
  const clock = new ManualClock();
  const changes: string[] = [];
  const b = new CircuitBreakers({
    ...options,
    clock,
    onStateChange: (id, from, to) => changes.push(`${from}>${to}`),
  });
  for (const step of steps) {
    if ('record' in step) b.record('x', step.record);
    else if ('advance' in step) clock.advance(step.advance);
    else if ('pick' in step) b.onPicked('x');
    else {
      expect(b.state('x')).toBe(step.expect);
      if (step.available !== undefined) expect(b.isAvailable('x')).toBe(step.available);
    }
  }
  return { b, changes };
}

const F: Step = { record: 'failure' };
const S: Step = { record: 'success' };

describe('CircuitBreakers transitions (conformance 31)', () => {
  it.each<{ name: string; steps: Step[]; changes?: string[] }>([
    { name: 'starts closed', steps: [{ expect: 'closed', available: true }] },
    {
      name: 'opens after N consecutive failures',
      steps: [F, F, { expect: 'closed' }, F, { expect: 'open', available: false }],
      changes: ['closed>open'],
    },
    { name: 'a success resets the streak', steps: [F, F, S, F, F, { expect: 'closed' }] },
    {
      name: '4xx do not count and do not reset',
      steps: [F, F, { record: 'client_error' }, { expect: 'closed' }],
    },
    { name: 'cancellations are neutral', steps: [F, F, { record: 'cancelled' }, F, { expect: 'open' }] },
    {
      name: 'half-opens after the timeout',
      steps: [
        F,
        F,
        F,
        { advance: 999 },
        { expect: 'open', available: false },
        { advance: 1 },
        { expect: 'half_open', available: true },
      ],
      changes: ['closed>open', 'open>half_open'],
    },
    {
      name: 'limited probes while half-open',
      steps: [F, F, F, { advance: 1000 }, { pick: true }, { expect: 'half_open', available: false }],
    },
    {
      name: 'probe success closes',
      steps: [F, F, F, { advance: 1000 }, { pick: true }, S, { expect: 'closed', available: true }],
      changes: ['closed>open', 'open>half_open', 'half_open>closed'],
    },
    {
      name: 'probe failure reopens for another full timeout',
      steps: [
        F,
        F,
        F,
        { advance: 1000 },
        { pick: true },
        F,
        { expect: 'open' },
        { advance: 999 },
        { expect: 'open' },
        { advance: 1 },
        { expect: 'half_open' },
      ],
      changes: ['closed>open', 'open>half_open', 'half_open>open', 'open>half_open'],
    },
    {
      name: 'a cancelled probe frees its slot',
      steps: [
        F,
        F,
        F,
        { advance: 1000 },
        { pick: true },
        { record: 'cancelled' },
        { expect: 'half_open', available: true },
      ],
    },
    {
      name: 'a probe that never reports frees its slot after the probe timeout',
      steps: [
        F,
        F,
        F,
        { advance: 1000 },
        { pick: true },
        { advance: 999 },
        { expect: 'half_open', available: false },
        { advance: 1 },
        { expect: 'half_open', available: true },
      ],
    },
    {
      name: 'failures while open do not extend the timeout',
      steps: [F, F, F, { advance: 500 }, F, { advance: 500 }, { expect: 'half_open' }],
    },
  ])('$name', ({ steps, changes }) => {
    const result = run(steps);
    if (changes) expect(result.changes).toEqual(changes);
  });

  it('allows several probes when configured', () => {
    run(
      [
        F,
        { advance: 10 },
        { pick: true },
        { expect: 'half_open', available: true },
        { pick: true },
        { expect: 'half_open', available: false },
      ],
      {
        failureThreshold: 1,
        openMs: 10,
        halfOpenMaxProbes: 2,
      },
    );
  });

  it('exposes non-closed states for metrics and forgets instances', () => {
    const clock = new ManualClock();
    const b = new CircuitBreakers({ failureThreshold: 1, clock });
    b.record('a', 'failure');
    b.record('b', 'success');
    expect(b.states()).toEqual(new Map([['a', 'open']]));
    b.forget('a');
    expect(b.states().size).toBe(0);
    expect(b.isAvailable('a')).toBe(true);
  });
});
