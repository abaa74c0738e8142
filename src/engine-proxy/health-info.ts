import type { ServerResponse } from 'node:http';
import { sendJson } from '../common/http.js';
import { MOTOR_DISPATCH_SCHEMA_VERSION } from '../protocol/index.js';
import { rolesAccepted } from './envelope.js';
import { isSglangPrefill } from './options.js';
import type { ProxyContext } from './proxy-context.js';

const HEALTH_TIMEOUT_MS = 2_000;

/** `GET /v1/motor/info`: what this proxy serves; a bootstrap decode's proxy reads `bootstrap` here. */
export function proxyInfo(ctx: ProxyContext): Record<string, unknown> {
  const { opts } = ctx;
  return {
    object: 'motor.engine_proxy_info',
    schema_version: MOTOR_DISPATCH_SCHEMA_VERSION,
    engine: opts.engine,
    role: opts.role,
    dispatch_profile: opts.dispatchProfile,
    dispatch_capabilities: opts.dispatchCapabilities,
    // the coordinator pairs only within one connector; null for SGLang or a config that names none
    kv_connector: opts.kvConnector ?? null,
    accepts_roles: rolesAccepted(opts.role, opts.engine),
    bootstrap: isSglangPrefill(opts) ? ctx.selfBootstrap : null,
  };
}

/** `GET /health`: 200 when the engine's own `/health` answers 2xx, else 503 with what it said. */
export async function healthRoute(ctx: ProxyContext, res: ServerResponse): Promise<void> {
  try {
    const up = await ctx.engine.request({
      method: 'GET',
      path: '/health',
      headers: {},
      timeoutMs: HEALTH_TIMEOUT_MS,
      signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS),
    });
    const text = await up.body.text();
    if (up.statusCode >= 200 && up.statusCode < 300) {
      return sendJson(res, 200, { status: 'ok', engine: { status: up.statusCode } });
    }
    return sendJson(res, 503, {
      status: 'unhealthy',
      engine: { status: up.statusCode, body: text.slice(0, 500) },
    });
  } catch (err) {
    return sendJson(res, 503, { status: 'unhealthy', engine: { error: (err as Error).message } });
  }
}

/** `GET /metrics`: the proxy's own metrics (the engine's are at `/v1/motor/engine-metrics`). */
export async function metricsRoute(ctx: ProxyContext, res: ServerResponse): Promise<void> {
  const text = await ctx.metrics.registry.metrics();
  res.writeHead(200, { 'content-type': ctx.metrics.registry.contentType });
  res.end(text);
}

/** `GET /debug/state`: the sizes of the attempt tracker and the prepared store. */
export function debugState(ctx: ProxyContext): Record<string, number> {
  return {
    attempts_active: ctx.tracker.activeCount,
    attempts_tracked: ctx.tracker.finishedCount,
    prepared_prefills: ctx.prepared.size,
    metaserver_waiting: ctx.prepared.waiting,
  };
}
