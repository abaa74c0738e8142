import { MemoryResponseStore } from './memory-store.js';
import { RedisResponseStore } from './redis-store.js';
import type { ResponseStore, ResponseStoreObserver } from './response-store.js';

export type { ResponseStore, ResponseStoreObserver, StoredResponse } from './response-store.js';
export { MemoryResponseStore } from './memory-store.js';
export { RedisResponseStore } from './redis-store.js';

/** The `responses` config section's store settings. */
export interface ResponseStoreSettings {
  store: 'memory' | 'redis' | 'none';
  ttlSeconds: number;
  maxStoredBytes: number;
  memory: { maxEntries: number; maxBytes: number };
  redis: { url: string; keyPrefix: string; commandTimeoutMs: number };
}

/** The configured store (Redis: connecting, or retrying in the background when it is not up). */
export async function createResponseStore(
  s: ResponseStoreSettings,
  observer: ResponseStoreObserver,
  onRedisError: (err: Error) => void,
): Promise<ResponseStore | null> {
  const limits = { maxRecordBytes: s.maxStoredBytes, ttlSeconds: s.ttlSeconds };
  if (s.store === 'none') return null;
  if (s.store === 'memory') return new MemoryResponseStore({ ...limits, ...s.memory, observer });
  const store = new RedisResponseStore({ ...limits, ...s.redis, observer, onError: onRedisError });
  await store.start();
  return store;
}
