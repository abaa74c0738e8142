import type { Logger } from '../../../common/logger.js';
import { bootstrapAddressFromUrl, type PrefillResult } from '../../../protocol/index.js';
import { MotorError } from '../../../common/motor-error.js';
import { triggerPromptListError } from '../../../engine-adapters/index.js';
import type { PdRoute } from '../../scheduling-bridge/route.js';
import type { Attempt } from '../attempt/attempt.js';
import { relayBehindCommitBarrier, type PrefillOutcome } from '../relay/commit-barrier.js';
import { dispatchFor, prefillShapedBody, type LegInput } from '../transport/leg-request.js';
import { awaitPrefill, prefillCompleted } from '../attempt/prefill-result.js';
import { newTriggerToken, type PendingTriggers } from './pending-trigger.js';

export interface ConcurrentFlowDeps {
  triggers: PendingTriggers;
  log: Logger;
}

/**
 * Trigger (vLLM Mooncake layer-wise) and bootstrap (SGLang): both legs at once (`concurrent_engine_sync`),
 * the engines meet on their own. The decode leg is relayed; a prefill failure before commit fails the
 * attempt, after commit it is only logged (the decode already streams).
 */
export async function runConcurrent(
  attempt: Attempt,
  route: PdRoute,
  deps: ConcurrentFlowDeps,
): Promise<MotorError | null> {
  const { ctx, ids } = attempt;
  const flow = route.flow;
  if (flow === 'trigger') {
    // Refused before any leg, in both modes: one prefill cannot serve several metaserver calls.
    const refused = triggerPromptListError(attempt.body);
    if (refused) return new MotorError('invalid_request', refused.message, { param: refused.param });
  }
  const bootstrap =
    flow === 'bootstrap'
      ? bootstrapAddressFromUrl(route.prefill.url, { port: route.prefill.bootstrapPort })
      : null;
  const prefillInput: LegInput = {
    body: prefillShapedBody(attempt.body),
    dispatch: dispatchFor(ids, 'prefill', route),
    bootstrap,
  };
  // Direct trigger: a per-attempt token in the URL only the decode leg gets; it dies with the attempt.
  const pass = flow === 'trigger' ? newTriggerToken() : null;
  const metaserverUrl =
    pass !== null ? attempt.transportFor(route.prefill).triggerMetaserverUrl(pass.token) : null;
  const prefillDone =
    metaserverUrl !== null
      ? prefillOnMetaserverCall(attempt, route, prefillInput, deps.triggers, pass!.key)
      : sendPrefill(attempt, route, prefillInput);
  try {
    const decodeLeg = attempt.open(route.decode, 'decode', {
      body: attempt.body,
      dispatch: dispatchFor(ids, 'decode', route),
      metaserverUrl,
      bootstrap,
    });
    void prefillDone.then((r) => prefillSettled(attempt, r, deps.log));
    // Trigger through engine proxies: the prefill side answers `prepared` at once; both legs must be
    // accepted before commit.
    const gate = flow === 'trigger' && metaserverUrl === null ? prefillDone : null;
    return await relayBehindCommitBarrier(attempt, decodeLeg, gate, ctx.client.stream ? null : prefillDone);
  } finally {
    if (metaserverUrl !== null) deps.triggers.delete(pass!.key);
  }
}

function sendPrefill(attempt: Attempt, route: PdRoute, input: LegInput): PrefillOutcome {
  const leg = attempt.open(route.prefill, 'prefill', input);
  return awaitPrefill(attempt, leg, route.flow).then((r) => {
    leg.end(r instanceof MotorError ? r : null);
    return r;
  });
}

/**
 * A stock vLLM prefill has no metaserver: the coordinator serves it (gateway
 * `POST /v1/metaserver/<token>`, the trigger stored under the token's `key`) and runs the prefill leg
 * when the decode engine's connector calls with its KV fields. A failed
 * prefill fails the attempt (`prefillSettled`), which aborts the decode leg: the connector would
 * otherwise wait for KV, whatever the metaserver answers.
 */
function prefillOnMetaserverCall(
  attempt: Attempt,
  route: PdRoute,
  input: LegInput,
  triggers: PendingTriggers,
  key: string,
): PrefillOutcome {
  return new Promise((resolve) => {
    triggers.put(key, {
      engineRequestId: attempt.ids.engineRequestId,
      fail: (err) => attempt.fail(err, 'peer_failed'),
      run: async (fields) => {
        const leg = attempt.open(route.prefill, 'prefill', { ...input, triggerKv: fields });
        const result = await awaitPrefill(attempt, leg, 'trigger');
        leg.end(result instanceof MotorError ? result : null);
        resolve(result);
        // As vllm-ascend's newest layer-wise proxy answers (`metaserver`, main 2026-08-22).
        if (result instanceof MotorError) {
          return { status: 502, body: { error: { message: result.message } } };
        }
        return { status: 200, body: { status: 'ok' } };
      },
    });
    attempt.cancellation.onCancel((err) => resolve(err));
  });
}

/** The prefill leg's outcome: a failure stops both legs unless the decode already streams. */
function prefillSettled(attempt: Attempt, r: PrefillResult | MotorError, log: Logger): void {
  if (!(r instanceof MotorError)) {
    prefillCompleted(attempt, r);
    return;
  }
  // Stopped because the decode leg failed first: the decode's own answer carries the error.
  if (r.stoppedByPeer) return;
  if (!attempt.ctx.sink.committed) attempt.fail(r, 'peer_failed');
  else
    log.warn(
      { root_request_id: attempt.ids.rootRequestId, err: r.message },
      'prefill leg failed after commit',
    );
}
