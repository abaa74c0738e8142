import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendJson } from '../common/http.js';
import { completionsRoute } from './completions-route.js';
import { dispatchStopRoute } from './dispatch-stop-route.js';
import { debugState, healthRoute, metricsRoute, proxyInfo } from './health-info.js';
import { passThrough } from './pass-through.js';
import type { ProxyContext } from './proxy-context.js';
import { readBodyOrRefuse } from './request-body.js';
import { metaserverRoute } from './trigger-leg.js';

type Handler = (req: IncomingMessage, res: ServerResponse, path: string) => Promise<void> | void;

/** `METHOD /path` → handler; anything else passes through to the engine unchanged. */
export function proxyRoutes(ctx: ProxyContext): ReadonlyMap<string, Handler> {
  return new Map<string, Handler>([
    ['POST /v1/chat/completions', (req, res) => completionsRoute(ctx, req, res, 'chat')],
    ['POST /v1/completions', (req, res) => completionsRoute(ctx, req, res, 'completion')],
    ['POST /v1/dispatch/stop', (req, res) => dispatchStopRoute(ctx, req, res)],
    ['POST /v1/metaserver', (req, res) => metaserverRoute(ctx, req, res)],
    ['GET /v1/motor/info', (_req, res) => sendJson(res, 200, proxyInfo(ctx))],
    ['GET /health', (_req, res) => healthRoute(ctx, res)],
    ['GET /metrics', (_req, res) => metricsRoute(ctx, res)],
    // The engine's own Prometheus metrics (vllm:*), for the coordinator's load-aware scheduling.
    [
      'GET /v1/motor/engine-metrics',
      (req, res, path) => passThrough(ctx, req, res, undefined, path, '/metrics'),
    ],
    ['GET /debug/state', (_req, res) => sendJson(res, 200, debugState(ctx))],
  ]);
}

/** Runs the route's handler, or passes the request through (with its body, unless GET / HEAD). */
export async function route(
  ctx: ProxyContext,
  routes: ReadonlyMap<string, Handler>,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  const method = req.method ?? 'GET';
  const handler = routes.get(`${method} ${path}`);
  if (handler) return handler(req, res, path);
  const body =
    method === 'GET' || method === 'HEAD'
      ? undefined
      : await readBodyOrRefuse(req, res, ctx.opts.maxBodyBytes);
  if (body === null) return;
  return passThrough(ctx, req, res, body, path);
}
