import { isPlainObject } from '../../../common/http.js';
import { stopResultOf } from '../../../observability/dispatch-observer.js';
import {
  MOTOR_DISPATCH_KEY,
  MOTOR_PREFILL_RESULT_KEY,
  matchesDispatch,
  parsePrefillResult,
  PREFILL_RESULT_OBJECT,
  type PrefillResult,
} from '../../../protocol/index.js';
import type { Instance } from '../../fleet/instance-source.js';
import type { MotorError } from '../../../common/motor-error.js';
import type { PdFlow } from '../../scheduling-bridge/route.js';
import { legBody, type AttemptIds, type LegInput, type LegRequest } from './leg-request.js';
import {
  prefillProtocolError,
  type LegTransport,
  type StopOrder,
  type TransportDeps,
} from './leg-transport.js';

/** Legs to a Motor engine proxy: the client body plus the Motor envelope; stops via `/v1/dispatch/stop`. */
export class ProxyTransport implements LegTransport {
  constructor(private readonly deps: TransportDeps) {}

  request(_instance: Instance, input: LegInput): LegRequest {
    const body: Record<string, unknown> = { ...input.body, [MOTOR_DISPATCH_KEY]: input.dispatch };
    if (input.prefillResult) body[MOTOR_PREFILL_RESULT_KEY] = input.prefillResult;
    const headers = { 'x-request-id': input.dispatch.engine_request_id, ...this.deps.peerSecrets?.header };
    return { body: legBody(body, input.source), headers };
  }

  /** The proxy answers a bare PrefillResult, or a response object carrying one under its key. */
  prefillResult(
    instance: Instance,
    json: unknown,
    ids: AttemptIds,
    flow: PdFlow,
  ): PrefillResult | MotorError {
    const candidate =
      isPlainObject(json) && json.object !== PREFILL_RESULT_OBJECT && MOTOR_PREFILL_RESULT_KEY in json
        ? json[MOTOR_PREFILL_RESULT_KEY]
        : json;
    const parsed = parsePrefillResult(candidate, '');
    if (!parsed.ok) {
      return prefillProtocolError(
        instance,
        `invalid PrefillResult: ${parsed.error.path}: ${parsed.error.message}`,
      );
    }
    const result = parsed.value;
    const ours = { root_request_id: ids.rootRequestId, pair_id: ids.pairId, attempt_seq: ids.attemptSeq };
    if (!matchesDispatch(result, ours))
      return prefillProtocolError(instance, 'PrefillResult belongs to another attempt');
    // skipped: the prefill engine kept no KV (vLLM `kv_transfer_params: null`); the decode recomputes.
    if (flow === 'handoff' && (result.status === 'prepared' || result.handoff_mode !== 'handoff')) {
      return prefillProtocolError(
        instance,
        `expected a completed or skipped handoff result, got ${result.status}/${result.handoff_mode}`,
      );
    }
    return result;
  }

  stop(instance: Instance, order: StopOrder): void {
    const { upstreams, stopMs, log, peerSecrets } = this.deps;
    const headers = peerSecrets?.header ?? {};
    void upstreams.postJson(instance, '/v1/dispatch/stop', order.body, stopMs, { headers }).then((r) => {
      order.obs.stopResult(order.reason, stopResultOf(r));
      if ('error' in r || r.status !== 200) {
        log.warn(
          { instance: instance.id, root_request_id: order.ids.rootRequestId, result: r },
          'dispatch stop failed',
        );
      }
    });
  }

  triggerMetaserverUrl(): null {
    return null; // the decode's engine proxy calls the prefill's engine proxy
  }

  passThroughHeaders(): Readonly<Record<string, string>> {
    return this.deps.peerSecrets?.header ?? {};
  }
}
