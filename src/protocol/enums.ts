/**
 * The seed's enums as frozen value maps plus string-literal union types: the values are the wire
 * strings, so a parsed JSON value can be used directly without conversion.
 */
type ValueOf<T> = T[keyof T];

/** Coordinator dispatch execution plan for P/D separated inference. */
export const DispatchPlan = Object.freeze({
  CONCURRENT_ENGINE_SYNC: 'concurrent_engine_sync',
  PREFILL_HANDOFF_DECODE: 'prefill_handoff_decode',
} as const);
export type DispatchPlan = ValueOf<typeof DispatchPlan>;

/** Engine-side P/D coordination profile inferred from kv_transfer configuration. */
export const DispatchProfile = Object.freeze({
  TRIGGER: 'trigger',
  HANDOFF: 'handoff',
  BOOTSTRAP: 'bootstrap',
  UNKNOWN: 'unknown',
} as const);
export type DispatchProfile = ValueOf<typeof DispatchProfile>;

/** Lifecycle status of a prefill handoff result. */
export const PrefillResultStatus = Object.freeze({
  PREPARED: 'prepared',
  COMPLETED: 'completed',
  SKIPPED: 'skipped',
} as const);
export type PrefillResultStatus = ValueOf<typeof PrefillResultStatus>;

/** KV handoff mechanism used between prefill and decode engines. */
export const PrefillHandoffMode = Object.freeze({
  TRIGGER: 'trigger',
  HANDOFF: 'handoff',
  BOOTSTRAP: 'bootstrap',
} as const);
export type PrefillHandoffMode = ValueOf<typeof PrefillHandoffMode>;

/** Reason the coordinator asked a peer engine to stop an in-flight dispatch attempt. */
export const DispatchStopReason = Object.freeze({
  PEER_FAILED: 'peer_failed',
  CLIENT_DISCONNECT: 'client_disconnect',
  TIMEOUT: 'timeout',
  RECOMPUTE: 'recompute',
  RETRY_REPAIR: 'retry_repair',
  OTHER: 'other',
} as const);
export type DispatchStopReason = ValueOf<typeof DispatchStopReason>;

/** Outcome of a `/v1/dispatch/stop` request. */
export const DispatchStopState = Object.freeze({
  STOPPED: 'stopped',
  ALREADY_STOPPED: 'already_stopped',
  ALREADY_DONE: 'already_done',
  NOT_FOUND: 'not_found',
  STALE: 'stale',
} as const);
export type DispatchStopState = ValueOf<typeof DispatchStopState>;

/** Engine role handling a dispatched request. */
export const DispatchRole = Object.freeze({
  PREFILL: 'prefill',
  DECODE: 'decode',
  SINGLE: 'single',
} as const);
export type DispatchRole = ValueOf<typeof DispatchRole>;

export function enumValues<T extends Readonly<Record<string, string>>>(e: T): ValueOf<T>[] {
  return Object.values(e) as ValueOf<T>[];
}

const PLAN_VALUES: ReadonlySet<string> = new Set(enumValues(DispatchPlan));
const STOP_REASON_VALUES: ReadonlySet<string> = new Set(enumValues(DispatchStopReason));

export function isDispatchPlan(value: string): value is DispatchPlan {
  return PLAN_VALUES.has(value);
}

export function isDispatchStopReason(value: string): value is DispatchStopReason {
  return STOP_REASON_VALUES.has(value);
}
