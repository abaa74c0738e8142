import type { Logger } from '../common/logger.js';
import { engineAdapterFor, type BootstrapAddress, type EngineAdapter } from '../engine-adapters/index.js';
import type { MotorDispatch } from '../protocol/index.js';
import { AttemptTracker, type AttemptHandle } from './attempt-tracker.js';
import { EngineClient, PeerClient, type EngineTransport, type PeerTransport } from './http-clients.js';
import { ProxyMetrics } from './metrics.js';
import type { EngineProxyOptions } from './options.js';
import { PeerAllowList } from './peer-allow-list.js';
import { PeerBootstrapDiscovery } from './peer-bootstrap.js';
import { PeerStopper } from './peer-stopper.js';
import { PreparedStore } from './prepared-store.js';

/** A trigger prefill prepared by its envelope and waiting for the decode engine's metaserver call. */
export interface PreparedPrefill {
  dispatch: MotorDispatch;
  body: Record<string, unknown>;
  path: string;
  handle: AttemptHandle;
}

/** What a test may swap: the engine and peer clients, and the clock of the peer calls (cache, sent_at_ms). */
export interface ProxyDeps {
  engine?: EngineTransport;
  peers?: PeerTransport;
  now?: () => number;
}

/** Everything the routes and legs share; built once per proxy. */
export interface ProxyContext {
  readonly opts: EngineProxyOptions;
  readonly log: Logger;
  readonly adapter: EngineAdapter;
  readonly allow: PeerAllowList;
  readonly tracker: AttemptTracker;
  readonly prepared: PreparedStore<PreparedPrefill>;
  readonly metrics: ProxyMetrics;
  readonly engine: EngineTransport;
  readonly peers: PeerTransport;
  /** Where this engine listens for bootstrap connections (an SGLang prefill hands it to both legs). */
  readonly selfBootstrap: BootstrapAddress;
  readonly bootstrapDiscovery: PeerBootstrapDiscovery;
  readonly peerStopper: PeerStopper;
}

export function createProxyContext(
  opts: EngineProxyOptions,
  log: Logger,
  deps: ProxyDeps = {},
): ProxyContext {
  const allow = new PeerAllowList(opts.peerAllow);
  const tracker = new AttemptTracker({
    ttlMs: opts.stopTtlMs,
    maxFinished: opts.maxTrackedAttempts,
    maxActive: opts.maxActiveAttempts,
  });
  const prepared = new PreparedStore<PreparedPrefill>(
    { ttlMs: opts.preparedTtlMs, max: opts.maxPrepared, maxWaiters: opts.maxPrepared },
    (id, entry) => {
      entry.handle.finish('stopped', 'expired');
      metrics.dispatches.inc({ role: 'prefill', leg: 'trigger_prefill', outcome: 'expired' });
      log.info({ request_id: id }, 'prepared prefill expired unconsumed');
    },
  );
  const metrics = new ProxyMetrics({
    active: () => tracker.activeCount,
    tracked: () => tracker.finishedCount,
    prepared: () => prepared.size,
    waiting: () => prepared.waiting,
  });
  const peers = deps.peers ?? new PeerClient(opts.peerTimeoutMs);
  return {
    opts,
    log,
    adapter: engineAdapterFor(opts.engine),
    allow,
    tracker,
    prepared,
    metrics,
    engine: deps.engine ?? new EngineClient(opts.engineUrl, opts.engineConnections, opts.engineTimeoutMs),
    peers,
    selfBootstrap: selfBootstrapAddress(opts),
    bootstrapDiscovery: new PeerBootstrapDiscovery({ allow, metrics, peers, now: deps.now }),
    peerStopper: new PeerStopper({ allow, metrics, peers, log, now: deps.now }),
  };
}

/** `--bootstrap-host/--bootstrap-port`, defaulting to the engine URL's host and port. */
function selfBootstrapAddress(opts: EngineProxyOptions): BootstrapAddress {
  const engineUrl = new URL(opts.engineUrl);
  return {
    host: opts.bootstrapHost ?? engineUrl.hostname.replace(/^\[|\]$/g, ''),
    port: opts.bootstrapPort ?? Number(engineUrl.port || (engineUrl.protocol === 'https:' ? 443 : 80)),
  };
}
