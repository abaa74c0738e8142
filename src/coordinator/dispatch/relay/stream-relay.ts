import { MotorError } from '../../../common/motor-error.js';
import type { Attempt } from '../attempt/attempt.js';
import type { Leg, ResponseData } from '../transport/leg.js';
import { recomputedError } from '../migration/recompute.js';
import { SseRelay } from './sse-relay.js';
import { attemptIdRewrite, withClientRequestId } from '../../../engine-adapters/client-request-id.js';

/**
 * A stream answer, chunk by chunk: the first forwarded bytes commit the response; after that a failure
 * the dispatcher may migrate (migration.ts) is returned to it, any other ends the stream with one
 * error frame (unless the engine sent its own) and `data: [DONE]`, never a silently truncated 200.
 * A migrated attempt's output goes through the request's `StreamSeam`. An engine error frame or a
 * recompute (recompute.ts) before the first token fails the attempt uncommitted, so it can be retried. Per chunk: one `SseRelay.push` (usually the same Buffer
 * back), one socket write.
 */
export function relayStream(attempt: Attempt, leg: Leg, res: ResponseData): Promise<MotorError | null> {
  const { ctx } = attempt;
  const { sink, migration } = ctx;
  const relay = new SseRelay(ctx.rewrite);
  const toClient = clientFrames(attempt, relay);
  const body = res.body;
  return new Promise<MotorError | null>((resolve) => {
    let settled = false;
    /** The frames that came with the engine's [DONE]: they leave with our terminator, in one write. */
    let tail: Buffer | null = null;
    const settle = (err: MotorError | null): void => {
      if (settled) return;
      settled = true;
      if (err === null) {
        sink.endStream(tail);
        resolve(null);
        return;
      }
      if (!attempt.streaming && !sink.committed) {
        resolve(attempt.failBeforeCommit(err));
        return;
      }
      if (relay.upstreamError === null && migration.wants(err)) {
        // committed: the dispatcher decides about a migration (and renders the error frame if none)
        attempt.fail(err, stopReasonFor(err));
        resolve(attempt.failure ?? err);
        return;
      }
      // After commit: stop both legs, one error frame (unless the engine sent its own), [DONE].
      attempt.fail(err, stopReasonFor(err));
      const final = attempt.failure ?? err;
      if (!ctx.cancellation.clientGone)
        sink.streamError(relay.upstreamError !== null ? null : ctx.clientError(final, ctx.rootRequestId));
      resolve(null);
    };
    attempt.cancellation.onCancel((err) => {
      body.destroy();
      settle(err);
    });
    body.on('data', (chunk: Buffer) => {
      if (settled) return;
      const out = toClient(chunk);
      if (relay.recomputed) {
        // Frames before the recomputed one are the answer so far: relayed only once committed.
        if (sink.committed && out !== null) {
          ctx.obs.chunk(out);
          sink.write(out);
          if (migration.recording) migration.sent.record(out);
        }
        attempt.fail(recomputedError(leg), 'recompute'); // settles through onCancel
        return;
      }
      if (relay.upstreamError !== null && !attempt.streaming) {
        // Commit barrier: an error frame before the first token (SGLang KV transfer failure, vLLM
        // GenerationError) is the engine's failure, not the client's answer.
        settle(earlyErrorFrame(leg, relay.upstreamError));
        return;
      }
      // The engine's [DONE] (with no error before it) ends the answer: the last frames and our
      // terminator leave in one socket write instead of waiting for the upstream's end of body.
      const last = relay.sawDone && relay.upstreamError === null;
      if (out !== null) {
        ctx.obs.chunk(out);
        if (!attempt.streaming) {
          leg.obs.firstByte();
          const first = !sink.committed;
          if (first) sink.commitStream();
          attempt.committed(first);
        } else {
          attempt.touch();
        }
        if (migration.recording) migration.sent.record(out);
        // Not res.cork() + end() + uncork(): Node 22 drops what was written while corked when end()
        // comes first (22.23.5; 20 and 24 send it), so the last frames go into end() itself.
        if (last) tail = out;
        else if (!sink.write(out)) {
          // Backpressure: the upstream waits for the client, whose stall is its own (attempt.ts).
          body.pause();
          attempt.clientStalled();
          sink.onDrain(() => {
            attempt.clientDrained();
            body.resume();
          });
        }
      }
      if (last) settle(null);
    });
    body.on('end', () => settle(endOfBody(relay, leg)));
    body.on('error', (err) => settle(attempt.failure ?? leg.connectionError(err)));
  });
}

/**
 * Per chunk of an engine stream, the client's frames: the relay's rewrites, the root request id in
 * the body (client-request-id.ts), and after a migration the seam (stream-seam.ts). One closure per leg.
 */
export function clientFrames(attempt: Attempt, relay: SseRelay): (chunk: Buffer) => Buffer | null {
  const ids = attemptIdRewrite(attempt.ids.rootRequestId, attempt.ids.engineRequestId);
  const seam = attempt.ctx.migration.seam;
  return (chunk) => {
    const relayed = relay.push(chunk);
    const pushed = relayed === null ? null : withClientRequestId(relayed, ids);
    return seam !== null && pushed !== null ? seam.rewrite(pushed) : pushed;
  };
}

export function stopReasonFor(err: MotorError): 'timeout' | 'peer_failed' {
  return err.code === 'idle_timeout' || err.code === 'deadline_exceeded' ? 'timeout' : 'peer_failed';
}

/** An error frame before any token: a retryable failure of the leg's instance (its breaker counts it). */
export function earlyErrorFrame(leg: Leg, message: string): MotorError {
  return new MotorError(
    'engine_error',
    `${leg.role} instance ${leg.instance.id} sent an error before its first token: ${message}`,
    { instanceId: leg.instance.id },
  );
}

/** The upstream body ended: fine after `[DONE]`, else the engine's error frame or a truncated stream. */
export function endOfBody(relay: SseRelay, leg: Leg): MotorError | null {
  if (relay.upstreamError !== null) {
    return new MotorError('engine_error', `decode engine stream failed: ${relay.upstreamError}`, {
      retryable: false,
    });
  }
  if (!relay.sawDone) {
    return new MotorError(
      'connection_error',
      `${leg.role} instance ${leg.instance.id} ended the stream without [DONE]`,
      { instanceId: leg.instance.id },
    );
  }
  return null;
}
