import { z } from 'zod';
import { definePlugin, instanceWeight } from '../plugin.js';

/**
 * Smooth weighted round-robin (nginx): each pick adds every candidate's weight to its counter, takes the
 * largest and subtracts the total. Equal weights give plain rotation; ignores scores.
 */
export const roundRobinPicker = definePlugin({
  type: 'round-robin',
  kind: 'picker',
  description: 'smooth weighted round-robin over the candidates; ignores scores',
  params: z.strictObject({}),
  create: () => {
    const current = new Map<string, number>();
    return {
      pick: (_ctx, candidates) => {
        let best = -1;
        let bestValue = -Infinity;
        let total = 0;
        for (let i = 0; i < candidates.length; i++) {
          const instance = candidates[i]!;
          const w = instanceWeight(instance);
          total += w;
          const value = (current.get(instance.id) ?? 0) + w;
          current.set(instance.id, value);
          if (value > bestValue) {
            bestValue = value;
            best = i;
          }
        }
        if (best >= 0) current.set(candidates[best]!.id, bestValue - total);
        return best;
      },
      forget: (instanceId) => {
        current.delete(instanceId);
      },
    };
  },
});
