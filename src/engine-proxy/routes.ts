import { sendJson } from '../common/http.js';
import type { RouteHandler } from '../common/http-frame.js';
import { RouteTable } from '../common/route-table.js';
import { completionsRoute } from './completions-route.js';
import { dispatchStopRoute } from './dispatch-stop-route.js';
import { debugState, healthRoute, metricsRoute, proxyInfo } from './health-info.js';
import { passThrough } from './pass-through.js';
import type { ProxyContext } from './proxy-context.js';
import { metaserverRoute } from './trigger-leg.js';

/** `METHOD /path` → handler; anything else passes through to the engine (the frame's `noRoute`). */
export function proxyRoutes(ctx: ProxyContext): RouteTable<RouteHandler> {
  return (
    new RouteTable<RouteHandler>()
      .add('POST', '/v1/chat/completions', (req, res) => completionsRoute(ctx, req, res, 'chat'))
      .add('POST', '/v1/completions', (req, res) => completionsRoute(ctx, req, res, 'completion'))
      .add('POST', '/v1/dispatch/stop', (req, res) => dispatchStopRoute(ctx, req, res))
      .add('POST', '/v1/metaserver', (req, res) => metaserverRoute(ctx, req, res))
      .add('GET', '/v1/motor/info', (_req, res) => sendJson(res, 200, proxyInfo(ctx)))
      .add('GET', '/health', (_req, res) => healthRoute(ctx, res))
      .add('GET', '/metrics', (_req, res) => metricsRoute(ctx, res))
      // The engine's own Prometheus metrics (vllm:*), for the coordinator's load-aware scheduling.
      .add('GET', '/v1/motor/engine-metrics', (req, res) =>
        passThrough(ctx, req, res, undefined, '/v1/motor/engine-metrics', '/metrics'),
      )
      .add('GET', '/debug/state', (_req, res) => sendJson(res, 200, debugState(ctx)))
  );
}
