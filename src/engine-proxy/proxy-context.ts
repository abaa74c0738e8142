import { BodyReader } from '../common/body-reader.js';
import { systemClock, type Clock } from '../common/clock.js';
import type { Logger } from '../common/logger.js';
import type { PeerSecrets } from '../common/peer-secrets.js';
import { TakeOnceStore } from '../common/take-once-store.js';
import { engineAdapterFor, type BootstrapAddress, type EngineAdapter } from '../engine-adapters/index.js';
import { bootstrapAddressFromUrl, type MotorDispatch } from '../protocol/index.js';
import { AttemptTracker, type AttemptHandle } from './attempt-tracker.js';
import { withEngineCredentials } from './engine-credentials.js';
import { EngineClient, PeerClient, type EngineTransport, type PeerTransport } from './http-clients.js';
import { ProxyMetrics } from './metrics.js';
import type { EngineProxyOptions } from './options.js';
import { PeerAllowList } from './peer-allow-list.js';
import { PeerBootstrapDiscovery } from './peer-bootstrap.js';
import { PeerStopper } from './peer-stopper.js';
import { PROXY_FRAME_ERRORS } from './proxy-error.js';

/** A trigger prefill prepared by its envelope and waiting for the decode engine's metaserver call. */
export interface PreparedPrefill {
  dispatch: MotorDispatch;
  body: Record<string, unknown>;
  path: string;
  handle: AttemptHandle;
}

/** What a test may swap: the engine and peer clients, and the clock (expiries, caches, `sent_at_ms`). */
export interface ProxyDeps {
  engine?: EngineTransport;
  peers?: PeerTransport;
  clock?: Clock;
  /** Aborts start-up while it waits for the engine (SGLang bootstrap port). */
  signal?: AbortSignal;
  /** The loaded peer secret (`startEngineProxy` loads `opts.peerSecret`); absent = none. */
  peerSecrets?: PeerSecrets | null;
}

/** Everything the routes and legs share; built once per proxy. */
export interface ProxyContext {
  readonly opts: EngineProxyOptions;
  readonly log: Logger;
  readonly clock: Clock;
  /** Request bodies: `--max-body-bytes`, no nesting limit (bodies are relayed, not re-checked). */
  readonly bodies: BodyReader;
  readonly adapter: EngineAdapter;
  readonly allow: PeerAllowList;
  readonly tracker: AttemptTracker;
  readonly prepared: TakeOnceStore<PreparedPrefill>;
  /** Ids of metaserver calls answered without a prefill (unknown, invalid): a late prepare is refused. */
  readonly unservedMetaserver: TakeOnceStore<true>;
  readonly metrics: ProxyMetrics;
  readonly engine: EngineTransport;
  readonly peers: PeerTransport;
  /**
   * Where this engine listens for bootstrap connections (an SGLang prefill hands it to both legs):
   * `--bootstrap-host` or the engine URL's host, and the port learned at start-up.
   */
  readonly selfBootstrap: BootstrapAddress;
  readonly bootstrapDiscovery: PeerBootstrapDiscovery;
  readonly peerStopper: PeerStopper;
  /** The shared secret peers present and this proxy sends (`--peer-secret-file`, `MOTOR_PEER_SECRET`); null = none. */
  readonly peerSecrets: PeerSecrets | null;
}

/**
 * The proxy's way to its engine: the test's fake or a pool, always behind the engine credentials
 * (so fakes see the same `Authorization` a real engine would).
 */
export function createEngineTransport(opts: EngineProxyOptions, engine?: EngineTransport): EngineTransport {
  return withEngineCredentials(
    engine ?? new EngineClient(opts.engineUrl, opts.engineConnections, opts.engineTimeoutMs),
    { apiKey: opts.engineApiKey ?? null, adminApiKey: opts.engineAdminApiKey ?? null },
  );
}

/**
 * `deps.engine`, when given, is used as is (see {@link createEngineTransport}); `bootstrapPort` is the
 * SGLang prefill's learned port (else `--bootstrap-port`, else the engine URL's port: unused then).
 */
export function createProxyContext(
  opts: EngineProxyOptions,
  log: Logger,
  deps: ProxyDeps = {},
  bootstrapPort: number | null = null,
): ProxyContext {
  const clock = deps.clock ?? systemClock;
  const allow = new PeerAllowList(opts.peerAllow);
  const tracker = new AttemptTracker({
    ttlMs: opts.stopTtlMs,
    maxFinished: opts.maxTrackedAttempts,
    maxActive: opts.maxActiveAttempts,
    clock,
  });
  const prepared = new TakeOnceStore<PreparedPrefill>({
    ttlMs: opts.preparedTtlMs,
    maxEntries: opts.maxPrepared,
    maxWaiters: opts.maxPrepared,
    clock,
    onExpire: (id, entry) => {
      entry.handle.finish('stopped', 'expired');
      metrics.dispatches.inc({ role: 'prefill', leg: 'trigger_prefill', outcome: 'expired' });
      log.info({ request_id: id }, 'prepared prefill expired unconsumed');
    },
  });
  const metrics = new ProxyMetrics({
    active: () => tracker.activeCount,
    tracked: () => tracker.finishedCount,
    prepared: () => prepared.size,
    waiting: () => prepared.waiting,
  });
  const peers = deps.peers ?? new PeerClient(opts.peerTimeoutMs);
  const peerSecrets = deps.peerSecrets ?? null;
  return {
    opts,
    log,
    clock,
    bodies: new BodyReader({ maxBytes: opts.maxBodyBytes, maxDepth: Infinity }, PROXY_FRAME_ERRORS),
    adapter: engineAdapterFor(opts.engine),
    allow,
    tracker,
    prepared,
    unservedMetaserver: new TakeOnceStore<true>({
      ttlMs: opts.preparedTtlMs,
      maxEntries: opts.maxPrepared,
      clock,
    }),
    metrics,
    engine: deps.engine ?? createEngineTransport(opts),
    peers,
    selfBootstrap: bootstrapAddressFromUrl(opts.engineUrl, {
      host: opts.bootstrapHost,
      port: bootstrapPort ?? opts.bootstrapPort,
    }),
    bootstrapDiscovery: new PeerBootstrapDiscovery({ allow, metrics, peers, clock }),
    peerStopper: new PeerStopper({ allow, metrics, peers, log, clock, secrets: peerSecrets }),
    peerSecrets,
  };
}
