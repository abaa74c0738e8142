/** vLLM's default KV block size in tokens. */
export const DEFAULT_BLOCK_SIZE = 16;
/** Characters per token assumed when hashing rendered text instead of token ids. */
export const CHARS_PER_TOKEN = 4;

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * Chained hashes of every full block of `units` (token ids or UTF-16 code units): block i's hash covers
 * all units of blocks 0..i, so equal hashes at block i mean equal prefixes (up to collisions), as in
 * vLLM's prefix caching. Two 32-bit FNV-style lanes give a 53-bit integer key (a safe Map key with no
 * string allocation). A trailing partial block is not hashed (engines cache full blocks only).
 */
function chainedBlockHashes(count: number, unitAt: (i: number) => number, blockUnits: number): number[] {
  const full = Math.floor(count / blockUnits);
  const out = new Array<number>(full);
  let h1 = 0x811c9dc5 | 0;
  let h2 = 0x1b873593 | 0;
  for (let b = 0; b < full; b++) {
    const end = (b + 1) * blockUnits;
    for (let i = b * blockUnits; i < end; i++) {
      const u = unitAt(i);
      h1 = Math.imul(h1 ^ u, 0x01000193);
      h2 = Math.imul(h2 ^ (u + 0x9e3779b9), 0x85ebca6b);
      h2 ^= h2 >>> 13;
    }
    out[b] = fmix(h1) * 0x200000 + (fmix(h2 ^ b) & 0x1fffff);
  }
  return out;
}

/** Chained block hashes of token ids, `blockSize` tokens per block. */
export function tokenBlockHashes(tokenIds: ArrayLike<number>, blockSize = DEFAULT_BLOCK_SIZE): number[] {
  return chainedBlockHashes(tokenIds.length, (i) => tokenIds[i]! | 0, blockSize);
}

/**
 * Chained block hashes of rendered text, `blockSize × CHARS_PER_TOKEN` characters per block: the same
 * prefix property as token blocks without tokenizing on the request path (~100× cheaper).
 */
export function textBlockHashes(text: string, blockSize = DEFAULT_BLOCK_SIZE): number[] {
  return chainedBlockHashes(text.length, (i) => text.charCodeAt(i), blockSize * CHARS_PER_TOKEN);
}

/** Tokens represented by `blocks` blocks (text blocks count as `blockSize` tokens each). */
export function blocksToTokens(blocks: number, blockSize = DEFAULT_BLOCK_SIZE): number {
  return blocks * blockSize;
}
