import { z } from 'zod';
import { definePlugin } from '../plugin.js';

function fnv1a(text: string, seed = 0x811c9dc5): number {
  let h = seed | 0;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

function mix(a: number, b: number): number {
  let h = Math.imul(a ^ Math.imul(b, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * Session affinity by rendezvous (highest-random-weight) hashing of the session key over the candidates:
 * the same key maps to the same instance while it is a candidate, and only keys of a removed instance
 * move. The winner scores 1, others 0; requests without a session key score 0 everywhere (neutral).
 */
export const sessionAffinityScorer = definePlugin({
  type: 'session-affinity',
  kind: 'scorer',
  description:
    'keep a session on one instance: rendezvous hashing of the `x-session-id` request header (none: neutral)',
  params: z.strictObject({}),
  create: () => {
    const idHashes = new Map<string, number>();
    return {
      score: (ctx, candidates, out) => {
        out.fill(0);
        const key = ctx.request.sessionKey;
        if (key === undefined || key === '' || candidates.length === 0) return;
        const keyHash = fnv1a(key);
        let best = -1;
        let bestValue = -1;
        for (let i = 0; i < candidates.length; i++) {
          const id = candidates[i]!.id;
          let idHash = idHashes.get(id);
          if (idHash === undefined) {
            idHash = fnv1a(id, 0x2545f491);
            idHashes.set(id, idHash);
          }
          const value = mix(keyHash, idHash);
          if (value > bestValue) {
            bestValue = value;
            best = i;
          }
        }
        out[best] = 1;
      },
      forget: (instanceId) => {
        idHashes.delete(instanceId);
      },
    };
  },
});
