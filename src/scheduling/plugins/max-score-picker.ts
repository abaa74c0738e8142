import { z } from 'zod';
import { definePlugin } from '../plugin.js';

/** Picks the highest weighted score; ties are broken uniformly at random (seeded). */
export const maxScorePicker = definePlugin({
  type: 'max-score',
  kind: 'picker',
  description: 'highest total score, random among ties',
  params: z.strictObject({}),
  create: () => ({
    pick: (ctx, candidates, scores) => {
      let best = -1;
      let bestScore = -Infinity;
      let ties = 0;
      for (let i = 0; i < candidates.length; i++) {
        const s = scores[i]!;
        if (s > bestScore + 1e-12) {
          best = i;
          bestScore = s;
          ties = 1;
        } else if (Math.abs(s - bestScore) <= 1e-12) {
          ties += 1;
          if (ctx.random() * ties < 1) best = i; // reservoir sampling among ties
        }
      }
      return best;
    },
  }),
});
