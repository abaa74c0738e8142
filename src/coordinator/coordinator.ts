import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { closeServer, listen } from '../common/http.js';
import { renderError } from '../common/http-error.js';
import { logListening, type Logger } from '../common/logger.js';
import { MotorError } from '../common/motor-error.js';
import { RequestDrain, type RequestListener } from '../common/request-drain.js';
import { createLimitedServer } from '../common/server-limits.js';
import { TakeOnceStore } from '../common/take-once-store.js';
import type { CoordinatorConfig } from '../config/coordinator-config.js';
import { bodyBudget } from '../config/server-section.js';
import {
  createCoordinatorObservability,
  type InjectedObservability,
} from '../observability/coordinator-observability.js';
import type { Observability } from '../observability/observability.js';
import { startControlPlane, type ControlPlane, type ManagementProviders } from './control-plane.js';
import { Dispatcher, triggerKey, type PendingTrigger } from './dispatch/pipeline.js';
import { decodeFirstCounter } from './scheduling-bridge/decode-first-metrics.js';
import { Upstreams } from './fleet/upstream.js';
import { createGatewayListener, METASERVER_ROUTE_PREFIX } from './gateway/gateway.js';
import { StaticInstanceSource, type InstanceSource } from './fleet/instance-source.js';
import { SchedulingAdapter } from './scheduling-bridge/scheduling-adapter.js';
import { coordinatorPeerSecrets } from './fleet/peer-secret-setup.js';
import { startKvEvents, startKvPredictor } from './kv-routing/kv-events.js';
import type { KvEventsHub } from '../kv-events/kv-events-hub.js';
import type { KvPredictor } from './kv-routing/kv-prediction.js';
import { promptTokenCounter } from './apis/prompt-token-count.js';
import { createResponseStore } from '../state/response-store/index.js';
import { ResponseStoreMetrics } from '../observability/response-store-metrics.js';
import { registerRoutingSyncMetrics } from '../observability/routing-sync-metrics.js';
import type { RoutingSync } from '../state/routing-sync/index.js';
import { CachedTokensSamples } from './doctor/cached-tokens-samples.js';
import { Doctor } from './doctor/doctor.js';
import { DOCTOR_PATH, doctorRoute } from './doctor/doctor-route.js';

export interface CoordinatorOverrides {
  source?: InstanceSource;
  scheduling?: SchedulingAdapter;
  /** An embedding application's prom-client Registry and OTel tracer (docs/library.md). */
  observability?: InjectedObservability;
  /**
   * `motor coordinator --workers`: wraps the gateway listener `startCoordinator` serves on its port;
   * `ownsTrigger` tells whether a metaserver token names one of this process's pending attempts.
   */
  frontGateway?: (gateway: RequestListener, ownsTrigger: (token: string) => boolean) => RequestListener;
}

/**
 * One coordinator without a listening socket: the gateway, management API and metrics as request
 * listeners, and everything behind them running. `motor coordinator` serves it on its own ports
 * (`startCoordinator`); an application mounts the listeners in its own server (`createCoordinator`).
 */
export interface CoordinatorApp {
  /** The OpenAI-compatible gateway (`/v1/*`, `/health`, `/ready`, and `/metrics`, `/dashboard` when on). */
  handler: RequestListener;
  /** The management API (docs/control-plane.md); null with a `source` override. */
  managementHandler: RequestListener | null;
  /** Prometheus text of the coordinator's metrics, whatever the path (for `GET /metrics` where you want it). */
  metricsHandler: RequestListener;
  /** Registry, health and management (absent with a `source` override). */
  controlPlane: ControlPlane | null;
  /** Scheduler (load, breakers, engine metrics) and admission. */
  scheduling: SchedulingAdapter;
  /** Metrics registry, recent requests, tracing. */
  observability: Observability;
  /** The KV block index fed by the instances' KV events (null: none configured). */
  kvEvents: KvEventsHub | null;
  /** What management's `load` and `circuit` fields show (the scheduler's view). */
  managementProviders: ManagementProviders;
  /** Requests being answered by the three listeners now. */
  inFlight(): number;
  /** Whether a metaserver URL's token names an attempt of this process that waits for its call. */
  ownsTrigger(token: string): boolean;
  /**
   * The base URL engines are told to call back (`<url>/v1/metaserver/<token>`) when `server.publicUrl`
   * is unset. Without it the first request's local socket address is taken.
   */
  setUrl(url: string): void;
  /**
   * Refuses new requests (503 `overloaded`, `connection: close`), waits up to `graceMs` for those in
   * flight, cuts the rest, then stops scheduling, the registry, engine connections and tracing.
   * Resolves with the number of requests cut (0: all finished).
   */
  close(graceMs: number): Promise<number>;
}

/** Wires gateway → dispatcher → scheduler → instance source; starts everything but a listener. */
export async function createCoordinatorApp(
  config: CoordinatorConfig,
  log: Logger,
  overrides: CoordinatorOverrides = {},
): Promise<CoordinatorApp> {
  for (const warning of config.warnings ?? []) log.warn(`config: ${warning}`);
  const upstreams = new Upstreams({
    ...config.upstream,
    connectMs: config.timeouts.connectMs,
    credentials: config.engineCredentials,
  });
  const peerSecrets = await coordinatorPeerSecrets(config, log);
  const plane = overrides.source ? null : await startControlPlane(config, log, upstreams);
  const source = overrides.source ?? plane?.source ?? new StaticInstanceSource(config.instances);
  // an injected scheduler keeps its own state: there is nothing to share it through
  const routingSync =
    config.routingSync && !overrides.scheduling ? await createRoutingSync(config, log) : null;
  const scheduling =
    overrides.scheduling ??
    new SchedulingAdapter(config.scheduling, {
      source,
      upstreams,
      log,
      bodyBudget: bodyBudget(config.server),
      ...(routingSync && {
        sharedState: { loadTracker: routingSync.loads, newPrefixIndex: routingSync.newPrefixIndex },
      }),
    });
  const triggers = new TakeOnceStore<PendingTrigger>();
  let kvEvents: KvEventsHub | null = null;
  let kvPredictor: KvPredictor | null = null;
  let obs;
  try {
    obs = await createCoordinatorObservability(
      config,
      log,
      source,
      {
        circuitStates: () =>
          source.all().map((i) => ({ instanceId: i.id, state: scheduling.scheduler.breakers.state(i.id) })),
        queuedRequests: () => scheduling.admission.queued,
        inflightBodyBytes: () => scheduling.admission.inflightBodyBytes,
        kvEvents: () => kvEvents?.health() ?? null,
      },
      overrides.observability,
    );
  } catch (err) {
    await plane?.close();
    await upstreams.close();
    peerSecrets?.close();
    throw err;
  }
  const cachedTokens = new CachedTokensSamples();
  const responseStore = await createResponseStore(
    config.responses,
    new ResponseStoreMetrics(obs.observability.metrics.registry),
    (err) => log.warn({ err: err.message }, 'response store (Redis) connection failed; retrying'),
  );
  let url = config.server.publicUrl?.replace(/\/+$/, '') ?? '';
  let boundPort: number | null = null; // instance URLs naming it are refused (control-plane.ts)
  const dispatcher = new Dispatcher({
    config,
    source,
    scheduling,
    upstreams,
    triggers,
    log,
    observer: obs.observability,
    publicUrl: () => url,
    peerSecrets,
    kvPrediction: async (client) => kvPredictor?.predict(client),
    decodeFirstCount: config.decodeFirst?.enabled
      ? decodeFirstCounter(obs.observability.metrics.registry)
      : undefined,
    cachedTokensReported: (id, predicted, reported) => cachedTokens.record(id, predicted, reported),
  });
  const doctor = new Doctor({
    groups: config.kvHash.groups,
    source,
    upstreams,
    hub: () => kvEvents,
    keys: () => kvPredictor?.keys ?? null,
    samples: cachedTokens,
  });
  const gateway = createGatewayListener({
    config,
    source,
    dispatcher,
    triggers,
    log,
    scheduling,
    extraRoutes: obs.routes,
    observer: obs.observability,
    countTokens: promptTokenCounter({
      source,
      upstreams,
      keys: () => kvPredictor?.keys ?? null,
      timeoutMs: config.timeouts.firstTokenMs,
    }),
    responses: { store: responseStore, maxChainDepth: config.responses.maxChainDepth },
    kvLoadDegraded: () => obs.observability.kvLoadWatch.degraded(),
  });
  const managementProviders: ManagementProviders = {
    load: (id) => scheduling.scheduler.loadTracker.get(id),
    circuit: (id) => scheduling.scheduler.breakers.state(id),
    gatewayPort: () => boundPort,
    extraRoutes: [{ method: 'GET', path: DOCTOR_PATH, handler: doctorRoute(doctor) }],
  };
  const metrics = obs.observability.metrics;
  const drain = new RequestDrain();
  const gatewayListener: RequestListener = (req, res) => {
    if (url === '') url = socketUrl(req);
    gateway(req, res);
  };
  const management = plane?.managementHandler(managementProviders);
  scheduling.start();
  kvEvents = await startKvEvents(config, log, obs.observability, plane?.registry ?? null);
  kvPredictor = await startKvPredictor(config, kvEvents, log);
  if (routingSync) {
    if (kvPredictor) kvPredictor.publisher = routingSync.shareExpectations(kvPredictor.inflight);
    registerRoutingSyncMetrics(metrics.registry, () => routingSync.stats);
    // the warm start: the listener opens (and /ready answers) only once the siblings' state is in
    await routingSync.start();
    log.info(
      {
        replica: routingSync.replicaId,
        warmStart: routingSync.stats.warmStart,
        peers: routingSync.stats.peers,
      },
      'routing sync: started',
    );
  }
  return {
    // While draining, a metaserver call still reaches its route: it completes a direct-trigger request
    // already in flight (an unknown token is a 404 there, as ever).
    handler: drain.track(gatewayListener, (req, res) =>
      req.url?.startsWith(METASERVER_ROUTE_PREFIX) ? gatewayListener(req, res) : refuseClosing(req, res),
    ),
    managementHandler: management ? drain.track(management, refuseClosing) : null,
    metricsHandler: drain.track((_req, res) => serveMetrics(metrics.render(), res), refuseClosing),
    controlPlane: plane,
    scheduling,
    observability: obs.observability,
    kvEvents,
    managementProviders,
    inFlight: () => drain.inFlight,
    ownsTrigger(token) {
      const key = triggerKey(token);
      return key !== null && triggers.peek(key) !== undefined;
    },
    setUrl(bound) {
      boundPort = Number(new URL(bound).port);
      if (config.server.publicUrl === undefined) url = bound.replace(/\/+$/, '');
    },
    async close(graceMs) {
      const cut = await drain.close(graceMs);
      scheduling.close();
      await routingSync?.close();
      await kvEvents?.close();
      await kvPredictor?.close();
      await responseStore?.close();
      await plane?.close();
      await upstreams.close();
      await obs.close();
      peerSecrets?.close();
      return cut;
    },
  };
}

/** The `routingSync` section's sync (loaded only when the section is set). */
async function createRoutingSync(config: CoordinatorConfig, log: Logger): Promise<RoutingSync> {
  const { createRedisRoutingSync } = await import('../state/routing-sync/index.js');
  return createRedisRoutingSync(config.routingSync!, config.responses.redis.url, log);
}

/** The base URL a request reached this process on (its socket's local address). */
function socketUrl(req: IncomingMessage): string {
  const { localAddress, localPort } = req.socket;
  const scheme = (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
  const host = localAddress?.includes(':') ? `[${localAddress}]` : (localAddress ?? '127.0.0.1');
  return `${scheme}://${host}:${localPort ?? 80}`;
}

function refuseClosing(_req: IncomingMessage, res: ServerResponse): void {
  renderError(res, new MotorError('overloaded', 'the coordinator is shutting down; retry elsewhere'), {
    connection: 'close',
  });
}

function serveMetrics(rendered: Promise<{ contentType: string; body: string }>, res: ServerResponse): void {
  rendered.then(
    ({ contentType, body }) => {
      res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
      res.end(body);
    },
    (err: unknown) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`metrics collection failed: ${(err as Error).message}`);
    },
  );
}

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
  /** Requests in flight (client, management and metrics routes). */
  inFlight(): number;
  /** Closes at once: requests in flight are cut (`drain` gives them time). */
  close(): Promise<void>;
  /**
   * Drains as `CoordinatorApp.close` does (new requests refused, those in flight get `graceMs`), then
   * closes the listeners; resolves with the number of requests cut (0: all finished).
   */
  drain(graceMs: number): Promise<number>;
}

/** `motor coordinator`: the app served on `server.port` (with the connection limits) and `management.port`. */
export async function startCoordinator(
  config: CoordinatorConfig,
  log: Logger,
  overrides: CoordinatorOverrides = {},
): Promise<RunningCoordinator> {
  const app = await createCoordinatorApp(config, log, overrides);
  let server: Server;
  let boundUrl: string;
  try {
    // Header, request, keep-alive and idle timeouts and the connection cap (`server.*`).
    const handler = overrides.frontGateway?.(app.handler, (t) => app.ownsTrigger(t)) ?? app.handler;
    server = createLimitedServer(config.server, handler, log, {
      maxPerSource: config.server.maxConnectionsPerSource,
      // probes and scrapers are still answered while the gateway sheds connections
      reservedPaths: new Set(['/health', '/ready', '/metrics']),
      onShed: (reason) => app.observability.metrics.connectionsShed.inc({ reason }),
    });
    boundUrl = await listen(server, config.server.port, config.server.host);
  } catch (err) {
    await app.close(0);
    throw err;
  }
  app.setUrl(boundUrl);
  logListening(log, { url: boundUrl }); // first: spawnMotor takes the first `listening` URL
  let management;
  try {
    management = await app.controlPlane?.startManagement(app.managementProviders);
  } catch (err) {
    await closeServer(server);
    await app.close(0);
    throw err;
  }
  const drain = async (graceMs: number): Promise<number> => {
    // the listener stays open while draining: new requests get a 503 with `connection: close`
    const cut = await app.close(graceMs);
    await closeServer(server);
    return cut;
  };
  return {
    url: boundUrl,
    managementUrl: management?.url ?? null,
    server,
    controlPlane: app.controlPlane,
    scheduling: app.scheduling,
    observability: app.observability,
    kvEvents: app.kvEvents,
    inFlight: app.inFlight,
    async close() {
      await drain(0);
    },
    drain,
  };
}
