import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  BlockHasher,
  blockHashes,
  eventBlockHash,
  type BlockHashAlgo,
  type BlockHashExtraKeys,
} from './index.js';

/**
 * Golden block hashes shared with the simulator: test/fixtures/engines/vllm/block-hashes (README there
 * says how they were derived).
 */
interface Case {
  name: string;
  algo: BlockHashAlgo;
  blockSize: number;
  seed: string;
  tokenIds?: number[];
  tokenFormula?: { count: number; mul: number; add: number; mod: number };
  extraKeys?: BlockHashExtraKeys;
  noneHash: string;
  hashes: string[];
  eventHashes: string[];
  firstBlockEncoded?: string;
}

const FIXTURE = new URL('../../test/fixtures/engines/vllm/block-hashes/cases.json', import.meta.url);
const { cases } = JSON.parse(readFileSync(FIXTURE, 'utf8')) as { cases: Case[] };

const tokensOf = (c: Case): number[] =>
  c.tokenIds ??
  Array.from({ length: c.tokenFormula!.count }, (_, i) => {
    const g = c.tokenFormula!;
    return Number((BigInt(i) * BigInt(g.mul) + BigInt(g.add)) % BigInt(g.mod));
  });

describe('vLLM block hashes (golden)', () => {
  it.each(cases)('$name', (c) => {
    const hasher = new BlockHasher(c);
    const tokens = tokensOf(c);
    expect(hasher.noneHash.toString('hex')).toBe(c.noneHash);
    if (c.firstBlockEncoded !== undefined) {
      const salt = c.extraKeys?.cacheSalt;
      const encoded = hasher.encodeBlock(hasher.noneHash, tokens, 0, c.extraKeys?.loraName, salt);
      expect(encoded.toString('hex')).toBe(c.firstBlockEncoded);
    }
    const hashes = hasher.hashes(tokens, c.extraKeys);
    expect(hashes.map((h) => h.toString('hex'))).toEqual(c.hashes);
    expect(hashes.map((h) => eventBlockHash(h).toString())).toEqual(c.eventHashes);
    // continuing a chain from a known parent gives the same later hashes
    if (hashes.length > 1)
      expect(hasher.hashes(tokens.slice(c.blockSize), c.extraKeys, hashes[0])[0]).toEqual(hashes[1]);
  });
});

describe('BlockHasher', () => {
  it.each([
    [{ algo: 'sha256', blockSize: 16 }, /seed is required.*PYTHONHASHSEED/],
    [{ algo: 'xxhash', blockSize: 16, seed: '0' }, /unsupported block hash algorithm 'xxhash'/],
    [{ algo: 'sha256_cbor', blockSize: 0, seed: '0' }, /block size must be a positive integer/],
  ] as const)('%j → one-line error', (options, message) => {
    expect(() => new BlockHasher(options as never)).toThrow(message);
  });

  it('hashes only full blocks; a prompt shorter than a block has none', () => {
    expect(blockHashes([1, 2, 3], { algo: 'sha256_cbor', blockSize: 4, seed: '0' })).toEqual([]);
  });

  it('the seed, the salt and the LoRA name each change the first hash', () => {
    const base = { algo: 'sha256_cbor', blockSize: 2, seed: '0' } as const;
    const first = (o: Parameters<typeof blockHashes>[1]) => blockHashes([1, 2], o)[0]!.toString('hex');
    const all = [
      first(base),
      first({ ...base, seed: '1' }),
      first({ ...base, extraKeys: { cacheSalt: 'a' } }),
      first({ ...base, extraKeys: { loraName: 'b' } }),
      first({ ...base, algo: 'sha256' }),
    ];
    expect(new Set(all).size).toBe(all.length);
  });

  it('eventBlockHash is the low 64 bits, big-endian', () => {
    const hash = Buffer.alloc(32);
    hash.writeBigUInt64BE(0xfedcba9876543210n, 24);
    hash[0] = 0xff;
    expect(eventBlockHash(hash)).toBe(0xfedcba9876543210n);
  });
});
