import { z } from 'zod';
import { instanceWeight, type SchedulingServices, type Scorer } from './plugin.js';
import { DEFAULT_BLOCK_SIZE } from './prefix-hash.js';
import { PrefixIndex } from './prefix-index.js';

/**
 * Prefix-cache affinity, shared by the `prefix-affinity` and `precise-prefix` scorers (plugins do not
 * import each other). The rendered prompt (whole conversation) is hashed into chained blocks; a
 * per-profile {@link PrefixIndex} remembers which instance was sent which blocks (LRU per instance,
 * mirroring the engine's cache). Each candidate gets an estimated time-to-first-token in token units:
 *
 *   cost = uncachedTokenWeight × uncachedPromptTokens + (pendingPrefillTokens + requestTokens × inflightRequests) / weight
 *
 * and scores `(minCost + blockSize) / (cost + blockSize)` ∈ (0, 1]. A hot prefix therefore spreads by
 * itself once queued prefill work on its holder outweighs recomputing it elsewhere. The imbalance guard
 * additionally ignores the cache of an instance whose in-flight requests exceed
 * `max(minInflight × imbalanceRatio, minInflight + imbalanceAbsolute)`.
 */
export const prefixAffinityParams = z.strictObject({
  blockSize: z
    .number()
    .int()
    .positive()
    .default(DEFAULT_BLOCK_SIZE)
    .describe('tokens per hashed prompt block'),
  capacityBlocks: z
    .number()
    .int()
    .positive()
    .default(32_768)
    .describe("blocks remembered per instance (LRU): set it to the engine's KV capacity in blocks"),
  uncachedTokenWeight: z
    .number()
    .nonnegative()
    .default(4)
    .describe('cost of one uncached prompt token relative to one token of queued prefill work'),
  requestTokens: z
    .number()
    .nonnegative()
    .default(32)
    .describe('token-equivalent cost of each in-flight request (decode work slows prefill on shared GPUs)'),
  imbalanceAbsolute: z
    .number()
    .nonnegative()
    .default(16)
    .describe(
      'an instance with more than `min + imbalanceAbsolute` requests in flight has its cache ignored',
    ),
  imbalanceRatio: z
    .number()
    .min(1)
    .default(2)
    .describe('… or with more than `min × imbalanceRatio` (whichever bound is larger)'),
});
export type PrefixAffinityParams = z.output<typeof prefixAffinityParams>;

/**
 * The affinity scorer. With `precise`, an instance's cached tokens are the request's
 * `kvPrediction` (the engines' KV events, exact token count, plus the blocks of this coordinator's
 * requests routed there and not yet in its events) where known; the routed-history estimate
 * otherwise — so an instance without events, or a prompt without block keys, scores as before. The
 * pick is reported back to the prediction (`routed`), which records the in-flight blocks.
 */
export function createAffinityScorer(
  params: PrefixAffinityParams,
  { loadTracker, newPrefixIndex }: SchedulingServices,
  precise: boolean,
): Scorer {
  const index =
    newPrefixIndex?.(params.capacityBlocks) ?? new PrefixIndex({ capacityBlocks: params.capacityBlocks });
  const bs = params.blockSize;
  return {
    score: (ctx, candidates, out) => {
      const n = candidates.length;
      if (n === 0) return;
      const hashes = ctx.blockHashes(bs);
      const matches = index.match(hashes);
      const kv = precise ? ctx.request.kvPrediction : undefined;
      const predicted = kv?.cachedTokens;
      const expected = kv?.expectedCachedTokens;
      const promptTokens = Math.max(0, kv?.promptTokens ?? ctx.request.promptTokens);
      // Engines compute at least one token, so at most promptTokens - 1 can hit.
      const maxCached = Math.max(0, promptTokens - 1);
      let minInflight = Infinity;
      for (let i = 0; i < n; i++) {
        const r = loadTracker.get(candidates[i]!.id).inflightRequests / instanceWeight(candidates[i]!);
        if (r < minInflight) minInflight = r;
      }
      const guard = Math.max(minInflight * params.imbalanceRatio, minInflight + params.imbalanceAbsolute);
      let minCost = Infinity;
      for (let i = 0; i < n; i++) {
        const instance = candidates[i]!;
        const w = instanceWeight(instance);
        const load = loadTracker.get(instance.id);
        const matched = matches.get(instance.id) ?? 0;
        let cached =
          expected?.get(instance.id) ?? predicted?.get(instance.id) ?? Math.min(maxCached, matched * bs);
        if (load.inflightRequests / w > guard) cached = 0;
        if (cached > 0) ctx.noteCachedTokens(instance.id, cached);
        const cost =
          params.uncachedTokenWeight * (promptTokens - cached) +
          (load.pendingPrefillTokens + params.requestTokens * load.inflightRequests) / w;
        out[i] = cost;
        if (cost < minCost) minCost = cost;
      }
      for (let i = 0; i < n; i++) out[i] = (minCost + bs) / (out[i]! + bs);
    },
    onPicked: (ctx, instance) => {
      index.record(instance.id, ctx.blockHashes(bs));
      if (precise) ctx.request.kvPrediction?.routed?.(instance.id);
    },
    forget: (instanceId) => index.forget(instanceId),
  };
}
