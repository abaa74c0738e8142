import { isPlainObject } from '../../../common/http.js';
import { MotorError } from '../../../common/motor-error.js';
import { cachedTokensOf } from '../attempt/prefill-result.js';
import type { Attempt } from '../attempt/attempt.js';
import type { PrefillOutcome } from './commit-barrier.js';
import type { Leg, ResponseData } from '../transport/leg.js';
import { recomputedError } from '../migration/recompute.js';
import { rewriteResponseObject, SseRelay } from './sse-relay.js';
import { clientFrames, earlyErrorFrame, endOfBody, stopReasonFor } from './stream-relay.js';

/**
 * A non-stream client's answer from a streamed leg (`migration.nonStreamLegs: stream`,
 * docs/migration.md): the frames, as a stream's client would have received them (seam-joined after a
 * migration), are folded into the answer as they come (assembled-answer.ts `AnswerFold`: a bounded
 * batch of frame bytes, then only what the JSON needs) and sent as one JSON body at `[DONE]`. Nothing reaches
 * the client before that, so a leg failing mid-answer is continued by a migration exactly as a
 * stream would be; a failure before the first output is retried as before. Per chunk: one
 * `SseRelay.push` and one array push; the parse happens per `FOLD_BYTES` batch (once, at the end, for
 * any common answer).
 */
export function relayAssembled(
  attempt: Attempt,
  leg: Leg,
  res: ResponseData,
  waitPrefill: PrefillOutcome | null,
): Promise<MotorError | null> {
  const { ctx } = attempt;
  const { migration } = ctx;
  const relay = new SseRelay(ctx.rewrite);
  const toClient = clientFrames(attempt, relay);
  const body = res.body;
  return new Promise<MotorError | null>((resolve) => {
    let settled = false;
    const settle = (err: MotorError | null): void => {
      if (settled) return;
      settled = true;
      if (err === null) {
        void deliver(attempt, waitPrefill).then(resolve);
        return;
      }
      if (!attempt.streaming && !migration.started) {
        resolve(attempt.failBeforeCommit(err)); // no output yet: an ordinary retry
        return;
      }
      // output started: the dispatcher migrates, or the client gets the failure as a JSON error
      attempt.fail(err, stopReasonFor(err));
      resolve(attempt.failure ?? err);
    };
    attempt.cancellation.onCancel((err) => {
      body.destroy();
      settle(err);
    });
    body.on('data', (chunk: Buffer) => {
      if (settled) return;
      const out = toClient(chunk);
      if (relay.recomputed) {
        if (migration.started && out !== null) migration.sent.record(out);
        attempt.fail(recomputedError(leg), 'recompute'); // settles through onCancel
        return;
      }
      if (relay.upstreamError !== null && !attempt.streaming) {
        settle(earlyErrorFrame(leg, relay.upstreamError));
        return;
      }
      if (out !== null) {
        // (no obs.chunk: frames and TTFT metrics are the stream clients')
        if (!attempt.streaming) {
          leg.obs.firstByte();
          const first = !migration.started;
          migration.started = true;
          attempt.committed(first);
        } else {
          attempt.touch();
        }
        migration.sent.record(out);
      }
      if (relay.sawDone && relay.upstreamError === null) settle(null);
    });
    body.on('end', () => settle(endOfBody(relay, leg)));
    body.on('error', (err) => settle(attempt.failure ?? leg.connectionError(err)));
  });
}

/** `[DONE]` arrived: the prefill's outcome (its cached tokens) is awaited, then the one JSON body. */
async function deliver(attempt: Attempt, waitPrefill: PrefillOutcome | null): Promise<MotorError | null> {
  const { ctx } = attempt;
  if (waitPrefill) await waitPrefill;
  if (attempt.failure) return attempt.failure;
  const answer = ctx.migration.answer!.answer(); // relayAssembled runs only when the request assembles
  if (answer === null) {
    const { instance } = attempt.legs[attempt.legs.length - 1]!;
    return attempt.failBeforeCommit(
      new MotorError('protocol_error', `instance ${instance.id} streamed no answer frame before [DONE]`, {
        instanceId: instance.id,
      }),
    );
  }
  const leg = attempt.legs[attempt.legs.length - 1];
  if (leg?.role === 'single' && ctx.migration.count === 0 && isPlainObject(answer.usage))
    attempt.reportedCachedTokens(leg.instance.id, cachedTokensOf(answer.usage));
  rewriteResponseObject(answer, ctx.rewrite);
  if (!attempt.streaming) attempt.committed();
  ctx.sink.sendJson(200, answer);
  return null;
}
