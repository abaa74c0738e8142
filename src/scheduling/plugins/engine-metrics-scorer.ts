import { z } from 'zod';
import { definePlugin, scoresFromCosts } from '../plugin.js';

/**
 * Prefers short engine queues and free KV cache, from scraped engine metrics:
 * `waiting + runningWeight × running + kvWeight × kv_cache_usage_perc`, min-max normalised over the
 * instances with fresh metrics. Missing/stale metrics are ignored (neutral 0.5) and counted as fallbacks.
 */
export const engineMetricsScorer = definePlugin({
  type: 'engine-metrics',
  kind: 'scorer',
  description:
    'prefer short engine queues and free KV cache from scraped engine metrics: ' +
    '`waiting + runningWeight × running + kvWeight × kv_cache_usage_perc`; stale metrics score neutral',
  params: z.strictObject({
    runningWeight: z
      .number()
      .nonnegative()
      .default(0.1)
      .describe('cost of one running request, against 1 per waiting request'),
    kvWeight: z
      .number()
      .nonnegative()
      .default(4)
      .describe('cost of a full KV cache (`kv_cache_usage_perc` 1)'),
  }),
  create: (params, { engineMetrics }) => ({
    score: (ctx, candidates, out) => {
      const fresh: number[] = [];
      const costs: number[] = [];
      for (let i = 0; i < candidates.length; i++) {
        const m = engineMetrics.fresh(candidates[i]!.id, ctx.nowMs);
        out[i] = 0.5;
        if (!m) continue;
        fresh.push(i);
        costs.push(
          m.num_requests_waiting +
            params.runningWeight * m.num_requests_running +
            params.kvWeight * m.kv_cache_usage_perc,
        );
      }
      const scores = new Float64Array(costs.length);
      scoresFromCosts(Float64Array.from(costs), scores);
      for (let k = 0; k < fresh.length; k++) out[fresh[k]!] = scores[k]!;
    },
  }),
});
