import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BodyReader } from '../../common/body-reader.js';
import { MotorError } from '../../common/motor-error.js';
import { admitRequest } from './admission-front.js';
import type { ApiKeys } from './api-keys.js';
import type { GatewayDeps } from './gateway.js';
import { readJsonBody } from './json-body.js';
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
  const front = { deps, apiKeys, client, bodies };
  const { path } = adapter;
  const deny = refuser(deps, adapter.renderError);
  const isolation = deps.config.server.tenantIsolation;
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    // the token is also the rate limiter's key (anonymous callers share the key '')
    const apiKey = adapter.apiKey(req);
    const admitted = await admitRequest(front, req, res, path, apiKey, deny, adapter.headerError);
    if (admitted === null) return;
    const { ticket, cancellation } = admitted;
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
