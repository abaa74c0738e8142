import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BodyReader } from '../../common/body-reader.js';
import { sendJson } from '../../common/http.js';
import {
  engineRequestIdCandidates,
  findByCandidates,
  metaserverRequestId,
  parseMetaserverKvFields,
} from '../../engine-adapters/index.js';
import { MotorError } from '../../common/motor-error.js';
import type { GatewayDeps } from './gateway.js';
import { readJsonBody } from './json-body.js';
import { renderError } from '../../common/http-error.js';

/**
 * `POST /v1/metaserver` (direct trigger): the decode engine's connector posts its KV fields; the
 * pending attempt runs its prefill leg with them and answers when the prefill is done (200
 * `{"status":"ok"}`, 502 on failure, 404 for an unknown id, like vllm-ascend's newest layer-wise proxy).
 * The connector ignores the status (vllm-ascend `mooncake_layerwise_connector.py`,
 * `_access_metaserver`, every tag), so a call that cannot be served fails its attempt here: the
 * decode leg is aborted at once and the attempt retried, instead of waiting for KV until the
 * first-token timeout.
 */
export function metaserverRoute(deps: Pick<GatewayDeps, 'config' | 'triggers'>, bodies: BodyReader) {
  const { config, triggers } = deps;
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const body = await readJsonBody(bodies, req);
    if ('error' in body) return renderError(res, body.error, body.headers);
    const requestId = metaserverRequestId(body.value);
    // vLLM's external id (`chatcmpl-<id>`, `cmpl-<id>-<i>`, maybe `-<8 hex>`): try each exact form.
    const candidates = requestId === null ? [] : engineRequestIdCandidates(requestId);
    const parsed = parseMetaserverKvFields(body.value);
    if (!parsed.ok) {
      const message = `invalid metaserver call: ${parsed.message}`;
      findByCandidates(candidates, (id) => triggers.take(id))?.value.fail(
        new MotorError('protocol_error', message),
      );
      return renderError(res, new MotorError('invalid_request', message, { param: parsed.param }));
    }
    const entry = await triggers.takeOrWait(candidates, config.timeouts.metaserverWaitMs);
    if (entry === undefined) {
      return renderError(
        res,
        new MotorError('not_found', `no pending trigger prefill for request ${parsed.value.request_id}`, {
          param: 'request_id',
        }),
      );
    }
    const reply = await entry.run(parsed.value);
    sendJson(res, reply.status, reply.body);
  };
}
