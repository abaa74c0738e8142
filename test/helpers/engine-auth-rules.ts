import { fixtureBody } from '../fixtures/engines/load.js';

/** The keys a fake engine was started with (`--api-key`, SGLang `--admin-api-key`). */
export interface EngineKeys {
  apiKey: string | null;
  adminApiKey?: string | null;
}

/** What the engine answers a request: `null` = let it through, else the status and body. */
export interface AuthRefusal {
  status: number;
  body: Record<string, unknown>;
}

/**
 * The engines' own auth rules (fixtures README facts 21–22), for fake engines in tests:
 * vLLM guards only `/v1*`; SGLang guards every route but `/health*`, `/ready*`, `/metrics*`, and
 * its ADMIN_OPTIONAL `/abort_request` takes only the admin key when one is set.
 * vllm-project/vllm vllm/entrypoints/openai/server_utils.py `AuthenticationMiddleware`;
 * sgl-project/sglang python/sglang/srt/utils/auth.py `decide_request_auth` (2026 index versions).
 */
export function engineAuthRefusal(
  engine: 'vllm' | 'sglang',
  keys: EngineKeys,
  path: string,
  authorization: string | undefined,
): AuthRefusal | null {
  const presented = authorization?.startsWith('Bearer ') ? authorization.slice(7) : null;
  let required: string | null;
  if (engine === 'vllm') {
    required = path.startsWith('/v1') ? keys.apiKey : null;
  } else if (/^\/(health|ready|metrics)/.test(path)) {
    required = null;
  } else if (path.startsWith('/abort_request')) {
    required = keys.adminApiKey ?? keys.apiKey;
  } else {
    required = keys.apiKey;
  }
  if (required === null || presented === required) return null;
  const fixture = engine === 'vllm' ? 'vllm/openai/unauthorized.json' : 'sglang/server/unauthorized.json';
  return { status: 401, body: fixtureBody(fixture) };
}
