import type { Logger } from '../../../common/logger.js';
import { buildDispatchStopRequest, type DispatchStopReason } from '../../../protocol/index.js';
import type { Attempt } from './attempt.js';
import type { LegTransports, StopOrder } from '../transport/leg-transport.js';

/**
 * Stops both instances of a failed attempt's route, each through its transport (engine proxy:
 * `POST /v1/dispatch/stop`; stock engine: the closed connection plus its abort call). Fire and forget.
 */
export function stopLegs(
  attempt: Attempt,
  reason: DispatchStopReason,
  transports: LegTransports,
  log: Logger,
): void {
  const { route, ids } = attempt;
  const order: StopOrder = {
    ids,
    reason,
    body: JSON.stringify(
      buildDispatchStopRequest({
        root_request_id: ids.rootRequestId,
        engine_request_id: ids.engineRequestId,
        attempt_seq: ids.attemptSeq,
        pair_id: ids.pairId,
        reason,
        sent_at_ms: Date.now(),
      }),
    ),
    obs: attempt.ctx.obs,
    opened: (instance) => attempt.legs.some((leg) => leg.instance === instance),
  };
  if (route.kind === 'pd') {
    transports.for(route.prefill).stop(route.prefill, order);
    transports.for(route.decode).stop(route.decode, order);
  } else {
    transports.for(route.instance).stop(route.instance, order);
  }
  log.info(
    {
      root_request_id: ids.rootRequestId,
      attempt_seq: ids.attemptSeq,
      pair_id: ids.pairId,
      reason,
      code: attempt.failure?.code,
    },
    'attempt stopped',
  );
}
