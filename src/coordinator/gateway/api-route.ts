import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { declaredBodyBytes, type BodyReader } from '../../common/body-reader.js';
import { RequestCancellation } from '../dispatch/pipeline.js';
import { MotorError } from '../../common/motor-error.js';
import { HOP_HEADER, hopRefusal } from '../fleet/hop-header.js';
import { BEARER_CHALLENGE, unauthorizedError, type ApiKeys } from './api-keys.js';
import type { GatewayDeps } from './gateway.js';
import { bodyRefusal, readJsonBody } from './json-body.js';
import { applyCacheSalt, type TenantSalter } from './tenant-salt.js';
import type { ClientIdentity } from './client-identity.js';
import { renderError } from '../../common/http-error.js';
import type { ApiAdapter, Translated } from '../apis/api-adapter.js';
import { storeTenant } from './store-tenant.js';

/** An API request refused before dispatch: rendered and counted (motor_requests_total, access log). */
export type Refuse = (
  res: ServerResponse,
  path: string,
  err: MotorError,
  headers?: Readonly<Record<string, string>>,
) => void;

export function refuser(
  deps: Pick<GatewayDeps, 'observer'>,
  render: (
    res: ServerResponse,
    err: MotorError,
    headers?: Readonly<Record<string, string>>,
  ) => void = renderError,
): Refuse {
  return (res, path, err, headers) => {
    deps.observer?.rejected?.(path, err.status, err.code);
    render(res, err, headers);
  };
}

/**
 * The `POST` route of one client API (its adapter): loop guard, auth, admission (a slot and the body's
 * bytes), body read, parse (bounded in bytes, keys and depth), the adapter's translation and
 * validation, then the dispatcher with the adapter's sink. Nothing is buffered or parsed for a request
 * admission refuses. The request's one cancellation is made here, before admission.
 */
export function apiRoute(
  deps: GatewayDeps,
  { apiKeys, salter, client }: { apiKeys: ApiKeys; salter: TenantSalter; client: ClientIdentity },
  bodies: BodyReader,
  adapter: ApiAdapter,
) {
  const { path } = adapter;
  const deny = refuser(deps, adapter.renderError);
  const isolation = deps.config.server.tenantIsolation;
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    // the token is also the rate limiter's key (anonymous callers share the key '')
    const apiKey = adapter.apiKey(req);
    if (!apiKeys.allows(apiKey)) return deny(res, path, unauthorizedError(), BEARER_CHALLENGE);
    // A leg of this coordinator came back: 508 at once. After the key: the answer tells a caller
    // this coordinator's place in a loop, which is no one's business without a key.
    const loop = hopRefusal(req.headers[HOP_HEADER]);
    if (loop) return deny(res, path, loop);
    const early = adapter.headerError?.(req);
    if (early) return deny(res, path, early);
    // Admission before the body is read: a bounded part of a declared length is counted against the
    // body budget, the rest as it arrives, within the client's share. 429 (rate limit, share) / 503
    // (full) with Retry-After. The request's one cancellation covers the wait in the queue too (a
    // signal is made only if it queues).
    const oversize = bodies.declaredTooLarge(req);
    if (oversize !== null) {
      const { error, headers } = bodyRefusal(oversize);
      return deny(res, path, error, headers);
    }
    const cancellation = new RequestCancellation(res);
    const admitted = deps.scheduling.admission.tryAcquire({
      apiKey,
      signal: () => cancellation.signal(),
      bodyBytes: declaredBodyBytes(req) ?? 0,
      client: client(req, apiKey),
    });
    const ticket = admitted instanceof Promise ? await admitted : admitted;
    if (!ticket.admitted) {
      if (ticket.reason === 'aborted') {
        deps.observer?.rejected?.(path, 499, 'client_disconnect');
        return void res.destroy();
      }
      // the body is left unread: the connection cannot be reused
      return deny(
        res,
        path,
        new MotorError(ticket.status === 429 ? 'rate_limited' : 'overloaded', ticket.message),
        { 'retry-after': String(ticket.retryAfterSeconds), connection: 'close' },
      );
    }
    try {
      const body = await readJsonBody(bodies, req, ticket);
      if ('error' in body) return deny(res, path, body.error, body.headers);
      const rootRequestId = `req-${randomUUID()}`;
      let translated: Translated;
      try {
        const pending = adapter.toInternal(body.value, {
          apiKey,
          rootRequestId,
          source: body.source,
          tenant: () => storeTenant(req, apiKey, isolation),
        });
        translated = pending instanceof Promise ? await pending : pending;
      } catch (err) {
        if (err instanceof MotorError) return deny(res, path, err);
        throw err;
      }
      const { request } = translated;
      applyCacheSalt(request.body, salter(req, apiKey));
      const session = req.headers['x-session-id'];
      await deps.dispatcher.serve(
        request,
        rootRequestId,
        path,
        res,
        translated.createSink(res),
        { sessionKey: typeof session === 'string' && session !== '' ? session : undefined, apiKey },
        cancellation,
      );
    } finally {
      // the body's bytes stay counted until the request ends: its parsed body and leg bodies live that long
      ticket.release();
    }
  };
}
