import { z } from 'zod';
import { definePlugin, instanceWeight } from '../plugin.js';
import { seededRandom } from '../seeded-random.js';

/** Picks at random, proportionally to instance weight; ignores scores. Seedable. */
export const randomPicker = definePlugin({
  type: 'random',
  kind: 'picker',
  description: 'uniform (weight-proportional) random choice; ignores scores',
  params: z.strictObject({
    seed: z.number().int().optional().describe("own seed (unset: the scheduler's random source)"),
  }),
  create: (params, services) => {
    const random = params.seed === undefined ? services.random : seededRandom(params.seed);
    return {
      pick: (_ctx, candidates) => {
        if (candidates.length === 0) return -1;
        let total = 0;
        for (const c of candidates) total += instanceWeight(c);
        let r = random() * total;
        for (let i = 0; i < candidates.length; i++) {
          r -= instanceWeight(candidates[i]!);
          if (r < 0) return i;
        }
        return candidates.length - 1;
      },
    };
  },
});
