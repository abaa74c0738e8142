import { z } from 'zod';
import { definePlugin } from '../plugin.js';

/**
 * Drops instances whose fresh engine metrics show KV usage or queue above a threshold. Instances with
 * missing/stale metrics are kept (counted as fallbacks). If every candidate would be dropped, all are kept:
 * pressure is a preference, not an outage.
 */
export const kvPressureFilter = definePlugin({
  type: 'kv-pressure',
  kind: 'filter',
  description:
    'drop instances whose fresh engine metrics show KV-cache usage or waiting queue above a threshold; ' +
    'missing or stale metrics keep the instance, and all are kept if all would go',
  params: z.strictObject({
    maxKvUsage: z.number().min(0).max(1).default(0.95).describe('highest `kv_cache_usage_perc` kept'),
    maxWaiting: z
      .number()
      .int()
      .nonnegative()
      .optional()
      .describe('most `num_requests_waiting` kept (unset: no limit)'),
  }),
  create: (params, { engineMetrics }) => ({
    filter: (ctx, candidates) => {
      const kept = candidates.filter((instance) => {
        const m = engineMetrics.fresh(instance.id, ctx.nowMs);
        if (!m) return true;
        if (m.kv_cache_usage_perc > params.maxKvUsage) return false;
        return params.maxWaiting === undefined || m.num_requests_waiting <= params.maxWaiting;
      });
      return kept.length > 0 ? kept : candidates;
    },
  }),
});
