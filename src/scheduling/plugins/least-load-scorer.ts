import { z } from 'zod';
import { definePlugin, instanceWeight, scoresFromCosts } from '../plugin.js';

/**
 * Prefers instances with the least in-flight work tracked by the coordinator itself:
 * `(inflightRequests + inflightTokens × tokenWeight) / weight`, min-max normalised.
 */
export const leastLoadScorer = definePlugin({
  type: 'least-load',
  kind: 'scorer',
  description:
    'prefer fewer in-flight requests and tokens, as tracked by Motor: `(requests + tokens × tokenWeight) / weight`',
  params: z.strictObject({
    tokenWeight: z
      .number()
      .nonnegative()
      .default(1 / 1024)
      .describe(
        'requests-equivalent of one in-flight prompt token (1/1024: a 1k-token prompt weighs one request)',
      ),
  }),
  create: (params, { loadTracker }) => ({
    score: (_ctx, candidates, out) => {
      const costs = new Float64Array(candidates.length);
      for (let i = 0; i < candidates.length; i++) {
        const instance = candidates[i]!;
        const load = loadTracker.get(instance.id);
        costs[i] =
          (load.inflightRequests + load.inflightTokens * params.tokenWeight) / instanceWeight(instance);
      }
      scoresFromCosts(costs, out);
    },
  }),
});
