export interface PrefixIndexOptions {
  /** Blocks remembered per instance, mirroring the engine's KV capacity (default 32 768). */
  readonly capacityBlocks?: number;
}

/**
 * Approximate map of which instance holds which prefix blocks, learnt from routed history. Each instance
 * has an LRU of block hashes with a fixed capacity; a reverse map from block hash to holders makes a
 * lookup cost O(matched blocks), independent of instances that hold nothing.
 *
 * Like vLLM's free-block queue, the tail of a prompt is evicted before its head: a prompt's blocks are
 * touched last-to-first, so its first blocks are the most recently used.
 */
export class PrefixIndex {
  readonly capacityBlocks: number;
  private readonly lrus = new Map<string, Map<number, true>>();
  /** block hash → the one holder (common case), or a set of holders. */
  private readonly holders = new Map<number, string | Set<string>>();

  constructor(options: PrefixIndexOptions = {}) {
    this.capacityBlocks = Math.max(1, Math.floor(options.capacityBlocks ?? 32_768));
  }

  /** Blocks remembered for an instance. */
  size(instanceId: string): number {
    return this.lrus.get(instanceId)?.size ?? 0;
  }

  /** Number of distinct block hashes remembered across instances. */
  get distinctBlocks(): number {
    return this.holders.size;
  }

  /** Leading blocks of `hashes` each instance holds; instances with no match are absent. */
  match(hashes: readonly number[]): Map<string, number> {
    const result = new Map<string, number>();
    if (hashes.length === 0) return result;
    const first = this.holders.get(hashes[0]!);
    if (first === undefined) return result;
    let alive: string[] = typeof first === 'string' ? [first] : [...first];
    for (let k = 1; k < hashes.length && alive.length > 0; k++) {
      const holders = this.holders.get(hashes[k]!);
      const next: string[] = [];
      for (const id of alive) {
        if (holders !== undefined && (typeof holders === 'string' ? holders === id : holders.has(id)))
          next.push(id);
        else result.set(id, k);
      }
      alive = next;
    }
    for (const id of alive) result.set(id, hashes.length);
    return result;
  }

  /** The instance now holds (or refreshed) these blocks; evicts its least recently used beyond capacity. */
  record(instanceId: string, hashes: readonly number[]): void {
    let lru = this.lrus.get(instanceId);
    if (!lru) {
      lru = new Map();
      this.lrus.set(instanceId, lru);
    }
    // A prompt longer than the capacity keeps only its head (the tail would be evicted first anyway).
    for (let k = Math.min(hashes.length, this.capacityBlocks) - 1; k >= 0; k--) {
      const h = hashes[k]!;
      if (lru.delete(h)) {
        lru.set(h, true);
        continue;
      }
      lru.set(h, true);
      this.addHolder(h, instanceId);
    }
    while (lru.size > this.capacityBlocks) {
      const oldest = lru.keys().next().value as number;
      lru.delete(oldest);
      this.removeHolder(oldest, instanceId);
    }
  }

  /** Drops everything remembered for an instance (deregistered, or its cache was reset). */
  forget(instanceId: string): void {
    const lru = this.lrus.get(instanceId);
    if (!lru) return;
    for (const h of lru.keys()) this.removeHolder(h, instanceId);
    this.lrus.delete(instanceId);
  }

  private addHolder(hash: number, instanceId: string): void {
    const current = this.holders.get(hash);
    if (current === undefined) this.holders.set(hash, instanceId);
    else if (typeof current === 'string') {
      if (current !== instanceId) this.holders.set(hash, new Set([current, instanceId]));
    } else current.add(instanceId);
  }

  private removeHolder(hash: number, instanceId: string): void {
    const current = this.holders.get(hash);
    if (current === undefined) return;
    if (typeof current === 'string') {
      if (current === instanceId) this.holders.delete(hash);
      return;
    }
    current.delete(instanceId);
    if (current.size === 1) this.holders.set(hash, current.values().next().value as string);
  }
}
