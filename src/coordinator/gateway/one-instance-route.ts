import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BodyReader } from '../../common/body-reader.js';
import { bearerToken, isPlainObject } from '../../common/http.js';
import { MotorError } from '../../common/motor-error.js';
import { isClientForbiddenKey } from '../../protocol/index.js';
import { HOP_HEADER, nextHops } from '../fleet/hop-header.js';
import type { InstanceSource } from '../fleet/instance-source.js';
import { servedModels } from '../scheduling-bridge/route.js';
import { admitRequest } from './admission-front.js';
import type { ApiKeys } from './api-keys.js';
import type { ClientIdentity } from './client-identity.js';
import type { Refuse } from './api-route.js';
import type { GatewayDeps } from './gateway.js';
import { readJsonBytes } from './json-body.js';
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
 * `POST` of a one-instance route (one-instance-paths.ts): the same front as chat — API key, loop
 * guard, admission before the body (a slot and the body's bytes), the body bounded in bytes and keys
 * and parsed once for its `model` and internal keys — then {@link OneInstanceForwarder} with the
 * client's bytes unchanged.
 */
export function oneInstanceRoute(
  deps: GatewayDeps,
  { apiKeys, client }: { apiKeys: ApiKeys; client: ClientIdentity },
  bodies: BodyReader,
  refuse: Refuse,
) {
  const front = { deps, apiKeys, client, bodies };
  let forwarder: OneInstanceForwarder | undefined;
  return async (req: IncomingMessage, res: ServerResponse, path: string): Promise<void> => {
    const apiKey = bearerToken(req);
    const admitted = await admitRequest(front, req, res, path, apiKey, refuse);
    if (admitted === null) return;
    const { ticket, cancellation } = admitted;
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
