import { z } from 'zod';
import { definePlugin } from '../plugin.js';

/** Drops instances whose circuit is open (or half-open with all probe slots taken). Conformance 31. */
export const circuitBreakerFilter = definePlugin({
  type: 'circuit-breaker',
  kind: 'filter',
  description:
    'drop instances whose circuit is open, or half-open with every probe slot taken (added implicitly ' +
    'when the circuit breaker is enabled)',
  params: z.strictObject({}),
  create: (_params, { breakers }) => ({
    filter: (_ctx, candidates) => candidates.filter((instance) => breakers.isAvailable(instance.id)),
  }),
});
