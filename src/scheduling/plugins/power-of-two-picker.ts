import { z } from 'zod';
import { definePlugin } from '../plugin.js';

/**
 * Power of two choices: samples two distinct candidates at random and keeps the better-scored one
 * (the first sampled on a tie). Pair it with `least-load` for the classic balancer.
 */
export const powerOfTwoPicker = definePlugin({
  type: 'power-of-two',
  kind: 'picker',
  description: 'best of two random candidates by score',
  params: z.strictObject({}),
  create: () => ({
    pick: (ctx, candidates, scores) => {
      const n = candidates.length;
      if (n <= 1) return n - 1;
      const a = Math.floor(ctx.random() * n);
      let b = Math.floor(ctx.random() * (n - 1));
      if (b >= a) b += 1;
      return scores[b]! > scores[a]! ? b : a;
    },
  }),
});
