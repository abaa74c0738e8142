import { describe, expect, it } from 'vitest';
import { textBlockHashes, tokenBlockHashes } from './prefix-hash.js';
import { PrefixIndex } from './prefix-index.js';

describe('block hashing', () => {
  it('is chained: equal prefixes give equal leading hashes, then diverge for good', () => {
    const a = tokenBlockHashes(
      Array.from({ length: 64 }, (_, i) => i),
      16,
    );
    const b = tokenBlockHashes(
      [...Array.from({ length: 20 }, (_, i) => i), 999, ...Array.from({ length: 43 }, (_, i) => i + 21)],
      16,
    );
    expect(a).toHaveLength(4);
    expect(b[0]).toBe(a[0]);
    expect(b.slice(1).some((h, i) => h === a[i + 1])).toBe(false);
  });

  it('ignores a trailing partial block, and position matters', () => {
    expect(tokenBlockHashes([1, 2, 3], 16)).toEqual([]);
    const same = Array.from({ length: 32 }, () => 7);
    const [h0, h1] = tokenBlockHashes(same, 16);
    expect(h0).not.toBe(h1);
  });

  it('text blocks are 4 chars per token', () => {
    expect(textBlockHashes('x'.repeat(64 * 3 + 10), 16)).toHaveLength(3);
    expect(textBlockHashes('abc'.repeat(100), 16)[1]).toBe(textBlockHashes('abc'.repeat(200), 16)[1]);
  });

  it.each([
    [
      'token ids',
      (salt?: string) =>
        tokenBlockHashes(
          Array.from({ length: 64 }, (_, i) => i),
          16,
          salt,
        ),
    ],
    ['text', (salt?: string) => textBlockHashes('same system prompt '.repeat(20), 16, salt)],
  ])('a cache salt separates every block of the same %s, and is stable', (_what, hashes) => {
    const a = hashes('salt-a');
    const b = hashes('salt-b');
    expect(a.length).toBeGreaterThan(1);
    expect(hashes('salt-a')).toEqual(a);
    for (const h of b) expect(a).not.toContain(h);
    for (const h of hashes()) expect(a).not.toContain(h);
    expect(a.every((h) => Number.isSafeInteger(h))).toBe(true);
  });

  it('gives safe integers with few collisions', () => {
    const seen = new Set<number>();
    for (let i = 0; i < 20_000; i++) {
      const [h] = tokenBlockHashes(
        Array.from({ length: 16 }, (_, k) => i * 16 + k),
        16,
      );
      expect(Number.isSafeInteger(h)).toBe(true);
      seen.add(h!);
    }
    expect(seen.size).toBe(20_000);
  });
});

describe('PrefixIndex', () => {
  const chain = (tag: number, n: number) => Array.from({ length: n }, (_, i) => tag * 1000 + i);

  it('matches the longest held prefix per instance', () => {
    const idx = new PrefixIndex();
    idx.record('a', chain(1, 10));
    idx.record('b', chain(1, 4));
    idx.record('c', chain(2, 10));
    expect(idx.match(chain(1, 8))).toEqual(
      new Map([
        ['a', 8],
        ['b', 4],
      ]),
    );
    expect(idx.match([...chain(1, 3), 5])).toEqual(
      new Map([
        ['a', 3],
        ['b', 3],
      ]),
    );
    expect(idx.match(chain(3, 5)).size).toBe(0);
    expect(idx.match([]).size).toBe(0);
  });

  it('a snapshot restored elsewhere matches and evicts as the original does', () => {
    const a = new PrefixIndex({ capacityBlocks: 8 });
    a.record('p', chain(1, 5));
    a.record('p', chain(2, 3));
    a.record('q', chain(1, 2));
    const b = new PrefixIndex({ capacityBlocks: 8 });
    for (const entry of a.snapshot()) b.restore(entry);
    for (const probe of [chain(1, 5), chain(2, 3), chain(1, 2), chain(3, 1)])
      expect(b.match(probe)).toEqual(a.match(probe));
    // the same next record evicts the same blocks on both (the LRU order came across)
    a.record('p', chain(4, 3));
    b.record('p', chain(4, 3));
    for (const probe of [chain(1, 5), chain(2, 3), chain(4, 3)])
      expect(b.match(probe)).toEqual(a.match(probe));
    // a bounded snapshot keeps the newest blocks
    expect(a.snapshot(3).find((e) => e.instance === 'p')).toEqual({
      instance: 'p',
      hashes: chain(4, 3).reverse(),
      heads: [2],
    });
  });

  it('evicts least recently used blocks, the tail of a prompt before its head', () => {
    const idx = new PrefixIndex({ capacityBlocks: 6 });
    idx.record('a', chain(1, 4));
    idx.record('a', chain(2, 4)); // capacity 6: two blocks of chain 1 go, its tail first
    expect(idx.size('a')).toBe(6);
    expect(idx.match(chain(1, 4)).get('a')).toBe(2);
    expect(idx.match(chain(2, 4)).get('a')).toBe(4);
    idx.record('a', chain(1, 2)); // touch chain 1's head
    idx.record('a', chain(3, 2)); // evicts chain 2's tail
    expect(idx.match(chain(1, 4)).get('a')).toBe(2);
    expect(idx.match(chain(2, 4)).get('a')).toBe(2);
  });

  it('a prompt longer than capacity keeps its head', () => {
    const idx = new PrefixIndex({ capacityBlocks: 3 });
    idx.record('a', chain(1, 10));
    expect(idx.size('a')).toBe(3);
    expect(idx.match(chain(1, 10)).get('a')).toBe(3);
  });

  it('keeps holders consistent across eviction and forget', () => {
    const idx = new PrefixIndex({ capacityBlocks: 4 });
    idx.record('a', chain(1, 4));
    idx.record('b', chain(1, 4));
    idx.record('a', chain(2, 4)); // a evicts chain 1 entirely
    expect(idx.match(chain(1, 4))).toEqual(new Map([['b', 4]]));
    idx.forget('b');
    expect(idx.match(chain(1, 4)).size).toBe(0);
    expect(idx.distinctHeads).toBe(1);
    idx.forget('a');
    expect(idx.distinctHeads).toBe(0);
  });

  it('recording keeps the LRU order of touching every block last-to-first (random turns, evictions)', () => {
    // reference: newest first; record touches blocks n-1 … 0, each moved to the front
    let lru: number[] = [];
    const capacity = 40;
    const reference = (hashes: number[]): void => {
      for (let k = Math.min(hashes.length, capacity) - 1; k >= 0; k--) {
        lru = lru.filter((h) => h !== hashes[k]);
        lru.unshift(hashes[k]!);
      }
      lru = lru.slice(0, capacity);
    };
    const idx = new PrefixIndex({ capacityBlocks: capacity });
    let seed = 7;
    const rand = (n: number): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % n;
    // conversations: each turn extends the previous one's text, some restart, some repeat
    const texts = ['', '', ''];
    for (let step = 0; step < 300; step++) {
      const c = rand(texts.length);
      const r = rand(10);
      if (r === 0) texts[c] = '';
      else if (r > 2) texts[c] += String.fromCharCode(97 + c).repeat(64 * (1 + rand(6))) + step;
      const hashes = textBlockHashes(`conversation ${c}: ${texts[c]}`, 16);
      idx.record('i', hashes);
      reference(hashes);
      expect(idx.size('i')).toBe(lru.length);
      for (const probe of texts) {
        const ph = textBlockHashes(`conversation ${texts.indexOf(probe)}: ${probe}`, 16);
        let held = 0;
        while (held < ph.length && lru.includes(ph[held]!)) held++;
        expect(idx.match(ph).get('i') ?? 0).toBe(held);
      }
    }
  });
});
