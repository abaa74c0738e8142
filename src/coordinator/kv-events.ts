import type { Logger } from '../common/logger.js';
import type { CoordinatorConfig } from '../config/coordinator-config.js';
import type { KvEventsHub } from '../kv-events/kv-events-hub.js';
import type { KvPredictor } from './kv-prediction.js';
import type { Observability } from '../observability/observability.js';

/**
 * Subscribes to the KV events of the configured instances that set `kvEvents` (issue 17), with the
 * index health on the coordinator's `/metrics`. Null (and ZeroMQ not even loaded) when none does.
 * Static instances only for now: registry-registered instances carry no `kvEvents` yet.
 */
export async function startKvEvents(
  config: CoordinatorConfig,
  log: Logger,
  observability: Observability,
): Promise<KvEventsHub | null> {
  const publishing = config.instances.filter((i) => i.kvEvents !== undefined);
  if (publishing.length === 0) return null;
  const [{ KvEventsHub }, { KvEventsMetrics }] = await Promise.all([
    import('../kv-events/kv-events-hub.js'),
    import('../observability/kv-events-metrics.js'),
  ]);
  let health: KvEventsHub['health'] = () => ({ instances: [], indexedBlocks: 0, forgottenBlocks: 0 });
  const metrics = new KvEventsMetrics(observability.metrics.registry, () => health());
  const hub = new KvEventsHub({
    ...config.kvEvents,
    observer: metrics,
    onError: (instance, message) => log.warn({ instance, error: message }, 'KV event stream failed'),
  });
  health = () => hub.health();
  hub.sync(publishing);
  log.info({ instances: publishing.map((i) => i.id) }, 'KV events: subscribed');
  return hub;
}

/**
 * The `kvHash` groups' tokenizers feeding the `precise-prefix` scorer's predictions (kv-prediction.ts);
 * null without a KV events hub or without groups (the model tokenizer is then not even loaded).
 */
export async function startKvPredictor(
  config: CoordinatorConfig,
  hub: KvEventsHub | null,
  log: Logger,
): Promise<KvPredictor | null> {
  if (hub === null || config.kvHash.groups.length === 0) return null;
  const [{ PromptBlockKeys }, { KvPredictor }] = await Promise.all([
    import('./prompt-block-keys.js'),
    import('./kv-prediction.js'),
  ]);
  const keys = await PromptBlockKeys.start(config.kvHash.groups, log);
  log.info(
    { groups: config.kvHash.groups.map((g) => g.name) },
    'KV events: block hashes computed for routing',
  );
  return new KvPredictor(keys, hub, log);
}
