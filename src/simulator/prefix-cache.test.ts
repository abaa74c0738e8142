import { describe, expect, it } from 'vitest';
import { PrefixCache } from './prefix-cache.js';

const seq = (n: number, start = 0): number[] => Array.from({ length: n }, (_, i) => start + i);

describe('PrefixCache', () => {
  it.each([
    // [prompt tokens, cached tokens on the second lookup] with block size 4
    [3, 0],
    [4, 0], // at most n-1 tokens may hit
    [5, 4],
    [8, 4],
    [9, 8],
    [17, 16],
  ])('%i tokens → %i cached after insert', (n, cached) => {
    const c = new PrefixCache(4, 100);
    const h = c.blockHashes(seq(n));
    expect(c.lookup(h, n)).toBe(0);
    c.insert(h);
    expect(c.lookup(h, n)).toBe(cached);
  });

  it('hashes chain: a different first block misses every later block', () => {
    const c = new PrefixCache(4, 100);
    c.insert(c.blockHashes(seq(12)));
    const other = [99, ...seq(11, 1)];
    expect(c.lookup(c.blockHashes(other), 12)).toBe(0);
    const sharedPrefix = [...seq(8), 50, 51, 52, 53];
    expect(c.lookup(c.blockHashes(sharedPrefix), 12)).toBe(8);
  });

  it('evicts least recently used blocks past capacity', () => {
    const c = new PrefixCache(2, 4);
    const a = c.blockHashes(seq(4, 0)); // 2 blocks
    const b = c.blockHashes(seq(4, 100));
    c.insert(a);
    c.insert(b);
    expect(c.lookup(a, 5)).toBe(4); // touch a → b is now oldest
    c.insert(c.blockHashes(seq(4, 200)));
    expect(c.size).toBe(4);
    expect(c.lookup(b, 5)).toBe(0);
    expect(c.lookup(a, 5)).toBe(4);
  });
});

describe('PrefixCache eviction order and listener', () => {
  it("evicts a prompt's tail first, so a partly evicted prompt keeps its head (vLLM frees in reverse)", () => {
    const c = new PrefixCache(1, 3);
    const a = c.blockHashes([1, 2, 3]);
    c.insert(a);
    c.insert(c.blockHashes([9]));
    // Before: the head block went first and nothing of the prompt hit any more.
    expect(c.lookup(a, 4)).toBe(2);
  });

  it('tells the listener of new runs with their parent and tokens, of evictions and clears', () => {
    const c = new PrefixCache(2, 3);
    const log: unknown[] = [];
    c.listener = {
      stored: (hashes, parent, tokens) => log.push(['stored', hashes.length, parent, [...tokens]]),
      removed: (h) => log.push(['removed', h]),
      cleared: () => log.push(['cleared']),
    };
    const a = c.blockHashes(seq(4));
    c.insert(a, seq(4));
    const b = c.blockHashes([...seq(4), 7, 8]);
    c.insert(b, [...seq(4), 7, 8]); // only the third block is new
    c.insert(c.blockHashes([50, 51]), [50, 51]); // over capacity: b's tail goes
    c.clear();
    expect(log).toEqual([
      ['stored', 2, null, [0, 1, 2, 3]],
      ['stored', 1, a[1], [7, 8]],
      ['stored', 1, null, [50, 51]],
      ['removed', b[2]],
      ['cleared'],
    ]);
  });
});
