import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { declaredBodyBytes, type BodyReader } from '../../common/body-reader.js';
import { bearerToken } from '../../common/http.js';
import { RequestCancellation } from '../dispatch/pipeline.js';
import { MotorError } from '../../common/motor-error.js';
import { HOP_HEADER, hopRefusal } from '../fleet/hop-header.js';
import { BEARER_CHALLENGE, unauthorizedError, type ApiKeys } from './api-keys.js';
import type { GatewayDeps } from './gateway.js';
import { bodyRefusal, readJsonBody } from './json-body.js';
import { applyCacheSalt, type TenantSalter } from './tenant-salt.js';
import type { ClientIdentity } from './client-identity.js';
import { renderError } from '../../common/http-error.js';
import { validateClientRequest, type ApiKind, type ClientRequest } from './request-validation.js';
import type { ApiAdapter } from '../apis/api-adapter.js';
import type { ClientSinkLike } from '../dispatch/request/client-sink.js';
import { storeTenant } from './store-tenant.js';

/** Where translated requests' legs go: every flow runs chat completions. */
const CHAT_PATH = '/v1/chat/completions';

/** A client API other than OpenAI chat/completions on this route: its adapter and header checks. */
export interface ApiRoute {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each adapter has its own Translated
  readonly adapter: ApiAdapter<any>;
  /** Renders and counts a refusal in the API's own error shape. */
  readonly refuse: Refuse;
  /** A header the API requires in a given form (`anthropic-version`), checked before admission. */
  readonly headerError?: (req: IncomingMessage) => MotorError | null;
}

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
 * `POST /v1/chat/completions` and `/v1/completions`: auth, admission (a slot and the body's bytes),
 * body read, parse (bounded in bytes, keys and depth), validation, then the dispatcher. Nothing is
 * buffered or parsed for a request admission refuses. The request's one cancellation is made here,
 * before admission.
 */
export function completionsRoute(
  deps: GatewayDeps,
  { apiKeys, salter, client }: { apiKeys: ApiKeys; salter: TenantSalter; client: ClientIdentity },
  bodies: BodyReader,
  refuse: Refuse,
) {
  return async (
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    kind: ApiKind,
    /** Another client API (apis/): its key header, error shape and translation; absent = OpenAI chat/completions. */
    api?: ApiRoute,
  ): Promise<void> => {
    const deny = api?.refuse ?? refuse;
    // the token is also the rate limiter's key (anonymous callers share the key '')
    const apiKey = api ? api.adapter.apiKey(req) : bearerToken(req);
    if (!apiKeys.allows(apiKey)) return deny(res, path, unauthorizedError(), BEARER_CHALLENGE);
    // A leg of this coordinator came back: 508 at once. After the key: the answer tells a caller
    // this coordinator's place in a loop, which is no one's business without a key.
    const loop = hopRefusal(req.headers[HOP_HEADER]);
    if (loop) return deny(res, path, loop);
    const early = api?.headerError?.(req);
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
      let client: ClientRequest;
      let front: { sink: ClientSinkLike; legPath: string } | undefined;
      try {
        if (api) {
          const ctx = {
            apiKey,
            tenant: storeTenant(req, apiKey, deps.config.server.tenantIsolation),
            rootRequestId,
          };
          const pending = api.adapter.toInternal(body.value, ctx);
          const translated = pending instanceof Promise ? await pending : pending;
          client = validateClientRequest('chat', translated.chat);
          front = {
            sink: api.adapter.createSink(res, rootRequestId, translated, client),
            legPath: CHAT_PATH,
          };
        } else {
          client = validateClientRequest(kind, body.value);
          client.source = body.source;
        }
      } catch (err) {
        if (err instanceof MotorError) return deny(res, path, err);
        throw err;
      }
      applyCacheSalt(client.body, salter(req, apiKey));
      const session = req.headers['x-session-id'];
      await deps.dispatcher.serve(
        client,
        rootRequestId,
        path,
        res,
        { sessionKey: typeof session === 'string' && session !== '' ? session : undefined, apiKey },
        cancellation,
        front,
      );
    } finally {
      // the body's bytes stay counted until the request ends: its parsed body and leg bodies live that long
      ticket.release();
    }
  };
}
