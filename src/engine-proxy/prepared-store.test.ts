import { describe, expect, it } from 'vitest';
import { PreparedStore } from './prepared-store.js';

function store(max = 2) {
  let t = 0;
  const expired: string[] = [];
  const s = new PreparedStore<string>({ ttlMs: 100, max, maxWaiters: 1, now: () => t }, (id) =>
    expired.push(id),
  );
  return { s, expired, advance: (ms: number) => (t += ms) };
}

describe('PreparedStore (conformance 30)', () => {
  it('take consumes once', () => {
    const { s } = store();
    expect(s.put('a', 'A')).toBe(100);
    expect(s.take('a')).toBe('A');
    expect(s.take('a')).toBeUndefined();
  });

  it('is bounded: a full store refuses new entries', () => {
    const { s } = store(2);
    s.put('a', 'A');
    s.put('b', 'B');
    expect(s.put('c', 'C')).toBeNull();
    expect(s.size).toBe(2);
  });

  it('entries nobody consumes expire and are reported', () => {
    const { s, expired, advance } = store();
    s.put('a', 'A');
    advance(50);
    s.put('b', 'B');
    advance(60);
    s.sweep();
    expect(expired).toEqual(['a']);
    expect(s.size).toBe(1);
    advance(50);
    expect(s.take('b')).toBeUndefined();
    expect(expired).toEqual(['a', 'b']);
  });

  it('a waiter gets a late put directly', async () => {
    const { s } = store();
    const waiting = s.takeOrWait('a', 5_000);
    expect(s.waiting).toBe(1);
    s.put('a', 'A');
    await expect(waiting).resolves.toBe('A');
    expect(s.size).toBe(0);
    expect(s.waiting).toBe(0);
  });

  it('a waiter gives up after its timeout, and waiters are bounded', async () => {
    const { s } = store();
    const first = s.takeOrWait('a', 20);
    await expect(s.takeOrWait('b', 5_000)).resolves.toBeUndefined(); // over maxWaiters: at once
    await expect(first).resolves.toBeUndefined();
    expect(s.waiting).toBe(0);
  });
});
