import {
  DEFAULT_HANDOFF_TTL_MS,
  engineAdapterFor,
  handoffTtlMs,
  type LegKind,
} from '../../../engine-adapters/index.js';
import {
  MOTOR_DISPATCH_SCHEMA_VERSION,
  PREFILL_RESULT_OBJECT,
  type PrefillResult,
} from '../../../protocol/index.js';
import type { Instance } from '../../fleet/instance-source.js';
import { MotorError } from '../../../common/motor-error.js';
import type { PdFlow } from '../../scheduling-bridge/route.js';
import { legBody, type AttemptIds, type LegInput, type LegRequest } from './leg-request.js';
import {
  prefillProtocolError,
  type LegTransport,
  type StopOrder,
  type TransportDeps,
} from './leg-transport.js';

const PREFILL_LEG: Record<PdFlow, LegKind> = {
  handoff: 'handoff_prefill',
  trigger: 'trigger_prefill',
  bootstrap: 'bootstrap_prefill',
};

/**
 * Legs to a stock engine: engine-native fields from its adapter (src/engine-adapters/); the
 * coordinator serves the trigger metaserver itself; stopping is closing the connection plus the
 * adapter's abort call, if it has one.
 */
export class DirectTransport implements LegTransport {
  constructor(private readonly deps: TransportDeps) {}

  request(instance: Instance, input: LegInput): LegRequest {
    const adapter = engineAdapterFor(instance.engine);
    const leg = adapter.legFor(input.dispatch);
    if (!leg.ok) throw new MotorError('internal', `${instance.id}: ${leg.message}`);
    const built = adapter.buildEngineRequest(leg.leg, {
      body: input.body,
      dispatch: input.dispatch,
      prefillResult: input.prefillResult ?? null,
      metaserverUrl: input.metaserverUrl ?? null,
      triggerKv: input.triggerKv ?? null,
      bootstrap: input.bootstrap ?? null,
    });
    if (!built.ok) throw new MotorError('internal', `${instance.id}: ${built.message}`);
    return {
      body: legBody(built.body, input.source),
      headers: { ...built.headers, 'x-request-id': input.dispatch.engine_request_id },
    };
  }

  /**
   * The engine's own prefill answer, reduced by its adapter, as a completed (or skipped)
   * PrefillResult. Built as a literal in the schema's key order: every field is Motor's own or the
   * adapter's checked object, so the schema parse `buildPrefillResult` would run (a copy of the
   * payload, per P/D request) is done by the unit test (leg-transport.test.ts).
   */
  prefillResult(
    instance: Instance,
    json: unknown,
    ids: AttemptIds,
    flow: PdFlow,
  ): PrefillResult | MotorError {
    const parsed = engineAdapterFor(instance.engine).parsePrefillResponse(PREFILL_LEG[flow], json);
    if (!parsed.ok) return prefillProtocolError(instance, parsed.message);
    const skipped = parsed.skipped === true;
    return {
      object: PREFILL_RESULT_OBJECT,
      schema_version: MOTOR_DISPATCH_SCHEMA_VERSION,
      root_request_id: ids.rootRequestId,
      engine_request_id: ids.engineRequestId,
      pair_id: ids.pairId,
      attempt_seq: ids.attemptSeq,
      status: skipped ? 'skipped' : 'completed',
      handoff_mode: flow,
      payload: parsed.payload,
      usage: parsed.usage,
      expires_at_ms:
        flow === 'handoff' && !skipped
          ? Date.now() + handoffTtlMs(parsed.payload, DEFAULT_HANDOFF_TTL_MS)
          : null,
    };
  }

  /** Closing the connection (the leg abort) is how vLLM aborts; SGLang also gets its abort call. */
  stop(instance: Instance, order: StopOrder): void {
    if (!order.opened(instance)) return;
    order.obs.stopResult(order.reason, 'connection_closed');
    const plan = engineAdapterFor(instance.engine).abortPlan(order.ids.engineRequestId);
    if (plan.request) {
      const { upstreams, stopMs } = this.deps;
      // SGLang's /abort_request is ADMIN_OPTIONAL: the instance's admin key (config/engine-credentials.ts).
      const body = JSON.stringify(plan.request.body);
      void upstreams.postJson(instance, plan.request.path, body, stopMs, { admin: true });
    }
  }

  triggerMetaserverUrl(token: string): string {
    return `${this.deps.publicUrl()}/v1/metaserver/${token}`;
  }

  /** The engine's own key is added by the upstream pool (instance `apiKey`), as for every leg. */
  passThroughHeaders(): Readonly<Record<string, string>> {
    return {};
  }
}
