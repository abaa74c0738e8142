import { MOONCAKE_BLOCK_TOKENS, type TraceRecord } from './mooncake-trace.js';

export interface OracleOptions {
  /** Prefill-capable instances the requests are spread over. */
  instances: number;
  /** Prefix-cache capacity per instance, in trace blocks (tokens ÷ 512). */
  capacityBlocks: number;
}

export interface OracleResult {
  /** Prompt tokens served from cache ÷ all prompt tokens. */
  hitRate: number;
  hitTokens: number;
  promptTokens: number;
  /** Requests routed to each instance. */
  perInstance: number[];
}

/**
 * An LRU set of block ids. A request touches its blocks last to first, so a prompt's head is the
 * most recently used and its tail is evicted first — as vLLM frees a request's blocks in reverse
 * order (vllm/v1/core/single_type_kv_cache_manager.py, SingleTypeKVCacheManager.free).
 */
class LruBlocks {
  private readonly blocks = new Map<number, true>();

  constructor(private readonly capacity: number) {}

  has(id: number): boolean {
    return this.blocks.has(id);
  }

  touch(id: number): void {
    this.blocks.delete(id);
    this.blocks.set(id, true);
    if (this.blocks.size > this.capacity) this.blocks.delete(this.blocks.keys().next().value!);
  }
}

/**
 * The offline upper bound of the prefix-cache hit rate over a trace: every instance keeps an LRU of
 * `capacityBlocks` full blocks, and each request goes to the instance holding its longest cached
 * prefix (ties: the instance with fewest requests so far, then the lowest index), which then holds
 * all of its full blocks. Only full 512-token blocks are cached (an engine caches full blocks only);
 * hash ids are taken as prefix-chained, as Mooncake's traces are. Knows the whole cache state, never
 * mispredicts, ignores timing: a router on the same fleet cannot beat it (except by luck of ties).
 */
export function prefixOracle(records: readonly TraceRecord[], opts: OracleOptions): OracleResult {
  if (!Number.isSafeInteger(opts.instances) || opts.instances < 1)
    throw new Error('oracle needs ≥ 1 instance');
  if (!Number.isSafeInteger(opts.capacityBlocks) || opts.capacityBlocks < 1)
    throw new Error('oracle capacity must be ≥ 1 block');
  const caches = Array.from({ length: opts.instances }, () => new LruBlocks(opts.capacityBlocks));
  const perInstance = new Array<number>(opts.instances).fill(0);
  let hitTokens = 0;
  let promptTokens = 0;
  for (const rec of records) {
    const full = Math.min(rec.hashIds.length, Math.floor(rec.inputLength / MOONCAKE_BLOCK_TOKENS));
    let best = 0;
    let bestHit = -1;
    caches.forEach((cache, i) => {
      let hit = 0;
      while (hit < full && cache.has(rec.hashIds[hit]!)) hit++;
      if (hit > bestHit || (hit === bestHit && perInstance[i]! < perInstance[best]!)) {
        best = i;
        bestHit = hit;
      }
    });
    perInstance[best]!++;
    hitTokens += bestHit * MOONCAKE_BLOCK_TOKENS;
    promptTokens += rec.inputLength;
    const cache = caches[best]!;
    for (let b = full - 1; b >= 0; b--) cache.touch(rec.hashIds[b]!);
  }
  return { hitRate: promptTokens > 0 ? hitTokens / promptTokens : NaN, hitTokens, promptTokens, perInstance };
}
