import type { IncomingMessage, ServerResponse } from 'node:http';
import { declaredBodyBytes, type BodyReader } from '../../common/body-reader.js';
import { MotorError } from '../../common/motor-error.js';
import type { AdmissionTicket } from '../../scheduling/index.js';
import { RequestCancellation } from '../dispatch/pipeline.js';
import { HOP_HEADER, hopRefusal } from '../fleet/hop-header.js';
import { BEARER_CHALLENGE, unauthorizedError, type ApiKeys } from './api-keys.js';
import type { Refuse } from './api-route.js';
import type { ClientIdentity } from './client-identity.js';
import type { GatewayDeps } from './gateway.js';
import { bodyRefusal } from './json-body.js';

/** What every client route shares before it reads a body. */
export interface FrontDeps {
  readonly deps: GatewayDeps;
  readonly apiKeys: ApiKeys;
  readonly client: ClientIdentity;
  readonly bodies: BodyReader;
}

/** A request let in: its admission (release it when the request ends) and its one cancellation. */
export interface Admitted {
  readonly ticket: AdmissionTicket;
  readonly cancellation: RequestCancellation;
}

/**
 * The front every client route runs before the body: the API key; then the loop guard (508), after
 * the key because its answer tells a caller this coordinator's place in a loop, which is no one's
 * business without a key; the route's own header check; then admission before the body is read: a
 * bounded part of a declared length is counted against the body budget, the rest as it arrives,
 * within the client's share — 429 (rate limit, share) / 503 (full) with Retry-After. The request's
 * one cancellation is made here and covers the wait in the queue (a signal is made only if it
 * queues). Null: refused, and the refusal is answered.
 */
export async function admitRequest(
  { deps, apiKeys, client, bodies }: FrontDeps,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  apiKey: string,
  deny: Refuse,
  headerError?: (req: IncomingMessage) => MotorError | null,
): Promise<Admitted | null> {
  if (!apiKeys.allows(apiKey)) {
    deny(res, path, unauthorizedError(), BEARER_CHALLENGE);
    return null;
  }
  const early = hopRefusal(req.headers[HOP_HEADER]) ?? headerError?.(req) ?? null;
  if (early) {
    deny(res, path, early);
    return null;
  }
  const oversize = bodies.declaredTooLarge(req);
  if (oversize !== null) {
    const { error, headers } = bodyRefusal(oversize);
    deny(res, path, error, headers);
    return null;
  }
  const cancellation = new RequestCancellation(res);
  const admitted = deps.scheduling.admission.tryAcquire({
    apiKey,
    signal: () => cancellation.signal(),
    bodyBytes: declaredBodyBytes(req) ?? 0,
    client: client(req, apiKey),
  });
  const ticket = admitted instanceof Promise ? await admitted : admitted;
  if (ticket.admitted) return { ticket, cancellation };
  if (ticket.reason === 'aborted') {
    deps.observer?.rejected?.(path, 499, 'client_disconnect');
    res.destroy();
    return null;
  }
  // the body is left unread: the connection cannot be reused
  deny(res, path, new MotorError(ticket.status === 429 ? 'rate_limited' : 'overloaded', ticket.message), {
    'retry-after': String(ticket.retryAfterSeconds),
    connection: 'close',
  });
  return null;
}
