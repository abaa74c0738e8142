import { describe, expect, it } from 'vitest';
import { ManualClock } from './clock.js';
import { TakeOnceStore, type TakeOnceStoreOptions } from './take-once-store.js';

function store(options: Omit<TakeOnceStoreOptions<string>, 'clock' | 'onExpire'> = {}) {
  const clock = new ManualClock(0);
  const expired: string[] = [];
  const s = new TakeOnceStore<string>({ ...options, clock, onExpire: (id) => expired.push(id) });
  return { s, clock, expired };
}

/** Settles pending promise callbacks so `settled` reflects what has resolved. */
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('TakeOnceStore: put / take / peek / delete', () => {
  type Step =
    | ['put', string, number | null]
    | ['take' | 'peek', string, string | undefined]
    | ['delete', string, boolean];
  it.each<[string, TakeOnceStoreOptions<string>, Step[]]>([
    [
      'take consumes once',
      {},
      [
        ['put', 'a', Infinity],
        ['take', 'a', 'A'],
        ['take', 'a', undefined],
      ],
    ],
    [
      'peek does not consume',
      {},
      [
        ['put', 'a', Infinity],
        ['peek', 'a', 'A'],
        ['take', 'a', 'A'],
        ['peek', 'a', undefined],
      ],
    ],
    [
      'a full store refuses a new id',
      { maxEntries: 1 },
      [
        ['put', 'a', Infinity],
        ['put', 'b', null],
        ['take', 'b', undefined],
      ],
    ],
    [
      'a full store still replaces an existing id',
      { maxEntries: 1 },
      [
        ['put', 'a', Infinity],
        ['put', 'a', Infinity],
        ['take', 'a', 'A'],
      ],
    ],
    ['put returns the expiry', { ttlMs: 100 }, [['put', 'a', 100]]],
    [
      'delete drops silently',
      {},
      [
        ['put', 'a', Infinity],
        ['delete', 'a', true],
        ['delete', 'a', false],
        ['take', 'a', undefined],
      ],
    ],
  ])('%s', (_name, options, steps) => {
    const { s, expired } = store(options);
    for (const [op, id, expected] of steps) {
      if (op === 'put') expect(s.put(id, id.toUpperCase())).toBe(expected);
      else if (op === 'take') expect(s.take(id)).toBe(expected);
      else if (op === 'peek') expect(s.peek(id)).toBe(expected);
      else expect(s.delete(id)).toBe(expected);
    }
    expect(expired).toEqual([]);
  });
});

describe('TakeOnceStore: bounds', () => {
  it('a full store refuses a new id and keeps what it holds', () => {
    const { s } = store({ maxEntries: 2 });
    s.put('a', 'A');
    s.put('b', 'B');
    expect(s.put('c', 'C')).toBeNull();
    expect(s.size).toBe(2);
    expect(s.take('a')).toBe('A');
  });
});

describe('TakeOnceStore: expiry', () => {
  it('entries nobody takes expire in sweep, take and put, each reported once', () => {
    const { s, clock, expired } = store({ ttlMs: 100 });
    s.put('a', 'A');
    clock.advance(50);
    s.put('b', 'B');
    clock.advance(60);
    expect(s.peek('a')).toBeUndefined();
    s.sweep();
    expect(expired).toEqual(['a']);
    expect(s.size).toBe(1);
    clock.advance(50);
    expect(s.take('b')).toBeUndefined();
    expect(expired).toEqual(['a', 'b']);
    s.put('c', 'C');
    clock.advance(100);
    s.put('d', 'D'); // put sweeps first
    expect(expired).toEqual(['a', 'b', 'c']);
  });

  it('re-putting an id re-dates it', () => {
    const { s, clock, expired } = store({ ttlMs: 100 });
    s.put('a', 'A');
    clock.advance(90);
    s.put('a', 'A2');
    clock.advance(90);
    s.sweep();
    expect(expired).toEqual([]);
    expect(s.take('a')).toBe('A2');
  });

  it('without a TTL nothing expires', () => {
    const { s, clock } = store();
    s.put('a', 'A');
    clock.advance(1e12);
    s.sweep();
    expect(s.take('a')).toBe('A');
  });
});

describe('TakeOnceStore: waiting takers', () => {
  it('a waiter gets a late put directly; the entry is never stored', async () => {
    const { s } = store({ maxEntries: 0 });
    const waiting = s.takeOrWait('a', 5_000);
    expect(s.waiting).toBe(1);
    expect(s.put('a', 'A')).toBe(Infinity);
    await expect(waiting).resolves.toBe('A');
    expect(s.size).toBe(0);
    expect(s.waiting).toBe(0);
  });

  it('one put serves one waiter, the longest waiting', async () => {
    const { s, clock } = store();
    const first = s.takeOrWait('a', 100);
    const second = s.takeOrWait('a', 100);
    s.put('a', 'A');
    await expect(first).resolves.toBe('A');
    clock.advance(100);
    await expect(second).resolves.toBeUndefined();
    expect(s.waiting).toBe(0);
    expect(clock.pendingTimers).toBe(0);
  });

  it('maxWaiters bounds the takers of all ids together', async () => {
    const { s, clock } = store({ maxWaiters: 1 });
    const first = s.takeOrWait('a', 20);
    await expect(s.takeOrWait('b', 5_000)).resolves.toBeUndefined(); // at once: 'a' holds the one slot
    expect(s.waiting).toBe(1);
    clock.advance(20);
    await expect(first).resolves.toBeUndefined();
    expect(s.waiting).toBe(0);
  });

  it('an entry already there is taken without waiting', async () => {
    const { s } = store();
    s.put('a', 'A');
    await expect(s.takeOrWait('a', 5_000)).resolves.toBe('A');
    expect(s.waiting).toBe(0);
  });

  it.each<[string, number, (s: TakeOnceStore<string>, clock: ManualClock, ctl: AbortController) => void]>([
    ['times out', 20, (_s, clock) => clock.advance(20)],
    ['is aborted', 5_000, (_s, _clock, ctl) => ctl.abort()],
  ])('a waiter that %s answers undefined and leaves no timer or listener', async (_name, timeoutMs, end) => {
    const { s, clock } = store();
    const ctl = new AbortController();
    const waiting = s.takeOrWait('a', timeoutMs, ctl.signal);
    let settled = false;
    void waiting.then(() => (settled = true));
    clock.advance(timeoutMs - 1);
    await flush();
    expect(settled).toBe(false);
    end(s, clock, ctl);
    await expect(waiting).resolves.toBeUndefined();
    expect(s.waiting).toBe(0);
    expect(clock.pendingTimers).toBe(0);
    s.put('a', 'A'); // nobody waits any more: stored
    expect(s.size).toBe(1);
  });

  it.each<[string, TakeOnceStoreOptions<string>, number, boolean]>([
    ['timeout 0', {}, 0, false],
    ['negative timeout', {}, -1, false],
    ['over maxWaiters', { maxWaiters: 0 }, 5_000, false],
    ['already aborted signal', {}, 5_000, true],
  ])('%s: undefined at once, nobody waits', async (_name, options, timeoutMs, aborted) => {
    const { s } = store(options);
    const signal = aborted ? AbortSignal.abort() : undefined;
    await expect(s.takeOrWait('a', timeoutMs, signal)).resolves.toBeUndefined();
    expect(s.waiting).toBe(0);
  });
});
