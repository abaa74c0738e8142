import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendJson } from '../common/http.js';
import {
  buildDispatchStopResponse,
  describeIssue,
  normalizedReason,
  parseDispatchStopRequest,
} from '../protocol/index.js';
import type { ProxyContext } from './proxy-context.js';
import { ProxyError, sendError } from './proxy-error.js';

/**
 * `POST /v1/dispatch/stop` (conformance 29): stops the attempt if it is in flight here and answers
 * once its abort actions settled (bounded by the peer timeout), or leaves a tombstone.
 */
export async function dispatchStopRoute(
  ctx: ProxyContext,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const stop = parseDispatchStopRequest(await ctx.bodies.json(req));
  if (!stop.ok) {
    return sendError(
      res,
      new ProxyError('invalid_request', describeIssue(stop.error), { param: stop.error.path }),
    );
  }
  const { root_request_id, attempt_seq } = stop.value;
  const reason = normalizedReason(stop.value);
  const outcome = ctx.tracker.stop(stop.value, reason);
  ctx.metrics.stops.inc({ reason, state: outcome.state });
  if (outcome.state === 'stopped') {
    await Promise.race([outcome.aborted, delay(ctx.opts.peerTimeoutMs)]);
    ctx.log.info({ root_request_id, attempt_seq, reason }, 'attempt stopped');
  }
  const accepted =
    outcome.state === 'stopped' || outcome.state === 'already_stopped' || outcome.state === 'already_done';
  sendJson(
    res,
    200,
    buildDispatchStopResponse({
      root_request_id,
      attempt_seq,
      accepted,
      state: outcome.state,
      message: outcome.message,
    }),
  );
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
