import { createHmac, randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { CACHE_SALT_FIELD } from '../internal-request/cache-salt.js';

/**
 * Per-tenant prefix-cache isolation (issue 15, finding 8). With `server.tenantIsolation` on, every
 * client request gets `cache_salt` = base64url(HMAC-SHA256(secret, tenant identity)): 43 characters,
 * the 256-bit salt vLLM recommends. The engine then only reuses cached blocks of requests with the same
 * salt, so a probe from one API key cannot time or count (`cached_tokens`) another key's prompt, and
 * the prefix-affinity index, keyed with the same salt, does not route the probe to the victim's
 * instance either. The raw key never leaves the coordinator: only the keyed hash goes on the wire.
 *
 * The secret comes from the environment variable named by `server.tenantSaltSecretEnv`, so several
 * coordinator replicas (and restarts) give one tenant the same salt and keep its cache warm. Without it a
 * random per-process secret is used: still isolating, but each replica (and each restart) salts the
 * same tenant differently, so its cache hits are split across replicas and lost on restart.
 */

/** Returns the salt of one request, or undefined when isolation is off. */
export type TenantSalter = (req: IncomingMessage, apiKey: string) => string | undefined;

export interface TenantSaltOptions {
  /** `off`, `api-key` or `header:<name>` (validated by the config schema). */
  isolation: string;
  /** Shared secret (from `server.tenantSaltSecretEnv`); undefined = a random per-process secret. */
  secret?: string;
}

export function tenantSalter({ isolation, secret }: TenantSaltOptions): TenantSalter {
  if (isolation === 'off') return () => undefined;
  const key = secret !== undefined ? Buffer.from(secret, 'utf8') : randomBytes(32);
  const salt = (identity: string): string =>
    createHmac('sha256', key).update('motor-cache-salt\0').update(identity).digest('base64url');
  if (isolation === 'api-key') return (_req, apiKey) => salt(apiKey);
  const header = isolation.slice('header:'.length).toLowerCase();
  return (req) => {
    const value = req.headers[header];
    // A missing header is one tenant of its own ('' never collides with a sent value: values are prefixed).
    return salt(
      typeof value === 'string' ? `h:${value}` : Array.isArray(value) ? `h:${value.join(',')}` : '',
    );
  };
}

/**
 * Sets the tenant's salt on the client body that every engine leg is built from, replacing a
 * client-sent `cache_salt` (a client must not pick another tenant's salt). Off: the body is untouched.
 */
export function applyCacheSalt(body: Record<string, unknown>, salt: string | undefined): void {
  if (salt !== undefined) body[CACHE_SALT_FIELD] = salt;
}
