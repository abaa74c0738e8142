import type { IncomingMessage, ServerResponse } from 'node:http';
import { BodyReader, type BodyAllowance } from '../../common/body-reader.js';
import { sendJson } from '../../common/http.js';
import type { RouteParams } from '../../common/route-table.js';
import { engineRequestIdCandidates, parseMetaserverKvFields } from '../../engine-adapters/index.js';
import { MotorError } from '../../common/motor-error.js';
import { triggerKey, type PendingTrigger } from '../dispatch/pipeline.js';
import type { GatewayDeps } from './gateway.js';
import { readJsonBody } from './json-body.js';
import { renderError } from '../../common/http-error.js';

/**
 * Largest metaserver body read. The KV field lists are O(blocks): a 1 M-token context at block size
 * 16 is 65,536 block ids (~400 KB); vllm-ascend's default 128 is an eighth of that.
 */
export const METASERVER_MAX_BODY_BYTES = 512 * 1024;

/** The unknown-token answer: the body is left unread, so the connection closes. */
const NO_SUCH_TRIGGER = new MotorError('not_found', 'no pending trigger prefill for this metaserver URL');
const CLOSE = { connection: 'close' } as const;

/**
 * `POST /v1/metaserver/:token` (direct trigger): the decode engine's connector posts its KV fields
 * to the URL Motor gave its decode leg, verbatim (vllm-ascend `_access_metaserver`). The token
 * (`newTriggerToken`) names one pending attempt; the call is taken at once (one call per attempt),
 * and the attempt runs its prefill leg with the fields, answering when the prefill is done (200
 * `{"status":"ok"}`, 502 on failure, like vllm-ascend's newest layer-wise proxy). An unknown, used or
 * malformed token is a 404 that reads no body and touches no state. The connector ignores the status
 * (`mooncake_layerwise_connector.py`, every tag), so a call with a valid token that cannot be served
 * (body too large, not JSON, a field missing, a `request_id` not the attempt's) fails its attempt
 * here: the decode leg is aborted at once and the attempt retried, instead of waiting for KV until
 * the first-token timeout.
 */
export function metaserverRoute(deps: Pick<GatewayDeps, 'triggers' | 'scheduling'>) {
  const { triggers, scheduling } = deps;
  const bodies = new BodyReader({ maxBytes: METASERVER_MAX_BODY_BYTES });
  return async (req: IncomingMessage, res: ServerResponse, params: RouteParams): Promise<void> => {
    const key = triggerKey(params.token);
    const entry = key === null ? undefined : triggers.take(key);
    if (entry === undefined) return renderError(res, NO_SUCH_TRIGGER, CLOSE);
    // A valid call's body counts against admission's body budget, as it arrives, until the call is answered.
    const charge = scheduling.admission.charge(0);
    try {
      await serve(req, res, entry, charge);
    } finally {
      charge.release();
    }
  };

  async function serve(
    req: IncomingMessage,
    res: ServerResponse,
    entry: PendingTrigger,
    charge: BodyAllowance,
  ): Promise<void> {
    let body;
    try {
      body = await readJsonBody(bodies, req, charge);
    } catch (err) {
      entry.fail(new MotorError('protocol_error', 'metaserver call ended before its body did'));
      throw err;
    }
    if ('error' in body) return refuse(res, entry, body.error, body.headers);
    const parsed = parseMetaserverKvFields(body.value);
    if (!parsed.ok) {
      const message = `invalid metaserver call: ${parsed.message}`;
      return refuse(res, entry, new MotorError('invalid_request', message, { param: parsed.param }));
    }
    // vLLM's external id (`chatcmpl-<id>`, `cmpl-<id>-<i>`, maybe `-<8 hex>`): one form must be ours.
    if (!engineRequestIdCandidates(parsed.value.request_id).includes(entry.engineRequestId)) {
      const message = `invalid metaserver call: request_id ${parsed.value.request_id} is not this attempt's`;
      return refuse(res, entry, new MotorError('invalid_request', message, { param: 'request_id' }));
    }
    const reply = await entry.run(parsed.value);
    sendJson(res, reply.status, reply.body);
  }
}

/** A call with a valid token that cannot be served: fails the attempt, answers the refusal. */
function refuse(
  res: ServerResponse,
  entry: PendingTrigger,
  err: MotorError,
  headers?: Readonly<Record<string, string>>,
): void {
  entry.fail(new MotorError('protocol_error', err.message));
  renderError(res, err, headers);
}
