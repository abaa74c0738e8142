import { stringifyWithBigInt } from '../common/json-bigint.js';
import {
  engineAdapterFor,
  type BootstrapAddress,
  type MetaserverKvFields,
} from '../engine-adapters/index.js';
import {
  MOTOR_DISPATCH_SCHEMA_VERSION,
  MOTOR_DISPATCH_KEY,
  MOTOR_PREFILL_RESULT_KEY,
  type DispatchEndpoint,
  type MotorDispatch,
  type PrefillResult,
} from '../protocol/index.js';
import type { Instance } from './instance-source.js';
import { MotorError } from './motor-error.js';
import type { Route } from './route-selection.js';

/** Ids of one attempt (DESIGN.md §2). */
export interface AttemptIds {
  rootRequestId: string;
  engineRequestId: string;
  pairId: string;
  attemptSeq: number;
}

export type LegRole = 'prefill' | 'decode' | 'single';

/**
 * The prefill leg's body (conformance 18): `stream:false`, `max_tokens:1`, `max_completion_tokens:1`
 * only when the client sent it, no `stream_options`, no `min_tokens`.
 */
export function prefillShapedBody(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...body, stream: false, max_tokens: 1 };
  if ('max_completion_tokens' in body) out.max_completion_tokens = 1;
  delete out.stream_options;
  delete out.min_tokens;
  return out;
}

function endpoint(instance: Instance): DispatchEndpoint {
  return { instance_id: instance.index, endpoint_id: 0, url: instance.url };
}

/**
 * The envelope of one leg, built as a literal in the seed's key order: every field comes from Motor
 * itself, so the schema check `buildMotorDispatch` would run (~10 µs a leg) is done by the unit test.
 */
export function dispatchFor(ids: AttemptIds, role: LegRole, route: Route): MotorDispatch {
  return {
    schema_version: MOTOR_DISPATCH_SCHEMA_VERSION,
    root_request_id: ids.rootRequestId,
    engine_request_id: ids.engineRequestId,
    pair_id: ids.pairId,
    attempt_seq: ids.attemptSeq,
    role,
    dispatch_mode: route.kind === 'pd' ? route.plan : 'single',
    endpoints:
      route.kind === 'pd'
        ? { prefill: endpoint(route.prefill), decode: endpoint(route.decode) }
        : { prefill: null, decode: null },
  };
}

export interface LegInput {
  /** Client body, already shaped for the leg (prefill legs: `prefillShapedBody`). */
  body: Record<string, unknown>;
  dispatch: MotorDispatch;
  prefillResult?: PrefillResult | null;
  /** Direct trigger decode: the coordinator's own metaserver URL. */
  metaserverUrl?: string | null;
  /** Direct trigger prefill (run from the metaserver): the decode engine's KV fields. */
  triggerKv?: MetaserverKvFields | null;
  bootstrap?: BootstrapAddress | null;
}

export interface LegRequest {
  body: string;
  headers: Record<string, string>;
}

/**
 * The HTTP body for one leg. `mode: proxy`: the client body plus the Motor envelope (the engine proxy
 * translates). `mode: direct`: engine-native fields built by the engine adapter.
 */
export function buildLegRequest(instance: Instance, input: LegInput): LegRequest {
  const headers = { 'x-request-id': input.dispatch.engine_request_id };
  if (instance.mode === 'proxy') {
    const body: Record<string, unknown> = { ...input.body, [MOTOR_DISPATCH_KEY]: input.dispatch };
    if (input.prefillResult) body[MOTOR_PREFILL_RESULT_KEY] = input.prefillResult;
    return { body: JSON.stringify(body), headers };
  }
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
  return { body: stringifyWithBigInt(built.body), headers: { ...built.headers, ...headers } };
}

/** Where an SGLang prefill instance takes bootstrap connections (direct mode). */
export function bootstrapAddressOf(prefill: Instance): BootstrapAddress {
  const url = new URL(prefill.url);
  const port = prefill.bootstrapPort ?? (url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80);
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port };
}
