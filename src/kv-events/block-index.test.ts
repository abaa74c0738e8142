import { describe, expect, it } from 'vitest';
import { BlockIndex } from './block-index.js';

describe('BlockIndex', () => {
  it.each<[string, (ix: BlockIndex) => void, bigint[], Record<string, number>]>([
    ['empty index', () => {}, [1n, 2n], {}],
    ['full prefix on one instance', (ix) => ix.store('a', [1n, 2n, 3n]), [1n, 2n, 3n], { a: 3 }],
    [
      'instances diverge after the first block',
      (ix) => {
        ix.store('a', [1n, 2n]);
        ix.store('b', [1n, 9n]);
      },
      [1n, 2n, 3n],
      { a: 2, b: 1 },
    ],
    ['a hole stops the prefix', (ix) => ix.store('a', [1n, 3n]), [1n, 2n, 3n], { a: 1 }],
    ['no first block, no match', (ix) => ix.store('a', [2n, 3n]), [1n, 2n, 3n], {}],
    [
      'removed block cuts the prefix',
      (ix) => {
        ix.store('a', [1n, 2n, 3n]);
        ix.remove('a', [3n]);
      },
      [1n, 2n, 3n],
      { a: 2 },
    ],
    [
      'cleared instance holds nothing, others keep theirs',
      (ix) => {
        ix.store('a', [1n, 2n]);
        ix.store('b', [1n]);
        ix.clearInstance('a');
      },
      [1n, 2n],
      { b: 1 },
    ],
  ])('%s', (_name, setup, query, expected) => {
    const ix = new BlockIndex();
    setup(ix);
    expect(Object.fromEntries(ix.prefixMatch(query))).toEqual(expected);
  });

  it('takes the engine forms of a hash (number, negative, bytes) as one key', () => {
    const ix = new BlockIndex();
    ix.store('a', [2n ** 64n - 1n, 5n]);
    const digest = new Uint8Array(32);
    digest[31] = 5;
    expect(Object.fromEntries(ix.prefixMatch([-1, digest]))).toEqual({ a: 2 });
  });

  it('stays within maxBlocks by forgetting the least recently stored block for everyone', () => {
    const ix = new BlockIndex(3);
    ix.store('a', [1n, 2n]);
    ix.store('b', [1n, 3n]); // 1 refreshed: order 2, 1, 3
    ix.store('a', [4n]); // over the cap: 2 goes
    expect(ix.size).toBe(3);
    expect(ix.evicted).toBe(1);
    expect(ix.blocksOf('a')).toBe(2);
    expect(Object.fromEntries(ix.prefixMatch([1n, 2n]))).toEqual({ a: 1, b: 1 });
  });

  it('counts blocks per instance and drops an instance on clear', () => {
    const ix = new BlockIndex();
    ix.store('a', [1n, 2n, 2n]);
    ix.remove('a', [7n]);
    expect(ix.blocksOf('a')).toBe(2);
    ix.clearInstance('a');
    expect([...ix.instances()]).toEqual([]);
    expect(ix.size).toBe(0);
  });
});
