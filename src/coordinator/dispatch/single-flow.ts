import type { MotorError } from '../../common/motor-error.js';
import type { Route } from '../route.js';
import type { Attempt } from './attempt.js';
import { relayDecode } from './decode-relay.js';
import { dispatchFor } from './leg-request.js';

/** One instance runs prefill and decode: one leg, relayed as it comes. */
export function runSingle(
  attempt: Attempt,
  route: Extract<Route, { kind: 'single' }>,
): Promise<MotorError | null> {
  const leg = attempt.open(route.instance, 'single', {
    body: attempt.body,
    dispatch: dispatchFor(attempt.ids, 'single', route),
  });
  return relayDecode(attempt, leg, null);
}
