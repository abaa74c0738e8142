import { stringifyWithBigInt } from '../../../common/json-bigint.js';
import { spliceJson, type JsonSource } from '../../../common/json-splice.js';
import type { BootstrapAddress, MetaserverKvFields } from '../../../engine-adapters/index.js';
import {
  MOTOR_DISPATCH_SCHEMA_VERSION,
  type DispatchEndpoint,
  type MotorDispatch,
  type PrefillResult,
} from '../../../protocol/index.js';
import type { Instance } from '../../fleet/instance-source.js';
import type { Route } from '../../scheduling-bridge/route.js';
import type { UpstreamBody } from '../../fleet/upstream.js';

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
  /** The client's bytes the leg body is spliced from (set by `Attempt.open`); absent: serialised whole. */
  source?: JsonSource | null;
  dispatch: MotorDispatch;
  prefillResult?: PrefillResult | null;
  /** Direct trigger decode: the coordinator's own metaserver URL. */
  metaserverUrl?: string | null;
  /** Direct trigger prefill (run from the metaserver): the decode engine's KV fields. */
  triggerKv?: MetaserverKvFields | null;
  bootstrap?: BootstrapAddress | null;
}

/** One leg as sent: the serialised body and its headers (`x-request-id`, engine headers). */
export interface LegRequest {
  body: UpstreamBody;
  headers: Record<string, string>;
}

/**
 * A leg's body as sent: spliced from the client's bytes when the leg has them (the members the leg
 * keeps are views of those bytes, the ones it adds or changes serialised: issue 19), else
 * serialised whole.
 */
export function legBody(body: Record<string, unknown>, source: JsonSource | null | undefined): UpstreamBody {
  return source ? spliceJson(source, body) : stringifyWithBigInt(body);
}
