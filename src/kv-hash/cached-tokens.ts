/**
 * The prompt tokens vLLM will serve from its prefix cache when an instance holds the first
 * `heldBlocks` blocks of a prompt of `promptTokens` tokens: whole blocks only, and never the last
 * token — it is recomputed for its logits (vllm/v1/core/kv_cache_manager.py `get_computed_blocks`:
 * `max_cache_hit_length = request.num_tokens - 1`; v0.10.2 and later). What the engine then reports
 * as `usage.prompt_tokens_details.cached_tokens`.
 */
export function predictedCachedTokens(heldBlocks: number, promptTokens: number, blockSize: number): number {
  if (promptTokens <= 0 || heldBlocks <= 0) return 0;
  const hittable = Math.floor((promptTokens - 1) / blockSize);
  return Math.min(heldBlocks, hittable) * blockSize;
}
