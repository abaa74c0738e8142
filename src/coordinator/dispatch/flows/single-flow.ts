import type { MotorError } from '../../../common/motor-error.js';
import type { Route } from '../../scheduling-bridge/route.js';
import type { Attempt } from '../attempt/attempt.js';
import { relayBehindCommitBarrier } from '../relay/commit-barrier.js';
import { dispatchFor } from '../transport/leg-request.js';

/** One instance runs prefill and decode: one leg, relayed as it comes. */
export function runSingle(
  attempt: Attempt,
  route: Extract<Route, { kind: 'single' }>,
): Promise<MotorError | null> {
  const leg = attempt.open(route.instance, 'single', {
    body: attempt.body,
    dispatch: dispatchFor(attempt.ids, 'single', route),
  });
  return relayBehindCommitBarrier(attempt, leg, null);
}
