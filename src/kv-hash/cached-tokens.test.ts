import { describe, expect, it } from 'vitest';
import { predictedCachedTokens } from './index.js';

describe('predictedCachedTokens', () => {
  it.each([
    // held blocks, prompt tokens, block size → cached tokens
    [0, 100, 16, 0],
    [3, 100, 16, 48],
    [6, 100, 16, 96], // 6 full blocks, last token (99) in block 7
    [7, 100, 16, 96], // more held than hittable
    [2, 32, 16, 16], // a prompt of exactly two blocks: the last block is recomputed
    [2, 33, 16, 32],
    [1, 1, 16, 0],
    [5, 0, 16, 0],
  ])('%i blocks held, %i-token prompt, block %i → %i', (held, prompt, size, want) => {
    expect(predictedCachedTokens(held, prompt, size)).toBe(want);
  });
});
