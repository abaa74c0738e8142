import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SimEngine, SimOptions } from './options.js';

/** Which key a route needs: none, the api key, or SGLang's ADMIN_OPTIONAL rule. */
export type AuthLevel = 'open' | 'normal' | 'admin_optional';

/** Why a request is refused: 401 (missing or wrong key) or 403 (ADMIN_FORCE without an admin key). */
export interface AuthRefusal {
  status: 401 | 403;
  body: { error: 'Unauthorized' | 'Forbidden' };
}

const UNAUTHORIZED: AuthRefusal = { status: 401, body: { error: 'Unauthorized' } };

/** Simulator-only routes (test hooks, sim-to-sim KV transfer): no engine has them, so no engine guards them. */
const SIM_ONLY = ['/debug/', '/internal/'];

interface EngineAuthRule {
  level(path: string): AuthLevel;
  /** Extra request header that carries the key besides `Authorization: Bearer`. */
  keyHeader: string | null;
}

/**
 * The engines' `--api-key` rules, one row per server family (vllm-ascend serves vLLM's API server).
 * vLLM: vllm-project/vllm vllm/entrypoints/openai/server_utils.py `AuthenticationMiddleware.__call__`
 *   (index 029329a8ed; same rule in api_server.py since 2024): only paths starting with `/v1`, OPTIONS
 *   never; `Authorization: Bearer <key>` else 401 `{"error":"Unauthorized"}`.
 * SGLang: sgl-project/sglang python/sglang/srt/utils/auth.py `decide_request_auth` (index 0ce3659c2b):
 *   OPTIONS and `/health*`, `/ready*`, `/metrics*` always open; NORMAL routes need the api key when one
 *   is set (the admin key does not unlock them); ADMIN_OPTIONAL routes (`/abort_request`, http_server.py
 *   `@auth_level(AuthLevel.ADMIN_OPTIONAL)`) need the admin key when set (the api key is then refused),
 *   else the api key, else nothing. Bearer or `x-api-key`. The sim has no ADMIN_FORCE route, so no 403.
 */
const RULES: Record<'vllm' | 'sglang', EngineAuthRule> = {
  vllm: {
    level: (path) => (path.startsWith('/v1') ? 'normal' : 'open'),
    keyHeader: null,
  },
  sglang: {
    level: (path) =>
      path.startsWith('/health') || path.startsWith('/ready') || path.startsWith('/metrics')
        ? 'open'
        : path === '/abort_request'
          ? 'admin_optional'
          : 'normal',
    keyHeader: 'x-api-key',
  },
};

const ruleFor = (engine: SimEngine): EngineAuthRule => (engine === 'sglang' ? RULES.sglang : RULES.vllm);

/** Keys from the options; `null` = not configured. */
export type AuthKeys = Pick<SimOptions, 'apiKey' | 'adminApiKey'>;

function sameKey(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The tokens a request presents: the Bearer token (scheme case-insensitive, as SGLang) and the engine's key header. */
function presented(req: IncomingMessage, keyHeader: string | null): string[] {
  const out: string[] = [];
  const authz = req.headers.authorization;
  if (typeof authz === 'string') {
    const sp = authz.indexOf(' ');
    if (sp > 0 && authz.slice(0, sp).toLowerCase() === 'bearer') out.push(authz.slice(sp + 1));
  }
  const extra = keyHeader === null ? undefined : req.headers[keyHeader];
  if (typeof extra === 'string') out.push(extra);
  return out;
}

/** The key a route needs under `keys`, or null when it is open. */
export function requiredKey(engine: SimEngine, path: string, keys: AuthKeys): string | null {
  if (SIM_ONLY.some((p) => path.startsWith(p))) return null;
  const level = ruleFor(engine).level(path);
  if (level === 'open') return null;
  if (level === 'admin_optional') return keys.adminApiKey ?? keys.apiKey;
  return keys.apiKey;
}

/** Decides one request; null = allowed. */
export function authorize(
  engine: SimEngine,
  keys: AuthKeys,
  req: IncomingMessage,
  path: string,
): AuthRefusal | null {
  if (req.method === 'OPTIONS') return null;
  const key = requiredKey(engine, path, keys);
  if (key === null) return null;
  return presented(req, ruleFor(engine).keyHeader).some((t) => sameKey(t, key)) ? null : UNAUTHORIZED;
}

/**
 * Request guard for the simulator's server: answers refused requests itself (the engines' bodies
 * are `{"error":"Unauthorized"}`, not OpenAI errors) and returns false; true lets the request through.
 * Costs one `startsWith` per request when no key is configured.
 */
export function authGuard(
  opts: Pick<SimOptions, 'engine' | 'apiKey' | 'adminApiKey'>,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  if (opts.apiKey === null && opts.adminApiKey === null) return () => true;
  return (req, res) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const refusal = authorize(opts.engine, opts, req, q < 0 ? url : url.slice(0, q));
    if (refusal === null) return true;
    const body = JSON.stringify(refusal.body);
    res.writeHead(refusal.status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
    return false;
  };
}
