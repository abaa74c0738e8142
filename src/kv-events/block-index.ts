import { KV_EVENTS_DEFAULTS } from './kv-events-defaults.js';
import { blockKey, type BlockHashValue, type BlockKey } from './kv-event-decoder.js';

/**
 * The global index of what the engines hold: block key → the instances whose KV cache holds that
 * block, as their KV events say. Shared by every subscriber of one coordinator; two coordinators fed
 * the same events hold the same index.
 *
 * Memory is bounded: at most `maxBlocks` distinct blocks. Past that the block stored least recently
 * (by any instance) is forgotten for every instance, as if removed — an engine evicts its coldest
 * blocks first too, so what is dropped is the least likely to still be cached. Forgetting only ever
 * under-predicts a hit, never claims a block that is gone.
 */
export class BlockIndex {
  /** Holders per block (a few ids: an array is smaller than a Set). Insertion order is recency. */
  private readonly holders = new Map<BlockKey, string[]>();
  private readonly byInstance = new Map<string, Set<BlockKey>>();
  /** Blocks forgotten to stay under `maxBlocks`. */
  evicted = 0;
  /** Told of every store (the in-flight overlay of precise routing confirms its expectations). */
  onStored: ((instance: string, keys: readonly BlockKey[]) => void) | null = null;

  constructor(readonly maxBlocks: number = KV_EVENTS_DEFAULTS.maxIndexedBlocks) {
    if (!Number.isSafeInteger(maxBlocks) || maxBlocks < 1) throw new Error('maxBlocks must be ≥ 1');
  }

  /** Distinct blocks indexed. */
  get size(): number {
    return this.holders.size;
  }

  /** Blocks `instance` holds. */
  blocksOf(instance: string): number {
    return this.byInstance.get(instance)?.size ?? 0;
  }

  instances(): IterableIterator<string> {
    return this.byInstance.keys();
  }

  store(instance: string, keys: readonly BlockKey[]): void {
    let mine = this.byInstance.get(instance);
    if (mine === undefined) this.byInstance.set(instance, (mine = new Set()));
    for (const key of keys) {
      const ids = this.holders.get(key);
      if (ids === undefined)
        this.holders.set(key, [instance]); // exact-size array
      else {
        this.holders.delete(key);
        this.holders.set(key, ids.includes(instance) ? ids : [...ids, instance]);
      }
      mine.add(key);
    }
    while (this.holders.size > this.maxBlocks) {
      const [oldest, ids] = this.holders.entries().next().value as [BlockKey, string[]];
      this.holders.delete(oldest);
      for (const id of ids) this.byInstance.get(id)?.delete(oldest);
      this.evicted++;
    }
    this.onStored?.(instance, keys);
  }

  remove(instance: string, keys: readonly BlockKey[]): void {
    const mine = this.byInstance.get(instance);
    if (mine === undefined) return;
    for (const key of keys) {
      if (!mine.delete(key)) continue;
      const ids = this.holders.get(key)!;
      if (ids.length === 1) this.holders.delete(key);
      else
        this.holders.set(
          key,
          ids.filter((id) => id !== instance),
        ); // keeps its place in the order
    }
  }

  /** Forgets every block of `instance` (AllBlocksCleared, restart, resync, removal). */
  clearInstance(instance: string): void {
    const mine = this.byInstance.get(instance);
    if (mine === undefined) return;
    this.remove(instance, [...mine]);
    this.byInstance.delete(instance);
  }

  /**
   * Per instance, how many leading blocks of a prompt's chained block hashes (first block first) it
   * holds; instances holding not even the first are absent.
   */
  prefixMatch(hashes: ArrayLike<BlockHashValue>): Map<string, number> {
    const out = new Map<string, number>();
    let live: string[] | null = null;
    for (let i = 0; i < hashes.length; i++) {
      const ids = this.holders.get(blockKey(hashes[i]!));
      if (ids === undefined) break;
      live = live === null ? [...ids] : live.filter((id) => ids.includes(id));
      if (live.length === 0) break;
      for (const id of live) out.set(id, i + 1);
    }
    return out;
  }
}
