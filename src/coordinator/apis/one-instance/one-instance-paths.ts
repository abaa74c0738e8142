/**
 * Client routes with no generation: one engine answers them whole, so they run on one instance with
 * no P/D split and their bodies pass through unchanged. The paths are vLLM's OpenAI-compatible
 * server's (vllm-project/vllm main 2026):
 * - `/v1/embeddings`: vllm/entrypoints/pooling/embed/api_router.py (SGLang serves it too,
 *   python/sglang/srt/entrypoints/http_server.py `openai_v1_embeddings`);
 * - `/tokenize`, `/detokenize`: vllm/entrypoints/serve/tokenize/api_router.py;
 * - `/rerank`, `/v1/rerank`, `/v2/rerank`, `/score`, `/v1/score`: vllm/entrypoints/pooling/score/api_router.py;
 * - `/pooling`: vllm/entrypoints/pooling/pooling/api_router.py.
 */
export const ONE_INSTANCE_PATHS: readonly string[] = [
  '/v1/embeddings',
  '/tokenize',
  '/detokenize',
  '/rerank',
  '/v1/rerank',
  '/v2/rerank',
  '/score',
  '/v1/score',
  '/pooling',
];

const PATHS: ReadonlySet<string> = new Set(ONE_INSTANCE_PATHS);

export function isOneInstancePath(path: string): boolean {
  return PATHS.has(path);
}
