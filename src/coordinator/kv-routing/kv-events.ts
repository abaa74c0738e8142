import type { Logger } from '../../common/logger.js';
import type { CoordinatorConfig } from '../../config/coordinator-config.js';
import type { KvEventsHub, KvEventsSource } from '../../kv-events/kv-events-hub.js';
import type { Registry } from '../../registry/index.js';
import type { KvPredictor } from './kv-prediction.js';
import type { Observability } from '../../observability/observability.js';

/** The instances that publish KV events, as the hub takes them (records of the registry: `kv_events`). */
function publishingIn(registry: Registry): KvEventsSource[] {
  const out: KvEventsSource[] = [];
  for (const r of registry.list()) if (r.kv_events !== null) out.push({ id: r.id, kvEvents: r.kv_events });
  return out;
}

/**
 * Subscribes to the KV events of the instances that publish them (issue 17), with the index health on
 * the coordinator's `/metrics`. With a registry (the control plane) the hub follows its records — the
 * config's instances (`kvEvents`) and those registered through the management API or etcd
 * (`kv_events`), added, changed and removed as the registry changes. The hub exists when an instance
 * publishes at start-up or `kvHash.groups` is set (precise routing asked for, instances may register
 * later); otherwise null and ZeroMQ is not even loaded (a later registration with `kv_events` is
 * logged as ignored).
 */
export async function startKvEvents(
  config: CoordinatorConfig,
  log: Logger,
  observability: Observability,
  registry: Registry | null = null,
): Promise<KvEventsHub | null> {
  const publishing = (): KvEventsSource[] =>
    registry ? publishingIn(registry) : config.instances.filter((i) => i.kvEvents !== undefined);
  if (publishing().length === 0 && config.kvHash.groups.length === 0) {
    registry?.watch((event) => {
      if (event.type === 'add' && event.instance.kv_events !== null)
        log.warn(
          { instance: event.instance.id },
          'KV events: registered kv_events ignored (no instance published at start-up and no kvHash.groups)',
        );
    });
    return null;
  }
  const [{ KvEventsHub }, { KvEventsMetrics }] = await Promise.all([
    import('../../kv-events/kv-events-hub.js'),
    import('../../observability/kv-events-metrics.js'),
  ]);
  let health: KvEventsHub['health'] = () => ({ instances: [], indexedBlocks: 0, forgottenBlocks: 0 });
  const metrics = new KvEventsMetrics(observability.metrics.registry, () => health());
  const hub = new KvEventsHub({
    ...config.kvEvents,
    observer: metrics,
    onError: (instance, message) => log.warn({ instance, error: message }, 'KV event stream failed'),
  });
  health = () => hub.health();
  hub.sync(publishing());
  // after close, sync is a no-op; the registry closes after the hub (CoordinatorApp.close)
  registry?.watch((event) => {
    if (event.type !== 'drained') hub.sync(publishing());
  });
  log.info({ instances: publishing().map((i) => i.id) }, 'KV events: subscribed');
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
  return new KvPredictor(keys, hub, log, {
    inflightTtlMs: config.kvEvents.inflightTtlMs,
    maxInflightBlocks: config.kvEvents.maxIndexedBlocks,
  });
}
