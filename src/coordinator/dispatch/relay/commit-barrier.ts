import type { PrefillResult } from '../../../protocol/index.js';
import { MotorError } from '../../../common/motor-error.js';
import { readAll } from '../../fleet/upstream.js';
import type { Attempt } from '../attempt/attempt.js';
import { relayAssembled } from './assembled-relay.js';
import { relayJson } from './json-relay.js';
import type { Leg, ResponseData } from '../transport/leg.js';
import { relayStream } from './stream-relay.js';

/** The prefill leg's outcome, as a concurrent flow waits for it. */
export type PrefillOutcome = Promise<PrefillResult | MotorError>;

/**
 * Relays the decode (or single) leg to the client. Commit barrier: nothing is sent to the client
 * before the leg answered 200 and produced its first bytes (and `gate`, when given, resolved), so
 * every failure before that can still become a retry or the engine's own 4xx.
 * Resolves null when the response was delivered (or ended after commit), else with the failure.
 */
export async function relayBehindCommitBarrier(
  attempt: Attempt,
  leg: Leg,
  gate: PrefillOutcome | null,
  waitPrefillAtEnd: PrefillOutcome | null = null,
): Promise<MotorError | null> {
  let res: ResponseData;
  try {
    res = await leg.response!;
  } catch (err) {
    return attempt.failure ?? attempt.failBeforeCommit(leg.connectionError(err));
  }
  if (attempt.failure) {
    res.body.destroy();
    return attempt.failure;
  }
  if (res.statusCode !== 200) {
    let body: Buffer;
    try {
      body = await readAll(res.body);
    } catch (err) {
      return attempt.failure ?? attempt.failBeforeCommit(leg.connectionError(err));
    }
    const err = leg.engineStatusError({
      status: res.statusCode,
      body,
      contentType: String(res.headers['content-type'] ?? 'application/json'),
    });
    return attempt.failBeforeCommit(err);
  }
  if (gate) {
    const g = await gate;
    if (g instanceof MotorError || attempt.failure) {
      res.body.destroy();
      return attempt.failure ?? attempt.failBeforeCommit(g as MotorError);
    }
  }
  const { ctx } = attempt;
  // (an engine that answers a streamed leg with one JSON body anyway: that body is relayed as it is)
  if (ctx.migration.assembles && isEventStream(res.headers['content-type']))
    return relayAssembled(attempt, leg, res, waitPrefillAtEnd);
  if (!ctx.client.stream) return relayJson(attempt, leg, res, waitPrefillAtEnd);
  return relayStream(attempt, leg, res);
}

/** `text/event-stream` (any case, any parameters): vLLM and SGLang stream answers as it. */
function isEventStream(contentType: string | string[] | undefined): boolean {
  return String(contentType).toLowerCase().includes('text/event-stream');
}
