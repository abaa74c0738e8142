import { describe, expect, it } from 'vitest';
import { TakeOnceStore } from './take-once-store.js';

/** `takeOrWait` with several candidate ids (spellings of one key, e.g. vLLM's external request ids). */
describe('TakeOnceStore.takeOrWait with candidate ids', () => {
  it('takes the first held candidate in order', async () => {
    const store = new TakeOnceStore<string>();
    store.put('b', 'B');
    store.put('c', 'C');
    expect(await store.takeOrWait(['a', 'c', 'b'], 0)).toBe('C');
    expect(store.size).toBe(1);
  });

  it('a waiter is served by a put under any candidate, once, and leaves every list', async () => {
    const store = new TakeOnceStore<string>();
    const waiting = store.takeOrWait(['x', 'y'], 1_000);
    expect(store.waiting).toBe(1);
    store.put('y', 'Y');
    expect(await waiting).toBe('Y');
    expect(store.waiting).toBe(0);
    // The served waiter no longer listens on 'x': a later put is held, not handed to it.
    store.put('x', 'X');
    expect(store.size).toBe(1);
    expect(store.take('x')).toBe('X');
  });

  it('gives up on timeout or abort, counted once', async () => {
    const store = new TakeOnceStore<string>();
    const ctl = new AbortController();
    const waiting = store.takeOrWait(['x', 'y', 'z'], 60_000, ctl.signal);
    ctl.abort();
    expect(await waiting).toBeUndefined();
    expect(store.waiting).toBe(0);
    expect(await store.takeOrWait(['x', 'y'], 1)).toBeUndefined();
    expect(store.waiting).toBe(0);
  });
});
