import type { Logger } from '../../common/logger.js';
import type { RoutingSyncSettings } from '../../config/routing-sync-section.js';
import { RedisRoutingBus } from './redis-bus.js';
import { RoutingSync } from './routing-sync.js';

export type { ExpectationPublisher, ExpectationStore, RoutingSyncStats, WarmStart } from './routing-sync.js';
export { RoutingSync } from './routing-sync.js';

/**
 * The `routingSync` section's sync over Redis, not started: the scheduler must create its prefix
 * indexes through `newPrefixIndex` first, so that the warm start (`start()`) has somewhere to load
 * the siblings' routed history.
 */
export function createRedisRoutingSync(
  settings: RoutingSyncSettings,
  /** `responses.redis.url`, taken when the section names no server of its own. */
  sharedRedisUrl: string,
  log: Logger,
): RoutingSync {
  const { redis, channel, ...timing } = settings;
  return new RoutingSync({
    bus: new RedisRoutingBus({ url: redis.url ?? sharedRedisUrl, channel }),
    log,
    ...timing,
  });
}
