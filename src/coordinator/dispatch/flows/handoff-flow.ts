import { MotorError } from '../../../common/motor-error.js';
import { asSkippedHandoff, handoffExpired } from '../../../engine-adapters/index.js';
import type { PrefillResult } from '../../../protocol/index.js';
import type { PdRoute } from '../../scheduling-bridge/route.js';
import type { Attempt } from '../attempt/attempt.js';
import { relayBehindCommitBarrier } from '../relay/commit-barrier.js';
import { dispatchFor, prefillShapedBody } from '../transport/leg-request.js';
import { awaitPrefill, prefillCompleted } from '../attempt/prefill-result.js';

/**
 * A completed handoff prefill whose KV no decode has read: when the decode leg of its attempt never
 * reached its engine (connection refused), the retry on the same prefill instance runs its decode
 * with this result instead of prefilling again — otherwise an unreachable decode cost one prefill
 * and one KV pinned for the whole lease per attempt (issue 15 finding 10). The dispatcher keeps it
 * only across such a failure (dispatcher.ts `retryAfter`).
 */
export interface HandoffCarry {
  readonly prefillId: string;
  readonly result: PrefillResult;
}

/**
 * Handoff (vLLM NIXL, `prefill_handoff_decode`): the prefill leg runs to completion, then its
 * PrefillResult (the KV location) goes with the decode leg, which is relayed to the client. A
 * prefill that left no readable KV makes it a plain decode (`readableHandoff`).
 */
export async function runHandoff(
  attempt: Attempt,
  route: PdRoute,
  carry: { handoff: HandoffCarry | null } = { handoff: null },
): Promise<MotorError | null> {
  const { ids } = attempt;
  let prefill: PrefillResult | MotorError;
  const kept = carry.handoff;
  if (kept && kept.prefillId === route.prefill.id && !handoffExpired(kept.result, Date.now())) {
    // its KV is still held for a decode: no second prefill; this attempt adopts the result
    const { rootRequestId, pairId, attemptSeq } = ids;
    prefill = { ...kept.result, root_request_id: rootRequestId, pair_id: pairId, attempt_seq: attemptSeq };
  } else {
    const prefillLeg = attempt.open(route.prefill, 'prefill', {
      body: prefillShapedBody(attempt.body),
      dispatch: dispatchFor(ids, 'prefill', route),
    });
    prefill = await awaitPrefill(attempt, prefillLeg, 'handoff');
    prefillLeg.end(prefill instanceof MotorError ? prefill : null);
    if (prefill instanceof MotorError) return prefill;
  }
  carry.handoff = { prefillId: route.prefill.id, result: prefill };
  prefillCompleted(attempt, prefill);
  const decodeLeg = attempt.open(route.decode, 'decode', {
    body: attempt.body,
    dispatch: dispatchFor(ids, 'decode', route),
    prefillResult: readableHandoff(attempt, route, prefill),
  });
  return relayBehindCommitBarrier(attempt, decodeLeg, null);
}

/**
 * The result the decode runs with. `skipped` (the prefill engine kept no KV) and an expired handoff
 * (its blocks are freed: handoff-ttl.ts) both become a plain decode that recomputes the prompt —
 * counted, never a failure of the prefill instance.
 */
function readableHandoff(attempt: Attempt, route: PdRoute, prefill: PrefillResult): PrefillResult {
  if (prefill.status === 'skipped') {
    attempt.ctx.obs.prefillKvSkipped(route.prefill.id, 'no_kv_params');
    return prefill;
  }
  if (!handoffExpired(prefill, Date.now())) return prefill;
  attempt.ctx.obs.prefillKvSkipped(route.prefill.id, 'expired');
  return asSkippedHandoff(prefill);
}
