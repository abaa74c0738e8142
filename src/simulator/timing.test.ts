import { describe, expect, it } from 'vitest';
import { AbortedError, decodeStepMs, Pacer, prefillStepMs, Scheduler, transferMs } from './timing.js';

const p = {
  timeScale: 1,
  prefillOverheadMs: 10,
  prefillMsPerToken: 0.1,
  itlMs: 15,
  loadSlowdown: 0.01,
  kvTransferMsPerBlock: 0.5,
};

describe('timing model', () => {
  it.each([
    ['prefill part, 100 tokens', prefillStepMs(p, 100), 20],
    ['no prefill part without prefill tokens', prefillStepMs(p, 0), 0],
    ['prefill part at time-scale 0', prefillStepMs({ ...p, timeScale: 0 }, 100), 0],
    ['decode step alone', decodeStepMs(p, 1, 1), 15],
    ['decode step with 11 running', decodeStepMs(p, 11, 1), 16.5],
    ['slow decode ×2', decodeStepMs(p, 1, 2), 30],
    ['transfer 10 blocks at scale 0.5', transferMs({ ...p, timeScale: 0.5 }, 10), 2.5],
  ])('%s', (_n, got, want) => expect(got).toBeCloseTo(want));

  it('Pacer only sleeps once the deadline is ≥ 1 ms ahead, and does not burst after falling behind', () => {
    let now = 1000;
    const pacer = new Pacer(() => now);
    expect(pacer.advance(0)).toBe(0);
    expect(pacer.advance(0.3)).toBe(0);
    expect(pacer.advance(5)).toBeCloseTo(5.3);
    now += 200; // the process stalled: the deadline resets instead of owing 200 ms of steps
    expect(pacer.advance(5)).toBe(0);
    expect(pacer.advance(5)).toBeCloseTo(5);
  });
});

describe('Scheduler', () => {
  it('admits up to max-num-seqs, then FIFO; aborted waiters are skipped', async () => {
    const s = new Scheduler(1);
    const order: string[] = [];
    await s.acquire(new AbortController().signal);
    const ac = new AbortController();
    const a = s.acquire(ac.signal).then(
      () => order.push('a'),
      (e: unknown) => order.push(e instanceof AbortedError ? 'a-aborted' : 'a-err'),
    );
    const b = s.acquire(new AbortController().signal).then(() => order.push('b'));
    const c = s.acquire(new AbortController().signal).then(() => order.push('c'));
    expect(s.waiting).toBe(3);
    ac.abort('x');
    await a;
    expect(s.waiting).toBe(2);
    s.release();
    await b;
    expect(order).toEqual(['a-aborted', 'b']);
    s.release();
    await c;
    expect(order).toEqual(['a-aborted', 'b', 'c']);
    expect(s.running).toBe(1);
  });
});
