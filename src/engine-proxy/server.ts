import type { Server } from 'node:http';
import { closeServer, listen } from '../common/http.js';
import { httpFrame } from '../common/http-frame.js';
import { logListening, type Logger } from '../common/logger.js';
import { loadPeerSecrets } from '../common/peer-secrets.js';
import { createLimitedServer } from '../common/server-limits.js';
import { urlPort, type BootstrapAddress } from '../engine-adapters/index.js';
import { isSglangPrefill, type EngineProxyOptions } from './options.js';
import {
  createEngineTransport,
  createProxyContext,
  type ProxyContext,
  type ProxyDeps,
} from './proxy-context.js';
import { PROXY_FRAME_ERRORS } from './proxy-error.js';
import { proxyNoRoute, proxyRoutes } from './routes.js';
import { learnSglangBootstrapPort } from './sglang-bootstrap-port.js';

export interface EngineProxyServer {
  url: string;
  /** SGLang prefill: the bootstrap address handed to both legs (else null). */
  bootstrap: BootstrapAddress | null;
  close(): Promise<void>;
}

/**
 * Starts the engine proxy and logs one `listening` line once bound. `deps` swaps clients in tests.
 * Beside an SGLang prefill it first learns the engine's bootstrap port, waiting for the engine
 * (sglang-bootstrap-port.ts): nothing is served with a guessed port.
 */
export async function startEngineProxy(
  opts: EngineProxyOptions,
  logger: Logger,
  deps: ProxyDeps = {},
): Promise<EngineProxyServer> {
  const peerSecrets = deps.peerSecrets ?? (await loadPeerSecrets(opts.peerSecret, logger, NO_PEER_SECRET));
  const engine = createEngineTransport(opts, deps.engine);
  const sglangPrefill = isSglangPrefill(opts);
  let bootstrapPort: number | null = null;
  if (sglangPrefill) {
    try {
      bootstrapPort = await learnSglangBootstrapPort(engine, logger, {
        configured: opts.bootstrapPort,
        httpPort: urlPort(opts.engineUrl),
        onHttpPort: opts.bootstrapOnHttpPort === true,
        timeoutMs: opts.peerTimeoutMs,
        ...(deps.signal ? { signal: deps.signal } : {}),
      });
    } catch (err) {
      await engine.close();
      peerSecrets?.close();
      throw err;
    }
  }
  const ctx = createProxyContext(opts, logger, { ...deps, engine, peerSecrets }, bootstrapPort);
  const server = proxyServer(ctx);
  const stopSweeping = sweepEvery(ctx);
  const url = await listen(server, opts.port, opts.host);
  logListening(logger, {
    url,
    role: opts.role,
    engine: opts.engine,
    engine_url: opts.engineUrl,
    dispatch_capabilities: opts.dispatchCapabilities,
    ...(sglangPrefill ? { bootstrap: ctx.selfBootstrap } : {}),
  });
  return {
    url,
    bootstrap: sglangPrefill ? ctx.selfBootstrap : null,
    close: async () => {
      stopSweeping();
      await ctx.tracker.abortAll('shutdown');
      await closeServer(server);
      await Promise.allSettled([ctx.engine.close(), ctx.peers.close()]);
      peerSecrets?.close();
    },
  };
}

/** Without a peer secret, anyone who reaches the proxy may call it: said once at start. */
const NO_PEER_SECRET =
  'no peer secret (--peer-secret-file, MOTOR_PEER_SECRET): anyone who reaches this proxy can dispatch ' +
  'to its engine, stop its attempts and call its metaserver (docs/protocol.md "Peer authentication")';

function proxyServer(ctx: ProxyContext): Server {
  const listener = httpFrame({
    routes: proxyRoutes(ctx),
    noRoute: proxyNoRoute(ctx),
    errors: PROXY_FRAME_ERRORS,
    logger: ctx.log,
    failureLog: 'engine proxy route failed',
  });
  return createLimitedServer(ctx.opts, listener, ctx.log);
}

/** Expires prepared prefills and finished attempts at half the shorter TTL (10 ms – 1 s). */
function sweepEvery(ctx: ProxyContext): () => void {
  const { preparedTtlMs, stopTtlMs } = ctx.opts;
  const everyMs = Math.max(10, Math.min(1_000, Math.floor(Math.min(preparedTtlMs, stopTtlMs) / 2)));
  const timer = setInterval(() => {
    ctx.prepared.sweep();
    ctx.tracker.sweep();
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
