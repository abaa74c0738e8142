import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BodyReader } from '../../common/body-reader.js';
import { sendJson } from '../../common/http.js';
import { parseMetaserverKvFields } from '../../engine-adapters/index.js';
import { MotorError } from '../../common/motor-error.js';
import type { GatewayDeps } from './gateway.js';
import { readJsonBody } from './json-body.js';
import { renderError } from '../../common/http-error.js';

/**
 * `POST /v1/metaserver` (direct trigger): the decode engine's connector posts its KV fields; the
 * pending attempt runs its prefill leg with them and answers when the prefill is done.
 */
export function metaserverRoute(deps: Pick<GatewayDeps, 'config' | 'triggers'>, bodies: BodyReader) {
  const { config, triggers } = deps;
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const body = await readJsonBody(bodies, req);
    if ('error' in body) return renderError(res, body.error, body.headers);
    const parsed = parseMetaserverKvFields(body.value);
    if (!parsed.ok) {
      const id = (body.value as { request_id?: unknown } | null)?.request_id;
      if (typeof id === 'string') {
        triggers
          .peek(id)
          ?.fail(new MotorError('protocol_error', `invalid metaserver call: ${parsed.message}`));
      }
      return renderError(
        res,
        new MotorError('invalid_request', `invalid metaserver call: ${parsed.message}`, {
          param: parsed.param,
        }),
      );
    }
    const entry = await triggers.takeOrWait(parsed.value.request_id, config.timeouts.metaserverWaitMs);
    if (entry === undefined) {
      return renderError(
        res,
        new MotorError('not_found', `no pending trigger prefill for request ${parsed.value.request_id}`),
      );
    }
    const reply = await entry.run(parsed.value);
    sendJson(res, reply.status, reply.body);
  };
}
