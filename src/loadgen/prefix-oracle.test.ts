import { describe, expect, it } from 'vitest';
import { MOONCAKE_BLOCK_TOKENS as B, type TraceRecord } from './mooncake-trace.js';
import { prefixOracle } from './prefix-oracle.js';

/** A record of `ids.length` full blocks (plus `extra` tokens in a partial last block). */
const r = (ids: number[], extra = 0): TraceRecord => ({
  timestampMs: 0,
  inputLength: (extra > 0 ? ids.length - 1 : ids.length) * B + extra,
  outputLength: 1,
  hashIds: ids,
});

const ROWS: [
  name: string,
  records: TraceRecord[],
  instances: number,
  capacity: number,
  hitBlocks: number,
  perInstance: number[],
][] = [
  ['cold requests spread over instances', [r([1]), r([2]), r([3])], 2, 10, 0, [2, 1]],
  ['a repeated prompt hits all its full blocks', [r([1, 2]), r([1, 2])], 1, 10, 2, [2]],
  ['a shared prefix follows its instance', [r([1, 2]), r([9]), r([1, 2, 3])], 2, 10, 2, [2, 1]],
  // a repeated prompt with a partial last block (Mooncake's own example repeats [46, 47] at 655 tokens)
  ['a partial last block hits with its tokens', [r([1, 2], 100), r([1, 2], 100)], 1, 10, 1 + 100 / B, [2]],
  ['a full block hits only the partial tokens held', [r([1, 2], 100), r([1, 2, 3])], 1, 10, 1 + 100 / B, [2]],
  [
    'a longer partial block counts only what is held',
    [r([1, 2], 100), r([1, 2], 300)],
    1,
    10,
    1 + 100 / B,
    [2],
  ],
  ['LRU evicts the least recently used', [r([1]), r([2]), r([3]), r([1])], 1, 2, 0, [4]],
  ['recently used blocks survive', [r([1]), r([2]), r([1]), r([3]), r([1])], 1, 2, 2, [5]],
  // capacity 2, prompt [1,2,3]: touched 3,2,1 → 3 evicted, the head 1,2 stays
  ['a prompt larger than the cache keeps its head', [r([1, 2, 3]), r([1, 2, 3])], 1, 2, 2, [2]],
];

describe('prefixOracle', () => {
  it.each(ROWS)('%s', (_name, records, instances, capacityBlocks, hitBlocks, perInstance) => {
    const res = prefixOracle(records, { instances, capacityBlocks });
    const prompt = records.reduce((s, x) => s + x.inputLength, 0);
    expect(res).toEqual({
      hitTokens: hitBlocks * B,
      promptTokens: prompt,
      hitRate: (hitBlocks * B) / prompt,
      perInstance,
    });
  });

  it('rejects a fleet without instances or capacity', () => {
    expect(() => prefixOracle([r([1])], { instances: 0, capacityBlocks: 1 })).toThrow('≥ 1 instance');
    expect(() => prefixOracle([r([1])], { instances: 1, capacityBlocks: 0 })).toThrow('≥ 1 block');
  });
});
