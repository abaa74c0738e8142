/**
 * A cached block's key: the cache's own 53-bit hash (number), or vLLM's block hash as its KV events
 * carry it (bigint, src/kv-hash `eventBlockHash`) when the simulator hashes the vLLM way.
 */
export type SimBlockKey = number | bigint;

/** Told what the cache stores and evicts, in order (the KV event publisher, kv-events-publisher.ts). */
export interface PrefixCacheListener {
  /** Blocks newly cached, first to last: their hashes, the hash before the first, their tokens. */
  stored(hashes: readonly SimBlockKey[], parent: SimBlockKey | null, tokens: readonly number[]): void;
  removed(hash: SimBlockKey): void;
  cleared(): void;
}

/**
 * Block-hashed prefix cache, like vLLM's automatic prefix caching: the prompt is cut into full
 * blocks of `blockSize` tokens; block i's hash chains block i-1's hash with its tokens, so a hit on
 * block i implies the whole prefix matches. Capacity is in blocks; least recently used blocks are
 * evicted first (a Map keeps insertion order, touching re-inserts), and within one prompt its tail
 * first: vLLM frees a request's blocks in reverse order so that the tail blocks are evicted first
 * (vllm-project/vllm `vllm/v1/core/single_type_kv_cache_manager.py` `SingleTypeKVCacheManager.free`,
 * `kv_cache_coordinator.py` `pop_blocks_for_free`), so a partly evicted prompt keeps its head.
 *
 * As in vLLM v1, at most `promptTokens - 1` tokens can hit, so at least one token is computed.
 */
export class PrefixCache {
  private readonly lru = new Map<SimBlockKey, true>();
  listener: PrefixCacheListener | null = null;

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
  lookup(hashes: readonly SimBlockKey[], promptTokens: number): number {
    const maxBlocks = Math.floor(Math.max(0, promptTokens - 1) / this.blockSize);
    let hit = 0;
    while (hit < hashes.length && hit < maxBlocks && this.lru.has(hashes[hit]!)) hit++;
    this.touchTailFirst(hashes, hit);
    return hit * this.blockSize;
  }

  /**
   * Inserts (or refreshes) a prompt's blocks, evicting least recently used ones past capacity.
   * `tokens` (the prompt) is what the listener is told of new blocks.
   */
  insert(hashes: readonly SimBlockKey[], tokens: readonly number[] = []): void {
    if (this.capacityBlocks <= 0) return;
    if (this.listener !== null) this.announceNew(hashes, tokens);
    this.touchTailFirst(hashes, hashes.length);
    while (this.lru.size > this.capacityBlocks) {
      const oldest = this.lru.keys().next().value as SimBlockKey;
      this.lru.delete(oldest);
      this.listener?.removed(oldest);
    }
  }

  clear(): void {
    this.lru.clear();
    this.listener?.cleared();
  }

  /** Re-inserts the first `n` blocks last to first: the head ends most recent, the tail goes first. */
  private touchTailFirst(hashes: readonly SimBlockKey[], n: number): void {
    for (let i = n - 1; i >= 0; i--) {
      const h = hashes[i]!;
      this.lru.delete(h);
      this.lru.set(h, true);
    }
  }

  /** Tells the listener of each run of blocks not yet cached (vLLM: one BlockStored per run). */
  private announceNew(hashes: readonly SimBlockKey[], tokens: readonly number[]): void {
    const bs = this.blockSize;
    let i = 0;
    while (i < hashes.length) {
      if (this.lru.has(hashes[i]!)) {
        i++;
        continue;
      }
      let j = i;
      while (j < hashes.length && !this.lru.has(hashes[j]!)) j++;
      this.listener!.stored(
        hashes.slice(i, j),
        i === 0 ? null : hashes[i - 1]!,
        tokens.slice(i * bs, j * bs),
      );
      i = j;
    }
  }
}
