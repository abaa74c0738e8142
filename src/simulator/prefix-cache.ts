/**
 * Block-hashed prefix cache, like vLLM's automatic prefix caching: the prompt is cut into full
 * blocks of `blockSize` tokens; block i's hash chains block i-1's hash with its tokens, so a hit on
 * block i implies the whole prefix matches. Capacity is in blocks; least recently used blocks are
 * evicted first (a Map keeps insertion order, touching re-inserts).
 *
 * As in vLLM v1, at most `promptTokens - 1` tokens can hit, so at least one token is computed.
 */
export class PrefixCache {
  private readonly lru = new Map<number, true>();

  constructor(
    readonly blockSize: number,
    readonly capacityBlocks: number,
  ) {}

  get size(): number {
    return this.lru.size;
  }

  /** Chained hashes of every full block of `tokens`. */
  blockHashes(tokens: readonly number[]): number[] {
    const bs = this.blockSize;
    const full = Math.floor(tokens.length / bs);
    const out = new Array<number>(full);
    let h1 = 0x811c9dc5 | 0;
    let h2 = 0x1b873593 | 0;
    for (let b = 0; b < full; b++) {
      const base = b * bs;
      for (let i = 0; i < bs; i++) {
        const t = tokens[base + i]!;
        h1 = Math.imul(h1 ^ t, 0x01000193);
        h2 = Math.imul(h2 ^ (t + 0x9e3779b9), 0x85ebca6b);
        h2 ^= h2 >>> 13;
      }
      // 53-bit number key from the two 32-bit lanes.
      out[b] = (h1 >>> 0) * 0x200000 + ((h2 >>> 0) & 0x1fffff);
    }
    return out;
  }

  /** Number of leading tokens of the prompt already cached (a multiple of blockSize). Touches hits. */
  lookup(hashes: readonly number[], promptTokens: number): number {
    const maxBlocks = Math.floor(Math.max(0, promptTokens - 1) / this.blockSize);
    let hit = 0;
    while (hit < hashes.length && hit < maxBlocks && this.lru.has(hashes[hit]!)) hit++;
    for (let i = 0; i < hit; i++) {
      const h = hashes[i]!;
      this.lru.delete(h);
      this.lru.set(h, true);
    }
    return hit * this.blockSize;
  }

  /** Inserts (or refreshes) blocks, evicting least recently used ones past capacity. */
  insert(hashes: readonly number[]): void {
    if (this.capacityBlocks <= 0) return;
    for (const h of hashes) {
      this.lru.delete(h);
      this.lru.set(h, true);
    }
    while (this.lru.size > this.capacityBlocks) {
      const oldest = this.lru.keys().next().value as number;
      this.lru.delete(oldest);
    }
  }

  clear(): void {
    this.lru.clear();
  }
}
