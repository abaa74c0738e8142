import type { KvEventsHealth } from '../kv-events/kv-events-hub.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bearerToken } from '../common/http.js';
import { renderError, type RenderableError } from '../common/http-error.js';
import type { CircuitStateProvider, InstanceView } from './coordinator-metrics.js';
import { DASHBOARD_HTML } from './dashboard-page.js';
import type { Observability } from './observability.js';

export interface DashboardSources {
  instances: () => Iterable<InstanceView>;
  circuitStates?: CircuitStateProvider;
  /** KV block index health (null or absent: no instance publishes KV events). */
  kvEvents?: () => KvEventsHealth | null;
}

/** The index health as the dashboard shows it (JSON: no bigints). */
function kvEventsView(h: KvEventsHealth | null | undefined, now: number): unknown {
  if (!h) return null;
  return {
    indexedBlocks: h.indexedBlocks,
    forgottenBlocks: h.forgottenBlocks,
    instances: h.instances.map((i) => ({
      instance: i.instance,
      blocks: i.blocks,
      lastSeq: i.lastSeq === null ? null : String(i.lastSeq),
      lastBatchAgeMs: i.lastBatchAtMs === null ? null : now - i.lastBatchAtMs,
      lagMs: i.lagMs,
      gaps: i.gaps,
      resyncs: i.resyncs,
      error: i.error,
    })),
  };
}

const UNAUTHORIZED: RenderableError = Object.freeze({
  status: 401,
  message: 'missing or invalid API key (Authorization: Bearer <key>)',
  code: 'unauthorized',
});
/** Ahead of `content-type` in the 401, as the gateway's own challenge. */
const BEARER_CHALLENGE = Object.freeze({ 'www-authenticate': 'Bearer' });

const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'content-security-policy':
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
  'x-content-type-options': 'nosniff',
};

/**
 * `GET /metrics` (Prometheus text), `GET /dashboard` (the page) and `GET /dashboard/api/state` (its
 * JSON). Returns false for any other route so the gateway goes on with its own table.
 */
export function createObservabilityRoutes(
  obs: Observability,
  sources: DashboardSources,
  opts: {
    metrics: boolean;
    dashboard: boolean;
    startedAt?: number;
    /** When set, `/metrics` and the dashboard's state need `Authorization: Bearer <one of these>`. */
    apiKeys?: readonly string[];
  },
): (req: IncomingMessage, res: ServerResponse, method: string, path: string) => boolean {
  const startedAt = opts.startedAt ?? Date.now();
  const page = Buffer.from(DASHBOARD_HTML);
  const keys = opts.apiKeys ? new Set(opts.apiKeys) : null;

  /** False (after answering 401) when keys are required and the request has none of them. */
  function authorized(req: IncomingMessage, res: ServerResponse): boolean {
    if (keys === null) return true;
    if (keys.has(bearerToken(req))) return true;
    renderError(res, UNAUTHORIZED, BEARER_CHALLENGE);
    return false;
  }

  function state(): unknown {
    const now = Date.now();
    const circuits = new Map<string, string>();
    if (sources.circuitStates) for (const c of sources.circuitStates()) circuits.set(c.instanceId, c.state);
    const instances = [...sources.instances()].map((i) => ({
      id: i.id,
      role: i.role,
      url: i.url,
      inFlight: i.inFlight,
      routable: i.routable,
      health: i.routable ? 'routable' : 'unroutable',
      circuit: circuits.get(i.id) ?? null,
    }));
    return {
      now,
      uptimeSeconds: Math.round((now - startedAt) / 1000),
      inFlight: obs.inFlightRequests(),
      totals: {
        requests: obs.recent.total,
        errors: obs.recent.errorsTotal,
        client_disconnected: obs.recent.clientDisconnectedTotal,
      },
      window: obs.recent.window(now, 60),
      instances,
      recent: obs.recent.list(50),
      tracing: obs.tracing !== null,
      kvEvents: kvEventsView(sources.kvEvents?.(), now),
    };
  }

  return (req, res, method, path) => {
    if (method !== 'GET' && method !== 'HEAD') return false;
    if (opts.metrics && path === '/metrics') {
      if (!authorized(req, res)) return true;
      obs.metrics.render().then(
        ({ contentType, body }) => {
          res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
          res.end(method === 'HEAD' ? undefined : body);
        },
        (err: unknown) => {
          res.writeHead(500, { 'content-type': 'text/plain' });
          res.end(`metrics collection failed: ${(err as Error).message}`);
        },
      );
      return true;
    }
    if (!opts.dashboard) return false;
    if (path === '/dashboard' || path === '/dashboard/') {
      res.writeHead(200, { ...PAGE_HEADERS, 'content-length': page.length });
      res.end(method === 'HEAD' ? undefined : page);
      return true;
    }
    if (path === '/dashboard/api/state') {
      if (!authorized(req, res)) return true;
      const body = JSON.stringify(state());
      res.writeHead(200, {
        'content-type': 'application/json',
        'cache-control': 'no-store',
        'content-length': Buffer.byteLength(body),
      });
      res.end(method === 'HEAD' ? undefined : body);
      return true;
    }
    return false;
  };
}
