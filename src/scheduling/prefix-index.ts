export interface PrefixIndexOptions {
  /** Blocks remembered per instance, mirroring the engine's KV capacity (default 32 768). */
  readonly capacityBlocks?: number;
}

/** One instance's blocks as {@link PrefixIndex.snapshot} gives them: oldest → newest, and which start a prompt. */
export interface IndexSnapshot {
  readonly instance: string;
  readonly hashes: readonly number[];
  /** Positions in `hashes` of prompt heads (block 0 of some prompt). */
  readonly heads: readonly number[];
}

/** LRU node; `prev` is more recent, `next` is older. */
interface Node {
  readonly hash: number;
  /** Block 0 of some prompt (indexed in the reverse map). */
  head: boolean;
  prev: Node | undefined;
  next: Node | undefined;
}

/** One instance's blocks: a hash map over an intrusive doubly linked LRU list (touch is O(1), no Map churn). */
class InstanceBlocks {
  readonly nodes = new Map<number, Node>();
  newest: Node | undefined;
  oldest: Node | undefined;

  touch(node: Node): void {
    if (node === this.newest) return;
    this.unlink(node);
    this.pushNewest(node);
  }

  pushNewest(node: Node): void {
    node.prev = undefined;
    node.next = this.newest;
    if (this.newest) this.newest.prev = node;
    this.newest = node;
    if (!this.oldest) this.oldest = node;
  }

  /** Links `node` (not in the list) right after `at`, or as the newest when `at` is undefined. */
  insertAfter(at: Node | undefined, node: Node): void {
    if (at === undefined) return this.pushNewest(node);
    node.prev = at;
    node.next = at.next;
    if (at.next) at.next.prev = node;
    else this.oldest = node;
    at.next = node;
  }

  unlink(node: Node): void {
    if (node.prev) node.prev.next = node.next;
    else this.newest = node.next;
    if (node.next) node.next.prev = node.prev;
    else this.oldest = node.prev;
    node.prev = node.next = undefined;
  }
}

/**
 * Approximate map of which instance holds which prefix blocks, learnt from routed history. Each instance
 * has an LRU of block hashes with a fixed capacity, like the engine's KV cache.
 *
 * Like vLLM's free-block queue, the tail of a prompt is evicted before its head: a prompt's blocks are
 * touched last-to-first, so block j is never older than block k > j of the same prompt. What an
 * instance holds of a chain is therefore always a prefix, so the matched length is found by binary
 * search, and only block-0 hashes need a reverse index (hash → holders). A lookup costs
 * O(holders of block 0 × log blocks); recording costs O(blocks).
 */
export class PrefixIndex {
  readonly capacityBlocks: number;
  private readonly instances = new Map<string, InstanceBlocks>();
  /** Block-0 hash → the one holder (common case) or a set of holders. */
  private readonly heads = new Map<number, string | Set<string>>();

  constructor(options: PrefixIndexOptions = {}) {
    this.capacityBlocks = Math.max(1, Math.floor(options.capacityBlocks ?? 32_768));
  }

  /** Blocks remembered for an instance. */
  size(instanceId: string): number {
    return this.instances.get(instanceId)?.nodes.size ?? 0;
  }

  /** Instances with blocks remembered. */
  get instanceCount(): number {
    return this.instances.size;
  }

  /** Number of distinct first blocks (prompt heads) remembered across instances. */
  get distinctHeads(): number {
    return this.heads.size;
  }

  /** Leading blocks of `hashes` each instance holds; instances with no match are absent. */
  match(hashes: readonly number[]): Map<string, number> {
    const result = new Map<string, number>();
    if (hashes.length === 0) return result;
    const holders = this.heads.get(hashes[0]!);
    if (holders === undefined) return result;
    if (typeof holders === 'string') result.set(holders, this.matchedBlocks(holders, hashes));
    else for (const id of holders) result.set(id, this.matchedBlocks(id, hashes));
    return result;
  }

  /**
   * The instance now holds (or refreshed) these blocks; evicts its least recently used beyond capacity.
   * Afterwards block 0 is the newest, then block 1, … — the order touching them last-to-first gives.
   * The blocks already newest in that order (the same prompt again, or the turn before it) are walked
   * along the list without a lookup (issue 19: a 1 MB prompt is ~16k blocks); the rest are moved in
   * after them.
   */
  record(instanceId: string, hashes: readonly number[]): void {
    if (hashes.length === 0) return;
    let blocks = this.instances.get(instanceId);
    if (!blocks) {
      blocks = new InstanceBlocks();
      this.instances.set(instanceId, blocks);
    }
    // A prompt longer than the capacity keeps only its head (the tail would be evicted first anyway).
    const n = Math.min(hashes.length, this.capacityBlocks);
    let k = 0;
    let cursor: Node | undefined; // the last block placed
    for (let node = blocks.newest; node !== undefined && k < n && node.hash === hashes[k]; node = node.next) {
      cursor = node;
      k++;
    }
    for (; k < n; k++) {
      const hash = hashes[k]!;
      let node = blocks.nodes.get(hash);
      if (node !== undefined && node === cursor) continue; // (a repeated hash)
      const next = cursor === undefined ? blocks.newest : cursor.next;
      if (node === undefined) {
        node = { hash, head: false, prev: undefined, next: undefined };
        blocks.nodes.set(hash, node);
        blocks.insertAfter(cursor, node);
      } else if (node !== next) {
        blocks.unlink(node);
        blocks.insertAfter(cursor, node);
      }
      cursor = node;
    }
    const head = blocks.nodes.get(hashes[0]!)!;
    if (!head.head) {
      head.head = true;
      this.addHead(hashes[0]!, instanceId);
    }
    this.evict(instanceId, blocks);
  }

  private evict(instanceId: string, blocks: InstanceBlocks): void {
    while (blocks.nodes.size > this.capacityBlocks) {
      const oldest = blocks.oldest!;
      blocks.unlink(oldest);
      blocks.nodes.delete(oldest.hash);
      if (oldest.head) this.removeHead(oldest.hash, instanceId);
    }
  }

  /**
   * What the index holds, per instance, oldest → newest (at most `maxBlocksPerInstance`, the newest
   * kept), with the positions of prompt heads: what {@link restore} rebuilds another replica's copy from.
   */
  snapshot(maxBlocksPerInstance = this.capacityBlocks): IndexSnapshot[] {
    const out: IndexSnapshot[] = [];
    for (const [instance, blocks] of this.instances) {
      const hashes: number[] = [];
      const heads: number[] = [];
      for (let n = blocks.newest; n !== undefined && hashes.length < maxBlocksPerInstance; n = n.next) {
        if (n.head) heads.push(hashes.length);
        hashes.push(n.hash);
      }
      hashes.reverse();
      for (let i = 0; i < heads.length; i++) heads[i] = hashes.length - 1 - heads[i]!;
      out.push({ instance, hashes, heads });
    }
    return out;
  }

  /**
   * Merges a {@link snapshot} entry: its blocks become this instance's newest, in their order, heads
   * marked, the least recently used evicted beyond capacity.
   */
  restore({ instance, hashes, heads }: IndexSnapshot): void {
    if (hashes.length === 0) return;
    let blocks = this.instances.get(instance);
    if (!blocks) {
      blocks = new InstanceBlocks();
      this.instances.set(instance, blocks);
    }
    const isHead = new Set(heads);
    for (let i = 0; i < hashes.length; i++) {
      const hash = hashes[i]!;
      let node = blocks.nodes.get(hash);
      if (node === undefined) {
        node = { hash, head: false, prev: undefined, next: undefined };
        blocks.nodes.set(hash, node);
        blocks.pushNewest(node);
      } else blocks.touch(node);
      if (isHead.has(i) && !node.head) {
        node.head = true;
        this.addHead(hash, instance);
      }
    }
    this.evict(instance, blocks);
  }

  /** Drops everything remembered for an instance (deregistered, or its cache was reset). */
  forget(instanceId: string): void {
    const blocks = this.instances.get(instanceId);
    if (!blocks) return;
    for (const node of blocks.nodes.values()) if (node.head) this.removeHead(node.hash, instanceId);
    this.instances.delete(instanceId);
  }

  /** Largest m such that the instance holds hashes[0..m) (holdings are prefix-closed, see class doc). */
  private matchedBlocks(instanceId: string, hashes: readonly number[]): number {
    const nodes = this.instances.get(instanceId)?.nodes;
    if (!nodes) return 0;
    let lo = 0; // holds hashes[0..lo)
    let hi = hashes.length; // does not hold beyond hi
    if (nodes.has(hashes[hi - 1]!)) return hi;
    hi -= 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1; // candidate length
      if (nodes.has(hashes[mid - 1]!)) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  private addHead(hash: number, instanceId: string): void {
    const current = this.heads.get(hash);
    if (current === undefined) this.heads.set(hash, instanceId);
    else if (typeof current === 'string') {
      if (current !== instanceId) this.heads.set(hash, new Set([current, instanceId]));
    } else current.add(instanceId);
  }

  private removeHead(hash: number, instanceId: string): void {
    const current = this.heads.get(hash);
    if (current === undefined) return;
    if (typeof current === 'string') {
      if (current === instanceId) this.heads.delete(hash);
      return;
    }
    current.delete(instanceId);
    if (current.size === 1) this.heads.set(hash, current.values().next().value as string);
  }
}
