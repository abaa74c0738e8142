import { z } from 'zod';

/**
 * The coordinator's `decodeFirst` section (issue 17 item 5; its own module: coordinator-config.ts is at
 * its size limit). The decision itself is src/coordinator/scheduling-bridge/decode-first.ts.
 */
export const decodeFirstSection = z
  .strictObject({
    enabled: z
      .boolean()
      .default(false)
      .describe(
        'after a prefill/decode pair is chosen, send the request as one plain leg to the decode instance ' +
          '(skipping the prefill leg) when that instance already holds most of the prompt or the rest is ' +
          'short; only decode engines that compute a plain request themselves (vLLM, vllm-ascend) — never SGLang',
      ),
    minCachedFraction: z
      .number()
      .min(0)
      .max(1)
      .default(0.8)
      .describe(
        "decode-first when the decode instance's predicted cached prompt tokens are at least this fraction of " +
          'the prompt (prediction: its KV events when indexed, else a `prefix-affinity`/`precise-prefix` scorer ' +
          'on the decode profile; neither = this rule never fires)',
      ),
    maxUncachedTokens: z
      .int()
      .min(0)
      .default(256)
      .describe(
        '… or when the prompt tokens it would have to compute (prompt minus predicted cached) are at most this',
      ),
  })
  .prefault({})
  .describe(
    'decode-first conditional disaggregation: skip the prefill leg where the decode instance can cheaply compute the prompt',
  );

export type DecodeFirstConfig = z.output<typeof decodeFirstSection>;

/** Scorers whose per-instance cached-token estimate (noted on the decision context) decode-first reads. */
export const CACHE_AWARE_SCORERS: readonly string[] = ['prefix-affinity', 'precise-prefix'];

/**
 * What validation tells an operator who enabled decode-first (config warnings, one line each): decode
 * instances whose engine cannot serve a plain request (SGLang: every request on a decode server waits
 * for a bootstrap peer), and a fleet where nothing predicts a decode instance's cache.
 */
export function decodeFirstWarnings(
  section: DecodeFirstConfig | undefined,
  instances: readonly { id: string; role: string; engine: string; kvEvents?: unknown }[],
  decodeScorers: readonly string[],
): string[] {
  if (!section?.enabled) return [];
  const out: string[] = [];
  const decodes = instances.filter((i) => i.role === 'decode');
  for (const i of decodes)
    if (i.engine === 'sglang')
      out.push(
        `decodeFirst.enabled: decode instance '${i.id}' is SGLang, whose decode servers cannot compute a ` +
          'prompt themselves; its requests always take the prefill leg',
      );
  const predicted =
    decodeScorers.some((t) => CACHE_AWARE_SCORERS.includes(t)) || decodes.some((i) => i.kvEvents);
  if (section.minCachedFraction > 0 && !predicted)
    out.push(
      'decodeFirst.minCachedFraction: nothing predicts what the decode instances hold (no `kvEvents` on them, ' +
        'no `prefix-affinity` or `precise-prefix` scorer on scheduling.decode); only maxUncachedTokens applies',
    );
  return out;
}
