import { isPlainObject } from '../../../common/http.js';
import { MotorError } from '../../../common/motor-error.js';
import { readAll } from '../../fleet/upstream.js';
import type { Attempt } from '../attempt/attempt.js';
import type { PrefillOutcome } from './commit-barrier.js';
import type { Leg, ResponseData } from '../transport/leg.js';
import { isRecomputed, RECOMPUTED_MARK, recomputedError } from '../migration/recompute.js';
import { attemptIdRewrite, withClientRequestId } from '../../../engine-adapters/client-request-id.js';
import { reportedCachedTokens } from '../../doctor/cached-tokens-samples.js';
import { needsRewrite, rewriteResponseObject, withoutTrailingNullKv } from './sse-relay.js';

/**
 * A non-stream answer: read whole, then relayed as the engine's bytes when nothing needs changing
 * (no parse, no stringify), else parsed, rewritten and serialised once.
 */
export async function relayJson(
  attempt: Attempt,
  leg: Leg,
  res: ResponseData,
  waitPrefill: PrefillOutcome | null,
): Promise<MotorError | null> {
  const { ctx } = attempt;
  let body: Buffer;
  try {
    body = await readAll(res.body);
  } catch (err) {
    return attempt.failure ?? attempt.failBeforeCommit(leg.connectionError(err));
  }
  leg.obs.firstByte();
  if (waitPrefill) await waitPrefill;
  if (attempt.failure) return attempt.failure;
  if (body.includes(RECOMPUTED_MARK) && recomputedBody(body)) {
    attempt.fail(recomputedError(leg), 'recompute'); // an unfinished answer: a new attempt serves it
    return attempt.failure;
  }
  if (leg.role === 'single' && ctx.schedulingRequest.kvPrediction)
    attempt.reportedCachedTokens(leg.instance.id, reportedCachedTokens(body));
  // the client sees the root request id in the body too (client-request-id.ts)
  body = withClientRequestId(body, attemptIdRewrite(attempt.ids.rootRequestId, attempt.ids.engineRequestId));
  let asIs = !needsRewrite(body, ctx.rewrite);
  if (!asIs) {
    const cut = withoutTrailingNullKv(body);
    if (cut !== null && !needsRewrite(cut, ctx.rewrite)) [body, asIs] = [cut, true];
  }
  if (asIs) {
    attempt.committed();
    ctx.sink.sendBytes(200, body, String(res.headers['content-type'] ?? 'application/json'));
    return null;
  }
  let obj: unknown;
  try {
    obj = JSON.parse(body.toString('utf8'));
  } catch {
    return attempt.failBeforeCommit(
      new MotorError('protocol_error', `${leg.role} instance ${leg.instance.id} answered invalid JSON`, {
        instanceId: leg.instance.id,
      }),
    );
  }
  if (isPlainObject(obj)) rewriteResponseObject(obj, ctx.rewrite);
  attempt.committed();
  ctx.sink.sendJson(200, obj);
  return null;
}

/** Parses a body that holds the recompute marker (rare) to tell a real `stop_reason` from text. */
function recomputedBody(body: Buffer): boolean {
  try {
    const obj: unknown = JSON.parse(body.toString('utf8'));
    return isPlainObject(obj) && isRecomputed(obj);
  } catch {
    return false;
  }
}
