import type { EngineResponse, EngineTransport, UpstreamRequest } from './http-clients.js';

/** The keys the proxy presents to its engine (`--engine-api-key`, `--engine-admin-api-key`). */
export interface EngineCredentials {
  apiKey: string | null;
  adminApiKey: string | null;
}

/**
 * An engine refused the proxy's credentials (401/403). Thrown, not relayed: the status would
 * otherwise reach the client as if its own key were wrong. Callers see it like any failed engine
 * call (legs answer 502, so the coordinator fails the attempt over and counts it against the
 * instance's breaker; start-up treats it as fatal). The message never contains a key.
 */
export class EngineAuthError extends Error {
  constructor(
    readonly status: number,
    method: string,
    path: string,
    admin: boolean,
  ) {
    const flag = admin ? '--engine-admin-api-key (else --engine-api-key)' : '--engine-api-key';
    super(
      `engine answered ${status} to ${method} ${path.split('?')[0]}: the engine API key (${flag}) is missing or wrong`,
    );
    this.name = 'EngineAuthError';
  }
}

/**
 * Adds `Authorization: Bearer` to every engine call. SGLang guards every route but `/health*`,
 * `/ready*`, `/metrics*` and vLLM only `/v1*`, so one key on every call satisfies both; SGLang's
 * `/abort_request` is ADMIN_OPTIONAL: the admin key when set, else the api key (sgl-project/sglang
 * python/sglang/srt/utils/auth.py `decide_request_auth`; vllm-project/vllm
 * vllm/entrypoints/openai/server_utils.py `AuthenticationMiddleware`; 2026 index versions,
 * fixtures README facts 21–22). A configured key replaces whatever `Authorization` the client sent.
 */
export function withEngineCredentials(engine: EngineTransport, creds: EngineCredentials): EngineTransport {
  return {
    async request(req: UpstreamRequest): Promise<EngineResponse> {
      const key = req.admin ? (creds.adminApiKey ?? creds.apiKey) : creds.apiKey;
      const headers = key === null ? req.headers : { ...req.headers, authorization: `Bearer ${key}` };
      const res = await engine.request(key === null ? req : { ...req, headers });
      // Without a key of ours, a 401 answers the client's own Authorization: it is the client's to see.
      if ((res.statusCode === 401 || res.statusCode === 403) && !(key === null && hasAuthorization(req))) {
        await res.body.dump().catch(() => undefined);
        throw new EngineAuthError(res.statusCode, req.method, req.path, req.admin === true);
      }
      return res;
    },
    close: () => engine.close(),
  };
}

function hasAuthorization(req: UpstreamRequest): boolean {
  for (const name of Object.keys(req.headers)) if (name.toLowerCase() === 'authorization') return true;
  return false;
}
