import { definePlugin } from '../plugin.js';
import { createAffinityScorer, prefixAffinityParams } from '../prefix-affinity.js';

/** Prefix-cache affinity estimated from routed history (src/scheduling/prefix-affinity.ts). */
export const prefixAffinityScorer = definePlugin({
  type: 'prefix-affinity',
  kind: 'scorer',
  description:
    'prefer the instance that likely holds the longest prompt prefix (estimated from routed history), traded ' +
    'against its queued work: cost = uncachedTokenWeight × uncached tokens + queued prefill tokens + ' +
    'requestTokens × requests in flight',
  params: prefixAffinityParams,
  create: (params, services) => createAffinityScorer(params, services, false),
});
