import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RouteParams } from '../common/route-table.js';
import { metaserverUrlFor } from '../engine-adapters/index.js';
import { refuse } from './peer-auth.js';
import type { ProxyContext } from './proxy-context.js';
import { ProxyError } from './proxy-error.js';
import { metaserverRoute } from './trigger-leg.js';

/**
 * Per-attempt metaserver URLs between engine proxies (trigger flow). The decode engine's connector
 * posts to the URL its leg names and cannot add a header (vllm-ascend `_access_metaserver`), so with
 * a peer secret the URL itself is the credential, as the coordinator's direct-trigger
 * `/v1/metaserver/<token>` is: `<prefill proxy>/v1/metaserver/<engine request id>/<token>`, the token
 * an HMAC of the id under the shared secret (`PeerSecrets.tokenFor`). Both proxies derive it on their
 * own, so nothing new travels in the envelope; only a holder of the secret can make one, and it
 * opens one attempt's prefill once (the prepared store is take-once).
 */
export function attemptMetaserverUrl(ctx: ProxyContext, prefillUrl: string, id: string): string | null {
  const secrets = ctx.peerSecrets;
  if (secrets === null) return null; // the adapter's `<prefill url>/v1/metaserver`
  return `${metaserverUrlFor(prefillUrl)}/${encodeURIComponent(id)}/${secrets.tokenFor(id)}`;
}

const NO_SUCH_PREFILL = new ProxyError('not_found', 'no prepared prefill for this metaserver URL');

/**
 * `POST /v1/metaserver/:id/:token`: checked before the body is read, and a wrong token touches no
 * state (404, connection closed); then the prefill of that attempt only (`metaserverRoute`).
 */
export function tokenMetaserverRoute(
  ctx: ProxyContext,
  req: IncomingMessage,
  res: ServerResponse,
  params: RouteParams,
): Promise<void> | void {
  const id = params.id;
  const token = params.token;
  if (ctx.peerSecrets === null || !id || !token || !ctx.peerSecrets.acceptsToken(id, token)) {
    ctx.metrics.metaserverCalls.inc({ outcome: 'refused' });
    return refuse(res, NO_SUCH_PREFILL);
  }
  return metaserverRoute(ctx, req, res, id);
}

/** `POST /v1/metaserver`: the untokened route, served only while no peer secret is configured. */
export function plainMetaserverRoute(
  ctx: ProxyContext,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> | void {
  if (ctx.peerSecrets !== null) {
    ctx.metrics.metaserverCalls.inc({ outcome: 'refused' });
    return refuse(res, NO_SUCH_PREFILL);
  }
  return metaserverRoute(ctx, req, res, null);
}
