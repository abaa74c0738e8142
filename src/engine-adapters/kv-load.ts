/**
 * Did a P/D decode load the KV it was handed? The decode's own usage tells: vLLM counts tokens
 * loaded by the KV connector in `num_cached_tokens` like prefix-cache hits (vllm-project/vllm
 * vllm/v1/core/sched/scheduler.py `Scheduler.schedule`: `num_cached_tokens = num_computed_tokens`,
 * local plus external), shown as `usage.prompt_tokens_details.cached_tokens` only when the server
 * runs with `--enable-prompt-tokens-details`. A decode that recomputes the prompt (a silent P/D
 * failure) reports few cached tokens.
 */
export type KvLoadVerdict = 'loaded' | 'not_loaded' | 'unknown';

export interface KvLoad {
  verdict: KvLoadVerdict;
  promptTokens: number | null;
  cachedTokens: number | null;
}

/**
 * Motor's threshold: at least half the prompt must come from cache/KV. The last partial block may be
 * recomputed, and a decode's own prefix cache can add to it, so "all of it" would be too strict.
 */
const LOADED_SHARE = 0.5;

/** The verdict from a decode answer's `usage` (unknown when the engine does not report cached tokens). */
export function decodeKvLoad(usage: unknown): KvLoad {
  const u = typeof usage === 'object' && usage !== null ? (usage as Record<string, unknown>) : {};
  const prompt = typeof u.prompt_tokens === 'number' ? u.prompt_tokens : null;
  const details = u.prompt_tokens_details;
  const cached =
    typeof details === 'object' &&
    details !== null &&
    typeof (details as { cached_tokens?: unknown }).cached_tokens === 'number'
      ? (details as { cached_tokens: number }).cached_tokens
      : null;
  if (prompt === null || cached === null || prompt <= 0)
    return { verdict: 'unknown', promptTokens: prompt, cachedTokens: cached };
  return {
    verdict: cached >= prompt * LOADED_SHARE ? 'loaded' : 'not_loaded',
    promptTokens: prompt,
    cachedTokens: cached,
  };
}
