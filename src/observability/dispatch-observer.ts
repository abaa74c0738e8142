import type { IncomingHttpHeaders } from 'node:http';
import type { KvLoadVerdict } from '../engine-adapters/kv-load.js';
import { DispatchStopState, enumValues } from '../protocol/index.js';

/**
 * What the dispatcher tells observability about one client request. The dispatcher calls these at
 * fixed points; metrics, tracing, the access log and the dashboard's recent-request buffer are all
 * implemented behind this interface (src/observability/observability.ts), so the request path holds
 * only one-line calls. Per-chunk work is limited to `chunk()`, which counts SSE frames (no parsing).
 */
export interface DispatchObserver {
  /** A client request reached the dispatcher (validated). */
  requestStart(info: RequestStartInfo): RequestObserver;
  /**
   * A request to an API route was refused by the gateway before dispatch (method, auth, body,
   * validation, admission): `code` is the MotorError code sent with `status`.
   */
  rejected?(path: string, status: number, code: string): void;
}

export interface RequestStartInfo {
  rootRequestId: string;
  /** API path, e.g. `/v1/chat/completions` (a fixed set: safe as a metric label). */
  path: string;
  model: string;
  stream: boolean;
  /** Incoming headers (for `traceparent`). */
  headers: IncomingHttpHeaders;
}

/** A route as chosen for one attempt. */
export interface RouteSummary {
  kind: 'pd' | 'single';
  /** `handoff` | `trigger` | `bootstrap` for P/D; `single` or `single_degraded` otherwise. */
  flow: string;
  prefillId: string | null;
  decodeId: string | null;
}

export type ObservedLegRole = 'prefill' | 'decode' | 'single';

/** `no_kv_params`: the prefill engine returned none; `expired`: its TTL passed before the decode. */
export type PrefillKvSkipReason = 'no_kv_params' | 'expired';

export interface RequestObserver {
  /** A new attempt starts on `route` (a scheduling decision). */
  attempt(seq: number, route: RouteSummary): void;
  /** A leg's HTTP request is about to be sent; may add headers (`traceparent`) to `headers`. */
  legStart(role: ObservedLegRole, instanceId: string, headers: Record<string, string>): LegObserver;
  /** Bytes forwarded to the client for a stream (counted as SSE frames; the first one is the first token). */
  chunk(out: Buffer): void;
  /** The response is committed to the client (status line sent): first byte of a non-stream answer. */
  committed(): void;
  /** The current attempt failed (`reason`: the stop reason sent to its legs). */
  attemptFailed(code: string, reason: string): void;
  /** The attempt `seq` failed before the first byte and a new attempt follows. */
  retry(seq: number, code: string): void;
  /**
   * A handoff prefill on `instanceId` left no KV for the decode to read, which then recomputes the
   * prompt (never a failure of the instance).
   */
  prefillKvSkipped(instanceId: string, reason: PrefillKvSkipReason): void;
  /**
   * The decode of a P/D attempt reported its usage: whether it loaded the KV it was handed
   * (engine-adapters kv-load.ts), once per attempt.
   */
  kvLoad?(prefillId: string, decodeId: string, verdict: KvLoadVerdict): void;
  /** Stops sent for a failed attempt (one per instance); `result` is the engine's stop state or an error class. */
  stopResult(reason: string, result: string): void;
  /**
   * In-flight migration (issue 16) after a committed leg failed with `reason` (an error code):
   * `started`, `resumed` (the continuation's first token reached the client), `refused` (cannot be
   * continued exactly), `exhausted` (migration.maxPerRequest reached).
   */
  migration?(reason: string, outcome: string): void;
  /** Seconds from the failure to the continuation's first token at the client. */
  migrationResumed?(seconds: number): void;
  /**
   * The request is over: the HTTP status sent to the client and the last error the dispatcher saw
   * (which may belong to an earlier attempt when a retry then succeeded).
   */
  end(status: number, errorCode: string | null): void;
}

export interface LegObserver {
  /** First bytes of the leg's answer (decode/single stream: the first data chunk). */
  firstByte(): void;
  /** The leg is over (`errorCode` null: it answered successfully). */
  end(errorCode: string | null): void;
}

const NOOP_LEG: LegObserver = { firstByte() {}, end() {} };
export const noopRequestObserver: RequestObserver = {
  attempt() {},
  legStart: () => NOOP_LEG,
  chunk() {},
  committed() {},
  attemptFailed() {},
  retry() {},
  prefillKvSkipped() {},
  stopResult() {},
  end() {},
};

/** Observes nothing (unit tests, embedders that do not want observability). */
export const noopDispatchObserver: DispatchObserver = { requestStart: () => noopRequestObserver };

export const noopLegObserver: LegObserver = NOOP_LEG;

/** The parts of a scheduling decision that observability reads (the coordinator's `Route` fits). */
export type ObservedRoute =
  | { kind: 'pd'; flow: string; prefill: { id: string }; decode: { id: string } }
  | { kind: 'single'; instance: { id: string }; degraded: boolean };

/** The observable shape of a route (no instance objects). */
export function routeSummary(route: ObservedRoute): RouteSummary {
  if (route.kind === 'pd') {
    return { kind: 'pd', flow: route.flow, prefillId: route.prefill.id, decodeId: route.decode.id };
  }
  return {
    kind: 'single',
    flow: route.degraded ? 'single_degraded' : 'single',
    prefillId: null,
    decodeId: route.instance.id,
  };
}

const STOP_STATES: ReadonlySet<string> = new Set(enumValues(DispatchStopState));

/** A bounded label for the answer to one `/v1/dispatch/stop` call. */
export function stopResultOf(r: { status: number; text: string } | { error: string }): string {
  if ('error' in r) return 'error';
  if (r.status !== 200) return 'http_error';
  try {
    const state = (JSON.parse(r.text) as { state?: unknown }).state;
    return typeof state === 'string' && STOP_STATES.has(state) ? state : 'invalid';
  } catch {
    return 'invalid';
  }
}
