import { MOONCAKE_BLOCK_TOKENS, type TraceRecord } from './mooncake-trace.js';

/** One reference's replay of the requests: prompt tokens served from cache ÷ all prompt tokens. */
export interface ReferenceResult {
  hitRate: number;
  hitTokens: number;
  promptTokens: number;
}

export interface EarliestFinishResult extends ReferenceResult {
  /** Requests placed on each instance. */
  perInstance: number[];
}

export interface ReferenceOptions {
  /** Prefill-capable instances of the fleet. */
  instances: number;
  /** Prefix-cache capacity per instance, in blocks of `blockTokens`. */
  capacityBlocks: number;
  /** Tokens per hash id of the records (Mooncake: 512). */
  blockTokens?: number;
  /** Prefill cost model of the earliest-finish reference: fixed ms per prefill… */
  prefillOverheadMs?: number;
  /** … plus ms per uncached prompt token (default: `motor sim`'s 10 ms + 0.1 ms/token). */
  prefillMsPerToken?: number;
  /** Multiplies the gaps between record timestamps, as `motor bench --time-scale` does. */
  timeScale?: number;
}

/** The three references `motor bench --trace` and `bench:precise` print beside the measured hit rate. */
export interface CacheReferences {
  /** One cache that never evicts: every prefix seen before hits. No router on any fleet can beat it. */
  infinite: ReferenceResult;
  /** One LRU of the whole fleet's capacity (no block held twice): what a perfectly shared cache gets. */
  pooledLru: ReferenceResult;
  /** Per-instance LRUs, each request placed where its prefill would finish first (cache and queue known). */
  earliestFinish: EarliestFinishResult;
}

/**
 * An LRU of block id → tokens of that block held (a full block, or fewer for a partial last one). A
 * request touches its blocks last to first, so a prompt's head is the most recently used and its tail
 * is evicted first — as vLLM frees a request's blocks in reverse order
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

/** Tokens of block `b` of `rec` (the last block may be partial). */
const blockTokensOf = (rec: TraceRecord, b: number, bt: number): number =>
  Math.min(bt, rec.inputLength - b * bt);

/**
 * Tokens of `rec`'s prompt that `cache` holds as a prefix. Hash ids are taken as prefix-chained, as
 * Mooncake's traces are; a partial block held hits only the tokens it has.
 */
function cachedPrefix(cache: LruBlocks, rec: TraceRecord, bt: number): number {
  let hit = 0;
  for (let b = 0; b < rec.hashIds.length; b++) {
    const need = blockTokensOf(rec, b, bt);
    const held = cache.tokens(rec.hashIds[b]!);
    hit += Math.min(held, need);
    if (held < need) break;
  }
  return hit;
}

function store(cache: LruBlocks, rec: TraceRecord, bt: number): void {
  for (let b = rec.hashIds.length - 1; b >= 0; b--) cache.touch(rec.hashIds[b]!, blockTokensOf(rec, b, bt));
}

const result = (hitTokens: number, promptTokens: number): ReferenceResult => ({
  hitRate: promptTokens > 0 ? hitTokens / promptTokens : NaN,
  hitTokens,
  promptTokens,
});

/** Replays `records` through one LRU of `capacityBlocks` (Infinity: nothing is ever evicted). */
function singleCache(records: readonly TraceRecord[], capacityBlocks: number, bt: number): ReferenceResult {
  const cache = new LruBlocks(capacityBlocks);
  let hitTokens = 0;
  let promptTokens = 0;
  for (const rec of records) {
    hitTokens += cachedPrefix(cache, rec, bt);
    promptTokens += rec.inputLength;
    store(cache, rec, bt);
  }
  return result(hitTokens, promptTokens);
}

/**
 * Earliest finish, replayed offline: each instance has an LRU of `capacityBlocks` and serves its
 * prefills one after another; a request arriving at its (scaled) timestamp goes to the instance where
 * it would finish its prefill first — start when that instance is free, then `prefillOverheadMs` +
 * uncached tokens × `prefillMsPerToken` (ties: the longer cached prefix, then the lower index). It
 * knows every cache and queue exactly, so it trades a cache hit against waiting the way a router with
 * perfect information would, per request (greedy in time, not an optimum). It ignores decode work,
 * batching of prefills and the engine's recompute of a fully cached prompt's last token.
 */
function earliestFinish(
  records: readonly TraceRecord[],
  opts: Required<ReferenceOptions>,
): EarliestFinishResult {
  const bt = opts.blockTokens;
  const caches = Array.from({ length: opts.instances }, () => new LruBlocks(opts.capacityBlocks));
  const freeAtMs = new Array<number>(opts.instances).fill(0);
  const perInstance = new Array<number>(opts.instances).fill(0);
  const t0 = records[0]?.timestampMs ?? 0;
  let hitTokens = 0;
  let promptTokens = 0;
  for (const rec of records) {
    const arrivalMs = (rec.timestampMs - t0) * opts.timeScale;
    let best = 0;
    let bestFinish = Infinity;
    let bestHit = -1;
    for (let i = 0; i < caches.length; i++) {
      const hit = cachedPrefix(caches[i]!, rec, bt);
      const finish =
        Math.max(arrivalMs, freeAtMs[i]!) +
        opts.prefillOverheadMs +
        (rec.inputLength - hit) * opts.prefillMsPerToken;
      if (finish < bestFinish || (finish === bestFinish && hit > bestHit)) {
        best = i;
        bestFinish = finish;
        bestHit = hit;
      }
    }
    freeAtMs[best] = bestFinish;
    perInstance[best]!++;
    hitTokens += bestHit;
    promptTokens += rec.inputLength;
    store(caches[best]!, rec, bt);
  }
  return { ...result(hitTokens, promptTokens), perInstance };
}

/**
 * The infinite-cache, pooled-LRU and earliest-finish references over `records` in order. Only the
 * infinite cache is a bound; LRU is not the optimal eviction, so the other two are what a good
 * placement gets, not the best one can.
 */
export function cacheReferences(records: readonly TraceRecord[], opts: ReferenceOptions): CacheReferences {
  if (!Number.isSafeInteger(opts.instances) || opts.instances < 1)
    throw new Error('references need ≥ 1 instance');
  if (!Number.isSafeInteger(opts.capacityBlocks) || opts.capacityBlocks < 1)
    throw new Error('reference capacity must be ≥ 1 block');
  const full: Required<ReferenceOptions> = {
    instances: opts.instances,
    capacityBlocks: opts.capacityBlocks,
    blockTokens: opts.blockTokens ?? MOONCAKE_BLOCK_TOKENS,
    prefillOverheadMs: opts.prefillOverheadMs ?? 10,
    prefillMsPerToken: opts.prefillMsPerToken ?? 0.1,
    timeScale: opts.timeScale ?? 1,
  };
  return {
    infinite: singleCache(records, Infinity, full.blockTokens),
    pooledLru: singleCache(records, opts.instances * opts.capacityBlocks, full.blockTokens),
    earliestFinish: earliestFinish(records, full),
  };
}
