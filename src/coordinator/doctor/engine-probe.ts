import type { Upstreams } from '../fleet/upstream.js';
import type { Instance } from '../fleet/instance-source.js';
import type { EngineTokens } from './doctor-checks.js';

/**
 * The engine calls of `motor doctor`, made straight to a direct-mode instance (with its configured
 * key). Engine facts:
 * - vLLM `POST /tokenize` (vllm-project/vllm vllm/entrypoints/serve/tokenize/api_router.py `tokenize`
 *   and protocol.py on main; vllm/entrypoints/openai/api_server.py + serving_tokenization.py
 *   `create_tokenize` in the 0.6–0.11 releases): a chat body `{model, messages,
 *   add_generation_prompt (default true), add_special_tokens (default false), …}` is rendered with the
 *   server's chat template like a chat request; a completion body `{model, prompt, add_special_tokens
 *   (default true)}`. The answer is `{count, max_model_len, tokens, token_strs}`.
 * - SGLang `POST /v1/tokenize` (sgl-project/sglang python/sglang/srt/entrypoints/openai/
 *   serving_tokenize.py `OpenAIServingTokenize`): a `prompt` only, no chat form — a chat probe there is
 *   counted from the `usage.prompt_tokens` of a one-token request instead.
 * - vLLM's `vllm:cache_config_info` gauge carries every CacheConfig field as a label
 *   (vllm/config/cache.py `CacheConfig.metrics_info`), `block_size` and `prefix_caching_hash_algo`
 *   among them; the hash seed (PYTHONHASHSEED) is an environment variable and is not shown.
 */

export type ProbeInput = { messages: readonly unknown[] } | { prompt: string };

type Up = Pick<Upstreams, 'request'>;

async function call(
  up: Up,
  instance: Instance,
  method: 'GET' | 'POST',
  path: string,
  body: unknown,
  timeoutMs: number,
): Promise<{ status: number; text: string }> {
  const res = await up.request(instance, {
    method,
    path,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(Math.max(1, timeoutMs)),
  });
  return { status: res.statusCode, text: await res.body.text() };
}

function parse(text: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

const isTokenList = (v: unknown): v is number[] => Array.isArray(v) && v.every((t) => Number.isInteger(t));

/** The engine's tokens of a probe: its tokenize route, else the prompt_tokens of a one-token request. */
export async function engineTokens(
  up: Up,
  instance: Instance,
  model: string,
  input: ProbeInput,
  timeoutMs: number,
): Promise<EngineTokens> {
  const chat = 'messages' in input;
  try {
    const route = instance.engine === 'sglang' ? (chat ? null : '/v1/tokenize') : '/tokenize';
    if (route !== null) {
      const r = await call(up, instance, 'POST', route, { model, ...input }, timeoutMs);
      const json = parse(r.text);
      if (r.status === 200 && json !== null && isTokenList(json.tokens))
        return { tokens: json.tokens, via: `POST ${route}` };
      if (r.status !== 404 && r.status !== 405)
        return { error: `POST ${route} answered ${r.status}: ${r.text.slice(0, 200)}` };
    }
    const path = chat ? '/v1/chat/completions' : '/v1/completions';
    const r = await call(up, instance, 'POST', path, { model, ...input, max_tokens: 1 }, timeoutMs);
    const usage = parse(r.text)?.usage as { prompt_tokens?: unknown } | undefined;
    if (r.status === 200 && typeof usage?.prompt_tokens === 'number')
      return { count: usage.prompt_tokens, via: `usage.prompt_tokens of POST ${path}` };
    return { error: `POST ${path} answered ${r.status} without usage.prompt_tokens` };
  } catch (err) {
    return { error: `${instance.url}: ${(err as Error).message}` };
  }
}

/** Sends a completions request for `tokenIds` (one output token): the engine caches its blocks. */
export async function probeCompletion(
  up: Up,
  instance: Instance,
  model: string,
  tokenIds: readonly number[],
  timeoutMs: number,
): Promise<string | null> {
  try {
    const body = { model, prompt: tokenIds, max_tokens: 1 };
    const r = await call(up, instance, 'POST', '/v1/completions', body, timeoutMs);
    return r.status === 200 ? null : `POST /v1/completions answered ${r.status}: ${r.text.slice(0, 200)}`;
  } catch (err) {
    return `${instance.url}: ${(err as Error).message}`;
  }
}

export interface CacheConfigInfo {
  blockSize: number | null;
  hashAlgo: string | null;
}

/** The labels of the first `vllm:cache_config_info` sample of a Prometheus text; null when absent. */
export function parseCacheConfigInfo(text: string): CacheConfigInfo | null {
  const at = text.search(/^vllm:cache_config_info\{/m);
  if (at < 0) return null;
  const end = text.indexOf('\n', at);
  const line = text.slice(at, end < 0 ? undefined : end);
  const label = (name: string): string | null => new RegExp(`[{,]${name}="([^"]*)"`).exec(line)?.[1] ?? null;
  const size = Number(label('block_size'));
  return {
    blockSize: Number.isSafeInteger(size) && size > 0 ? size : null,
    hashAlgo: label('prefix_caching_hash_algo'),
  };
}

/** The engine's `vllm:cache_config_info` from its `/metrics`; null when it has none or is unreachable. */
export async function engineCacheConfig(
  up: Up,
  instance: Instance,
  timeoutMs: number,
): Promise<CacheConfigInfo | null> {
  try {
    const r = await call(up, instance, 'GET', '/metrics', undefined, timeoutMs);
    return r.status === 200 ? parseCacheConfigInfo(r.text) : null;
  } catch {
    return null;
  }
}
