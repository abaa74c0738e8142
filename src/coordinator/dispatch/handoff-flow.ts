import { MotorError } from '../../common/motor-error.js';
import type { PdRoute } from '../route.js';
import type { Attempt } from './attempt.js';
import { relayDecode } from './decode-relay.js';
import { dispatchFor, prefillShapedBody } from './leg-request.js';
import { awaitPrefill, prefillCompleted } from './prefill-result.js';

/**
 * Handoff (vLLM NIXL, `prefill_handoff_decode`): the prefill leg runs to completion, then its
 * PrefillResult (the KV location) goes with the decode leg, which is relayed to the client.
 */
export async function runHandoff(attempt: Attempt, route: PdRoute): Promise<MotorError | null> {
  const { session, ids } = attempt;
  const prefillLeg = attempt.open(route.prefill, 'prefill', {
    body: prefillShapedBody(session.client.body),
    dispatch: dispatchFor(ids, 'prefill', route),
  });
  const prefill = await awaitPrefill(attempt, prefillLeg, 'handoff');
  prefillLeg.end(prefill instanceof MotorError ? prefill : null);
  if (prefill instanceof MotorError) return prefill;
  prefillCompleted(attempt, prefill);
  const decodeLeg = attempt.open(route.decode, 'decode', {
    body: session.client.body,
    dispatch: dispatchFor(ids, 'decode', route),
    prefillResult: prefill,
  });
  return relayDecode(attempt, decodeLeg, null);
}
