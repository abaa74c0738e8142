/**
 * vLLM's per-request prefix-cache salt (`cache_salt`, a field of its chat and completion requests in
 * vllm/entrypoints/openai/protocol.py): the gateway sets it per tenant (gateway/tenant-salt.ts), and KV routing and scheduling prefix their block
 * keys with it, so they read it here rather than from the gateway.
 */

/** The client's own field; overridden (never merged) when isolation is on. */
export const CACHE_SALT_FIELD = 'cache_salt';

/** The salt the engine will see (the tenant's, or a client's own when isolation is off); keys prefix hashes. */
export function cacheSaltOf(body: Record<string, unknown>): string | undefined {
  const salt = body[CACHE_SALT_FIELD];
  return typeof salt === 'string' && salt !== '' ? salt : undefined;
}
