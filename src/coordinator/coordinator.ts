import type { Server } from 'node:http';
import { closeServer, listen } from '../common/http.js';
import { logListening, type Logger } from '../common/logger.js';
import { TakeOnceStore } from '../common/take-once-store.js';
import type { CoordinatorConfig } from '../config/coordinator-config.js';
import { createCoordinatorObservability } from '../observability/coordinator-observability.js';
import type { Observability } from '../observability/observability.js';
import { startControlPlane, type ControlPlane } from './control-plane.js';
import { Dispatcher } from './dispatch/dispatcher.js';
import type { PendingTrigger } from './dispatch/pending-trigger.js';
import { Upstreams } from './upstream.js';
import { createGateway } from './gateway/gateway.js';
import { StaticInstanceSource, type InstanceSource } from './instance-source.js';
import { SchedulingAdapter } from './scheduling-adapter.js';
import { startKvEvents } from './kv-events.js';
import type { KvEventsHub } from '../kv-events/kv-events-hub.js';

export interface RunningCoordinator {
  url: string;
  /** The management API's URL (null when `management.port` is null or a source override is used). */
  managementUrl: string | null;
  server: Server;
  /** Registry, health and management (absent with a `source` override). */
  controlPlane: ControlPlane | null;
  /** Scheduler (load, breakers, engine metrics) and admission. */
  scheduling: SchedulingAdapter;
  /** Metrics registry, recent requests, tracing. */
  observability: Observability;
  /** The KV block index and its subscribers (null when no instance sets `kvEvents`). */
  kvEvents: KvEventsHub | null;
  close(): Promise<void>;
}

export interface CoordinatorOverrides {
  source?: InstanceSource;
  scheduling?: SchedulingAdapter;
}

/** Wires gateway → dispatcher → scheduler → instance source and starts listening. */
export async function startCoordinator(
  config: CoordinatorConfig,
  log: Logger,
  overrides: CoordinatorOverrides = {},
): Promise<RunningCoordinator> {
  const upstreams = new Upstreams({
    ...config.upstream,
    connectMs: config.timeouts.connectMs,
    credentials: config.engineCredentials,
  });
  const plane = overrides.source ? null : await startControlPlane(config, log, upstreams);
  const source = overrides.source ?? plane?.source ?? new StaticInstanceSource(config.instances);
  const scheduling =
    overrides.scheduling ?? new SchedulingAdapter(config.scheduling, { source, upstreams, log });
  const triggers = new TakeOnceStore<PendingTrigger>();
  let kvEvents: KvEventsHub | null = null;
  const obs = await createCoordinatorObservability(config, log, source, {
    circuitStates: () =>
      source.all().map((i) => ({ instanceId: i.id, state: scheduling.scheduler.breakers.state(i.id) })),
    queuedRequests: () => scheduling.admission.queued,
    kvEvents: () => kvEvents?.health() ?? null,
  });
  let boundUrl = '';
  const dispatcher = new Dispatcher({
    config,
    source,
    scheduling,
    upstreams,
    triggers,
    log,
    observer: obs.observability,
    publicUrl: () => (config.server.publicUrl ?? boundUrl).replace(/\/+$/, ''),
  });
  const server = createGateway({
    config,
    source,
    dispatcher,
    triggers,
    log,
    scheduling,
    extraRoutes: obs.routes,
    observer: obs.observability,
  });
  try {
    boundUrl = await listen(server, config.server.port, config.server.host);
  } catch (err) {
    await plane?.close();
    throw err;
  }
  logListening(log, { url: boundUrl }); // first: spawnMotor takes the first `listening` URL
  scheduling.start();
  kvEvents = await startKvEvents(config, log, obs.observability);
  let management;
  try {
    management = await plane?.startManagement({
      load: (id) => scheduling.scheduler.loadTracker.get(id),
      circuit: (id) => scheduling.scheduler.breakers.state(id),
    });
  } catch (err) {
    await kvEvents?.close();
    await closeServer(server);
    await plane?.close();
    throw err;
  }
  return {
    url: boundUrl,
    managementUrl: management?.url ?? null,
    server,
    controlPlane: plane,
    scheduling,
    observability: obs.observability,
    kvEvents,
    async close() {
      scheduling.close();
      await kvEvents?.close();
      await closeServer(server);
      await plane?.close();
      await upstreams.close();
      await obs.close();
    },
  };
}
