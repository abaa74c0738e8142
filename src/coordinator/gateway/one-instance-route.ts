import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { declaredBodyBytes, type BodyReader } from '../../common/body-reader.js';
import { bearerToken, isPlainObject } from '../../common/http.js';
import { MotorError } from '../../common/motor-error.js';
import { isClientForbiddenKey } from '../../protocol/index.js';
import { RequestCancellation } from '../dispatch/pipeline.js';
import { HOP_HEADER, hopRefusal, nextHops } from '../fleet/hop-header.js';
import type { InstanceSource } from '../fleet/instance-source.js';
import { servedModels } from '../scheduling-bridge/route.js';
import { BEARER_CHALLENGE, unauthorizedError, type ApiKeys } from './api-keys.js';
import type { ClientIdentity } from './client-identity.js';
import type { Refuse } from './api-route.js';
import type { GatewayDeps } from './gateway.js';
import { bodyRefusal, readJsonBytes } from './json-body.js';
import { OneInstanceForwarder } from '../dispatch/one-instance/one-instance-forward.js';

const invalid = (message: string, param: string | null = null): MotorError =>
  new MotorError('invalid_request', message, { param });

/**
 * The model a one-instance request is routed on. vLLM's tokenizer and pooling requests may leave
 * `model` out (protocol.py `model: str | None = None`; the engine then uses its served model), so
 * when the fleet serves one named model (or names none) that is the answer; with several, the
 * client must say which.
 */
export function routedModel(body: Record<string, unknown>, source: Pick<InstanceSource, 'all'>): string {
  const model = body.model;
  if (typeof model === 'string' && model.length > 0) return model;
  if (model !== undefined && model !== null) throw invalid("'model' must be a non-empty string", 'model');
  const names = new Set<string>();
  for (const i of source.all()) for (const m of servedModels(i)) names.add(m);
  if (names.size <= 1) return names.values().next().value ?? '';
  throw invalid(`'model' is required: this endpoint serves ${[...names].sort().join(', ')}`, 'model');
}

/**
 * `POST` of a one-instance route (one-instance-paths.ts): the same front as chat — loop guard, API
 * key, admission before the body (a slot and the body's bytes), the body bounded in bytes and keys
 * and parsed once for its `model` and internal keys — then {@link OneInstanceForwarder} with the
 * client's bytes unchanged.
 */
export function oneInstanceRoute(
  deps: GatewayDeps,
  { apiKeys, client }: { apiKeys: ApiKeys; client: ClientIdentity },
  bodies: BodyReader,
  refuse: Refuse,
) {
  let forwarder: OneInstanceForwarder | undefined;
  return async (req: IncomingMessage, res: ServerResponse, path: string): Promise<void> => {
    const loop = hopRefusal(req.headers[HOP_HEADER]);
    if (loop) return refuse(res, path, loop);
    const apiKey = bearerToken(req);
    if (!apiKeys.allows(apiKey)) return refuse(res, path, unauthorizedError(), BEARER_CHALLENGE);
    const oversize = bodies.declaredTooLarge(req);
    if (oversize !== null) {
      const { error, headers } = bodyRefusal(oversize);
      return refuse(res, path, error, headers);
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
      return refuse(
        res,
        path,
        new MotorError(ticket.status === 429 ? 'rate_limited' : 'overloaded', ticket.message),
        { 'retry-after': String(ticket.retryAfterSeconds), connection: 'close' },
      );
    }
    try {
      const body = await readJsonBytes(bodies, req, ticket);
      if ('error' in body) return refuse(res, path, body.error, body.headers);
      let model: string;
      try {
        if (!isPlainObject(body.value)) throw invalid('request body must be a JSON object');
        for (const key of Object.keys(body.value))
          if (isClientForbiddenKey(key))
            throw invalid(`'${key}' is an internal field and may not be sent by clients`, key);
        model = routedModel(body.value, deps.source);
      } catch (err) {
        if (err instanceof MotorError) return refuse(res, path, err);
        throw err;
      }
      forwarder ??= new OneInstanceForwarder(deps.dispatcher.deps);
      await forwarder.forward(res, {
        path,
        bytes: body.bytes,
        model,
        rootRequestId: `req-${randomUUID()}`,
        apiKey,
        hops: nextHops(req.headers[HOP_HEADER]),
        cancellation,
      });
    } finally {
      ticket.release();
    }
  };
}
