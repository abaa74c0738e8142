import { sendJson } from '../common/http.js';
import type { NoRouteHandler, RouteHandler } from '../common/http-frame.js';
import { RouteTable } from '../common/route-table.js';
import { completionsRoute } from './completions-route.js';
import { dispatchStopRoute } from './dispatch-stop-route.js';
import { debugState, healthRoute, metricsRoute, proxyInfo } from './health-info.js';
import { plainMetaserverRoute, tokenMetaserverRoute } from './metaserver-url.js';
import { passThrough, passThroughRoute } from './pass-through.js';
import { peerAdmitted, peerOnly } from './peer-auth.js';
import type { ProxyContext } from './proxy-context.js';

/**
 * `METHOD /path` → handler; anything else passes through to the engine (`proxyNoRoute`). With a peer
 * secret, dispatch, stop and pass-through need it (`peerOnly`); the metaserver takes a per-attempt
 * URL instead (metaserver-url.ts). Open: health, metrics and info, which are read-only, carry no
 * request ids, and are what health probes, Prometheus and discovery call without a secret.
 */
export function proxyRoutes(ctx: ProxyContext): RouteTable<RouteHandler> {
  return (
    new RouteTable<RouteHandler>()
      .add(
        'POST',
        '/v1/chat/completions',
        peerOnly(ctx, 'dispatch', (req, res) => completionsRoute(ctx, req, res, 'chat')),
      )
      .add(
        'POST',
        '/v1/completions',
        peerOnly(ctx, 'dispatch', (req, res) => completionsRoute(ctx, req, res, 'completion')),
      )
      .add(
        'POST',
        '/v1/dispatch/stop',
        peerOnly(ctx, 'stop', (req, res) => dispatchStopRoute(ctx, req, res)),
      )
      .add('POST', '/v1/metaserver', (req, res) => plainMetaserverRoute(ctx, req, res))
      .add('POST', '/v1/metaserver/:id/:token', (req, res, params) =>
        tokenMetaserverRoute(ctx, req, res, params),
      )
      .add('GET', '/v1/motor/info', (_req, res) => sendJson(res, 200, proxyInfo(ctx)))
      .add('GET', '/health', (_req, res) => healthRoute(ctx, res))
      .add('GET', '/metrics', (_req, res) => metricsRoute(ctx, res))
      // The engine's own Prometheus metrics (vllm:*), for the coordinator's load-aware scheduling.
      .add('GET', '/v1/motor/engine-metrics', (req, res) =>
        passThrough(ctx, req, res, undefined, '/v1/motor/engine-metrics', '/metrics'),
      )
      // Discovery reads the served models here (the coordinator's own /v1/models shows them anyway).
      .add('GET', '/v1/models', (req, res) => passThrough(ctx, req, res, undefined, '/v1/models'))
      .add('GET', '/debug/state', (_req, res) => sendJson(res, 200, debugState(ctx)))
  );
}

/** The frame's `noRoute`: any other request passes through to the engine, behind the peer secret. */
export function proxyNoRoute(ctx: ProxyContext): NoRouteHandler {
  return (req, res, method, path) =>
    peerAdmitted(ctx, req, res, 'pass_through') ? passThroughRoute(ctx, req, res, method, path) : undefined;
}
