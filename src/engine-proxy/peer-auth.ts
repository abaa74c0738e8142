import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RouteHandler } from '../common/http-frame.js';
import { renderError } from '../common/http-error.js';
import { PEER_SECRET_HEADER } from '../common/peer-secrets.js';
import type { ProxyContext } from './proxy-context.js';
import { ProxyError } from './proxy-error.js';

/** One line, no ids: says which header, never what was presented. */
const UNAUTHENTICATED = new ProxyError('unauthenticated', `missing or wrong ${PEER_SECRET_HEADER}`);
const CLOSE = Object.freeze({ connection: 'close' });

/**
 * `handler` behind the peer secret: with one configured, a call without the right
 * `x-motor-peer-secret` is refused 401 before its body is read (the connection is closed). Without
 * one, everything passes, as before (the start-up warning says so). `route` labels the metric.
 */
export function peerOnly(ctx: ProxyContext, route: string, handler: RouteHandler): RouteHandler {
  return (req, res, params) => (peerAdmitted(ctx, req, res, route) ? handler(req, res, params) : undefined);
}

/** True when the call may go on; else it was refused (401) and counted. */
export function peerAdmitted(
  ctx: ProxyContext,
  req: IncomingMessage,
  res: ServerResponse,
  route: string,
): boolean {
  if (ctx.peerSecrets === null || ctx.peerSecrets.accepts(req.headers[PEER_SECRET_HEADER])) return true;
  ctx.metrics.unauthenticated.inc({ route });
  refuse(res, UNAUTHENTICATED);
  return false;
}

/** Answers a refusal without reading the body, so the connection cannot carry another request. */
export function refuse(res: ServerResponse, err: ProxyError): void {
  renderError(res, err.rendered, CLOSE);
}
