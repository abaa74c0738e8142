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
 * An LRU of block id → tokens of that block held (512, or fewer for a partial last block). A request
 * touches its blocks last to first, so a prompt's head is the most recently used and its tail is
 * evicted first — as vLLM frees a request's blocks in reverse order
 * (vllm/v1/core/single_type_kv_cache_manager.py, SingleTypeKVCacheManager.free).
 */
class LruBlocks {
  private readonly blocks = new Map<number, number>();

  constructor(private readonly capacity: number) {}

  tokens(id: number): number {
    return this.blocks.get(id) ?? 0;
  }

  touch(id: number, tokens: number): void {
    const held = this.blocks.get(id) ?? 0;
    this.blocks.delete(id);
    this.blocks.set(id, Math.max(held, tokens));
    if (this.blocks.size > this.capacity) this.blocks.delete(this.blocks.keys().next().value!);
  }
}

/** Tokens of `rec`'s prompt that `cache` holds as a prefix. */
function cachedPrefix(cache: LruBlocks, rec: TraceRecord): number {
  let hit = 0;
  for (let b = 0; b < rec.hashIds.length; b++) {
    const need = Math.min(MOONCAKE_BLOCK_TOKENS, rec.inputLength - b * MOONCAKE_BLOCK_TOKENS);
    const held = cache.tokens(rec.hashIds[b]!);
    hit += Math.min(held, need);
    if (held < need) break;
  }
  return hit;
}

/**
 * Greedy longest-cached-prefix routing replayed offline — a reference hit rate, NOT an upper bound.
 * Every instance keeps an LRU of `capacityBlocks` blocks, and each request goes to the instance
 * holding its longest cached prefix (ties: the instance with fewest requests so far, then the lowest
 * index), which then holds all of its blocks. A partial last block counts with the tokens it has (a
 * later request with the same id there hits those; an engine caches at its own, finer block size).
 * Hash ids are taken as prefix-chained, as Mooncake's traces are. It knows the whole cache state,
 * never mispredicts and ignores timing, load and the engine's last-token recompute — but it is greedy
 * per request: when requests share a first block, every one of them goes to the instance that holds
 * it, so that instance's cache thrashes while the others stay empty, and a router that spreads
 * conversations (by load, say) can hit more (measured: docs/BENCHMARKS.md, "Precise KV routing").
 * With `instances: 1` and the fleet's total capacity it is the pooled-cache reference: one LRU of
 * all the fleet's blocks, no block held twice — not a bound either (LRU is not the optimal eviction).
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
    let best = 0;
    let bestHit = -1;
    caches.forEach((cache, i) => {
      const hit = cachedPrefix(cache, rec);
      if (hit > bestHit || (hit === bestHit && perInstance[i]! < perInstance[best]!)) {
        best = i;
        bestHit = hit;
      }
    });
    perInstance[best]!++;
    hitTokens += bestHit;
    promptTokens += rec.inputLength;
    const cache = caches[best]!;
    for (let b = rec.hashIds.length - 1; b >= 0; b--)
      cache.touch(
        rec.hashIds[b]!,
        Math.min(MOONCAKE_BLOCK_TOKENS, rec.inputLength - b * MOONCAKE_BLOCK_TOKENS),
      );
  }
  return { hitRate: promptTokens > 0 ? hitTokens / promptTokens : NaN, hitTokens, promptTokens, perInstance };
}
