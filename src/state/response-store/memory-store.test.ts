import { describe, expect, it } from 'vitest';
import { MotorError } from '../../common/motor-error.js';
import { MemoryResponseStore, type MemoryStoreOptions } from './memory-store.js';
import type { ResponseStoreObserver, StoredResponse } from './response-store.js';

/** The embedded store's bounds (count, bytes, TTL, one record's size) and its tenant scoping. */

const record = (id: string, tenant = 't1', pad = 0): StoredResponse => ({
  id,
  tenant,
  previousId: null,
  input: [{ type: 'message', role: 'user', content: 'x'.repeat(pad) }],
  response: { id, output: [] },
});
const bytesOf = (r: StoredResponse): number => Buffer.byteLength(JSON.stringify(r));

function make(opts: Partial<MemoryStoreOptions> = {}) {
  let now = 1_000_000;
  const seen = { hit: 0, miss: 0, stored: 0, errors: 0 };
  const observer: ResponseStoreObserver = {
    lookup: (o) => void seen[o]++,
    stored: (b) => void (seen.stored += b),
    error: () => void seen.errors++,
  };
  const store = new MemoryResponseStore({
    maxEntries: 100,
    maxBytes: 1 << 20,
    maxRecordBytes: 1 << 20,
    ttlSeconds: 60,
    now: () => now,
    observer,
    ...opts,
  });
  return { store, seen, advance: (ms: number) => void (now += ms) };
}

describe('MemoryResponseStore', () => {
  it('stores, returns a fresh copy, deletes; counts hits, misses and bytes', async () => {
    const { store, seen } = make();
    const r = record('resp_1');
    await store.put(r);
    const got = await store.get('resp_1', 't1');
    expect(got).toEqual(r);
    expect(got).not.toBe(r);
    expect(store.storedBytes).toBe(bytesOf(r));
    expect(await store.delete('resp_1', 't1')).toBe(true);
    expect(await store.get('resp_1', 't1')).toBeNull();
    expect(await store.delete('resp_1', 't1')).toBe(false);
    expect(store.size).toBe(0);
    expect(store.storedBytes).toBe(0);
    expect(seen).toMatchObject({ hit: 1, miss: 1, stored: bytesOf(r) });
  });

  it('another tenant can neither read nor delete a record', async () => {
    const { store } = make();
    await store.put(record('resp_1', 't1'));
    expect(await store.get('resp_1', 't2')).toBeNull();
    expect(await store.delete('resp_1', 't2')).toBe(false);
    expect(await store.get('resp_1', 't1')).not.toBeNull();
  });

  it.each<[string, Partial<MemoryStoreOptions>, number, string[]]>([
    ['maxEntries evicts the oldest written', { maxEntries: 2 }, 0, ['resp_b', 'resp_c']],
    // each record is ~100 bytes with 40 of padding: two fit in 260 bytes, three do not
    [
      'maxBytes evicts the oldest written',
      { maxBytes: 2 * bytesOf(record('resp_a', 't1', 40)) + 10 },
      40,
      ['resp_b', 'resp_c'],
    ],
  ])('%s', async (_name, opts, pad, kept) => {
    const { store } = make(opts);
    for (const id of ['resp_a', 'resp_b', 'resp_c']) await store.put(record(id, 't1', pad));
    const present = [];
    for (const id of ['resp_a', 'resp_b', 'resp_c']) if (await store.get(id, 't1')) present.push(id);
    expect(present).toEqual(kept);
    expect(store.storedBytes).toBe(kept.reduce((n, id) => n + bytesOf(record(id, 't1', pad)), 0));
  });

  it('a record past its TTL is gone (and its bytes released)', async () => {
    const { store, advance } = make({ ttlSeconds: 10 });
    await store.put(record('resp_1'));
    advance(9_999);
    expect(await store.get('resp_1', 't1')).not.toBeNull();
    advance(1);
    expect(await store.get('resp_1', 't1')).toBeNull();
    expect(store.storedBytes).toBe(0);
    expect(await store.delete('resp_1', 't1')).toBe(false);
  });

  it('a record larger than maxRecordBytes is refused whole (400 on store), nothing kept', async () => {
    const { store } = make({ maxRecordBytes: 100 });
    let err: unknown;
    try {
      await store.put(record('resp_1', 't1', 200));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(MotorError);
    expect((err as MotorError).status).toBe(400);
    expect((err as MotorError).param).toBe('store');
    expect(store.size).toBe(0);
  });

  it('rewriting an id replaces it without counting its bytes twice', async () => {
    const { store } = make();
    await store.put(record('resp_1', 't1', 10));
    await store.put(record('resp_1', 't1', 20));
    expect(store.size).toBe(1);
    expect(store.storedBytes).toBe(bytesOf(record('resp_1', 't1', 20)));
  });
});
