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
 * The loop is written twice (ids / text) to keep the per-unit cost free of calls.
 */
function blockKey(h1: number, h2: number, b: number): number {
  return fmix(h1) * 0x200000 + (fmix(h2 ^ b) & 0x1fffff);
}

/**
 * Starting lanes of a chain: fixed, or derived from `salt` (the request's `cache_salt`) so that, as in
 * vLLM (the salt enters the first block's hash), the same prompt under two salts shares no block.
 */
const LANES = new Int32Array(2);
function startLanes(salt: string | undefined): void {
  let h1 = 0x811c9dc5 | 0;
  let h2 = 0x1b873593 | 0;
  if (salt !== undefined) {
    for (let i = 0; i < salt.length; i++) {
      const u = salt.charCodeAt(i);
      h1 = Math.imul(h1 ^ u, 0x01000193);
      h2 = Math.imul(h2 ^ (u + 0x9e3779b9), 0x85ebca6b);
      h2 ^= h2 >>> 13;
    }
    h1 = fmix(h1 ^ salt.length) | 0;
    h2 = fmix(h2 ^ 0x5a17) | 0;
  }
  LANES[0] = h1;
  LANES[1] = h2;
}

/** Chained block hashes of token ids, `blockSize` tokens per block, seeded with `salt` when given. */
export function tokenBlockHashes(
  tokenIds: ArrayLike<number>,
  blockSize = DEFAULT_BLOCK_SIZE,
  salt?: string,
): number[] {
  const full = Math.floor(tokenIds.length / blockSize);
  const out = new Array<number>(full);
  startLanes(salt);
  let h1 = LANES[0]!;
  let h2 = LANES[1]!;
  for (let b = 0, i = 0; b < full; b++) {
    for (const end = i + blockSize; i < end; i++) {
      const u = tokenIds[i]! | 0;
      h1 = Math.imul(h1 ^ u, 0x01000193);
      h2 = Math.imul(h2 ^ (u + 0x9e3779b9), 0x85ebca6b);
      h2 ^= h2 >>> 13;
    }
    out[b] = blockKey(h1, h2, b);
  }
  return out;
}

/** UTF-16 code units of the text being hashed, reused across calls (grown on demand; at most 4 MiB kept). */
let scratch = new Int32Array(1 << 16);

/**
 * Chained block hashes of rendered text, `blockSize × CHARS_PER_TOKEN` characters per block: the same
 * prefix property (and `salt` seeding) as token blocks without tokenizing on the request path (gpt-tokenizer costs ~8 ms
 * for a 17k-token prompt here). `text` is one string or the pieces whose concatenation it is (the
 * same hashes either way), so a long conversation is hashed from its parsed message strings without
 * a flattened copy. The UTF-16 code units are copied natively into a scratch buffer and mixed two at a
 * time as 32-bit words (issue 19: half the steps of a per-character loop; a block is an even number
 * of characters, so no word straddles two blocks).
 */
export function textBlockHashes(
  text: string | readonly string[],
  blockSize = DEFAULT_BLOCK_SIZE,
  salt?: string,
): number[] {
  const units = blockSize * CHARS_PER_TOKEN;
  let length = 0;
  if (typeof text === 'string') length = text.length;
  else for (const piece of text) length += piece.length;
  const full = Math.floor(length / units);
  const out = new Array<number>(full);
  const words = (full * units) >>> 1;
  if (scratch.length < words) scratch = new Int32Array(Math.max(words, scratch.length * 2));
  const view = Buffer.from(scratch.buffer, scratch.byteOffset, scratch.byteLength);
  const bytes = 2 * full * units; // only full blocks are hashed
  if (typeof text === 'string') view.write(text, 0, bytes, 'utf16le');
  else {
    let at = 0;
    for (let i = 0; i < text.length && at < bytes; i++) at += view.write(text[i]!, at, bytes - at, 'utf16le');
  }
  const w = scratch;
  const perBlock = units >>> 1;
  startLanes(salt);
  let h1 = LANES[0]!;
  let h2 = LANES[1]!;
  for (let b = 0, i = 0; b < full; b++) {
    for (const end = i + perBlock; i < end; i++) {
      const u = w[i]!;
      h1 = Math.imul(h1 ^ u, 0x01000193);
      h2 = Math.imul(h2 ^ (u + 0x9e3779b9), 0x85ebca6b);
      h2 ^= h2 >>> 13;
    }
    out[b] = blockKey(h1, h2, b);
  }
  if (scratch.length > 1 << 20) scratch = new Int32Array(1 << 16); // keep at most 4 MiB
  return out;
}

/** Tokens represented by `blocks` blocks (text blocks count as `blockSize` tokens each). */
export function blocksToTokens(blocks: number, blockSize = DEFAULT_BLOCK_SIZE): number {
  return blocks * blockSize;
}
