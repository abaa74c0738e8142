import { describe, expect, it } from 'vitest';
import { MOONCAKE_BLOCK_TOKENS as B, type TraceRecord } from './mooncake-trace.js';
import { cacheReferences } from './cache-references.js';

/** A record of `ids.length` full blocks (plus `extra` tokens in a partial last block), arriving at `atMs`. */
const r = (ids: number[], atMs = 0, extra = 0): TraceRecord => ({
  timestampMs: atMs,
  inputLength: (extra > 0 ? ids.length - 1 : ids.length) * B + extra,
  outputLength: 1,
  hashIds: ids,
});

type Ref = 'infinite' | 'pooledLru' | 'earliestFinish';

const ROWS: [
  name: string,
  records: TraceRecord[],
  instances: number,
  capacity: number,
  hits: Record<Ref, number>,
][] = [
  [
    'cold requests hit nothing',
    [r([1]), r([2]), r([3])],
    2,
    10,
    { infinite: 0, pooledLru: 0, earliestFinish: 0 },
  ],
  [
    'a repeated prompt hits all its full blocks',
    [r([1, 2]), r([1, 2], 1000)],
    1,
    10,
    { infinite: 2, pooledLru: 2, earliestFinish: 2 },
  ],
  [
    'a partial last block hits with the tokens held',
    [r([1, 2], 0, 100), r([1, 2, 3], 1000)],
    1,
    10,
    { infinite: 1 + 100 / B, pooledLru: 1 + 100 / B, earliestFinish: 1 + 100 / B },
  ],
  // pooled capacity 2 (2 × 1): LRU evicts [1] before it comes back (so does instance 0, where [3] went); the infinite cache keeps it
  [
    'LRU evicts, the infinite cache does not',
    [r([1]), r([2]), r([3]), r([1], 1000)],
    2,
    1,
    { infinite: 1, pooledLru: 0, earliestFinish: 0 },
  ],
  // capacity 2 per instance, pooled 4: [1,2,3] fits the pool but only its head fits one instance
  [
    'the pool holds what one instance cannot',
    [r([1, 2, 3]), r([1, 2, 3], 1000)],
    2,
    2,
    { infinite: 3, pooledLru: 3, earliestFinish: 2 },
  ],
  // instance 0 is still prefilling the first copy (10 + 204.8 ms): recomputing on 1 finishes first
  [
    'a busy holder loses to an idle instance',
    [r([1, 2, 3, 4]), r([1, 2, 3, 4])],
    2,
    10,
    { infinite: 4, pooledLru: 4, earliestFinish: 0 },
  ],
  // … but once it is free the cached prefix wins
  [
    'a free holder wins',
    [r([1, 2, 3, 4]), r([1, 2, 3, 4, 5], 1000)],
    2,
    10,
    { infinite: 4, pooledLru: 4, earliestFinish: 4 },
  ],
];

describe('cacheReferences', () => {
  it.each(ROWS)('%s', (_name, records, instances, capacityBlocks, hits) => {
    const refs = cacheReferences(records, { instances, capacityBlocks });
    const prompt = records.reduce((s, x) => s + x.inputLength, 0);
    for (const ref of ['infinite', 'pooledLru', 'earliestFinish'] as const) {
      expect(refs[ref].hitTokens, ref).toBe(hits[ref] * B);
      expect(refs[ref].promptTokens, ref).toBe(prompt);
      expect(refs[ref].hitRate, ref).toBe((hits[ref] * B) / prompt);
    }
  });

  it('places each request where its prefill finishes first', () => {
    // a 4-block prompt takes 10 + 2048 × 0.1 = 214.8 ms; the third copy waits less on 0 (cached) than 1 (busy)
    const refs = cacheReferences([r([1, 2, 3, 4]), r([1, 2, 3, 4]), r([1, 2, 3, 4], 220)], {
      instances: 2,
      capacityBlocks: 10,
    });
    expect(refs.earliestFinish.perInstance).toEqual([2, 1]);
    expect(refs.earliestFinish.hitTokens).toBe(4 * B);
  });

  it('scales arrival gaps and takes the cost model and block size given', () => {
    // gaps ×0.001: the repeat arrives at 1 ms, while 0 is busy; a free prefill cost makes 0 win anyway
    const recs = [r([1, 2]), r([1, 2], 1000)];
    expect(
      cacheReferences(recs, { instances: 2, capacityBlocks: 10, timeScale: 0.001 }).earliestFinish.hitTokens,
    ).toBe(0);
    expect(
      cacheReferences(recs, {
        instances: 2,
        capacityBlocks: 10,
        timeScale: 0.01,
        prefillMsPerToken: 0,
        prefillOverheadMs: 0,
      }).earliestFinish.hitTokens,
    ).toBe(2 * B);
    const small = { timestampMs: 0, inputLength: 40, outputLength: 1, hashIds: [1, 2, 3] };
    expect(
      cacheReferences([small, small], { instances: 1, capacityBlocks: 10, blockTokens: 16 }).infinite
        .hitTokens,
    ).toBe(40);
  });

  it('rejects a fleet without instances or capacity', () => {
    expect(() => cacheReferences([r([1])], { instances: 0, capacityBlocks: 1 })).toThrow('≥ 1 instance');
    expect(() => cacheReferences([r([1])], { instances: 1, capacityBlocks: 0 })).toThrow('≥ 1 block');
  });
});
