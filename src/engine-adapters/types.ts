import type { BootstrapAddress, EngineKind, MotorDispatch, PrefillResult } from '../protocol/index.js';

/**
 * What one engine request does in a P/D attempt. Decided from the engine kind, the envelope's role
 * and its `dispatch_mode` (docs/engines.md):
 *
 * | leg                 | engine | role    | dispatch_mode            |
 * | ------------------- | ------ | ------- | ------------------------ |
 * | `single`            | any    | single  | any                      |
 * | `handoff_prefill`   | vllm   | prefill | prefill_handoff_decode   |
 * | `handoff_decode`    | vllm   | decode  | prefill_handoff_decode   |
 * | `trigger_prefill`   | vllm   | prefill | concurrent_engine_sync   |
 * | `trigger_decode`    | vllm   | decode  | concurrent_engine_sync   |
 * | `bootstrap_prefill` | sglang | prefill | concurrent_engine_sync   |
 * | `bootstrap_decode`  | sglang | decode  | concurrent_engine_sync   |
 */
export type LegKind =
  | 'single'
  | 'handoff_prefill'
  | 'handoff_decode'
  | 'trigger_prefill'
  | 'trigger_decode'
  | 'bootstrap_prefill'
  | 'bootstrap_decode';

/** A refusal that maps onto an OpenAI-style 4xx error; `param` names the offending field. */
export interface AdapterError {
  ok: false;
  status: number;
  message: string;
  param: string | null;
}

export type AdapterResult<T> = ({ ok: true } & T) | AdapterError;

/** Where the SGLang prefill engine listens for bootstrap (KV rendezvous) connections (protocol's type). */
export type { BootstrapAddress };

/**
 * The decode engine's KV fields as sent to the metaserver in the trigger flow (Mooncake layer-wise).
 * All are required; the prefill engine needs them to push KV into the decode's blocks.
 */
export interface MetaserverKvFields {
  request_id: string;
  do_remote_decode: boolean;
  remote_block_ids: number[];
  remote_block_size: number;
  remote_engine_id: string;
  remote_host: string;
  remote_port: number;
  remote_cached_tokens: number;
}

export interface BuildEngineRequestInput {
  /** Client body. `_motor_*` keys are removed by the adapter; the object is not mutated. */
  body: Record<string, unknown>;
  dispatch: MotorDispatch;
  /**
   * Handoff decode: the prefill leg's result: `completed` (its `payload` becomes `kv_transfer_params`)
   * or `skipped` (no KV to read: a plain decode).
   */
  prefillResult?: PrefillResult | null;
  /** Trigger prefill, run when the metaserver call arrives: the decode engine's KV fields. */
  triggerKv?: MetaserverKvFields | null;
  /** Trigger decode: metaserver URL; default `<endpoints.prefill.url>/v1/metaserver`. */
  metaserverUrl?: string | null;
  /** Bootstrap legs: the prefill engine's bootstrap address (both legs use the same one). */
  bootstrap?: BootstrapAddress | null;
}

/** An engine-native request: send `body` (may contain a bigint: serialise with `stringifyWithBigInt`). */
export interface EngineRequest {
  body: Record<string, unknown>;
  headers: Record<string, string>;
}

/** The engine's non-stream prefill response, reduced to what a `PrefillResult` carries. */
export interface ParsedPrefill {
  payload: Record<string, unknown>;
  usage: Record<string, unknown> | null;
  /**
   * The engine finished the prefill but handed over no KV (vLLM handoff: `kv_transfer_params: null`):
   * a `skipped` PrefillResult, and the decode runs without KV params (it recomputes the prompt).
   */
  skipped?: true;
}

/** How to abort one engine request. */
export interface AbortPlan {
  /** Always true: closing the upstream connection is how vLLM (and SGLang) notice a gone client. */
  closeConnection: true;
  /** An extra HTTP call to make on the engine (SGLang: `POST /abort_request {rid}`), or null. */
  request: { method: 'POST'; path: string; body: Record<string, unknown> } | null;
}

/**
 * Per-engine translation of the Motor protocol into engine-native requests (docs/engines.md).
 *
 * Adapters are pure: no I/O, no clocks, no HTTP server state. The engine proxy uses them, and the
 * coordinator can use them for "direct mode" (talking to stock engines without a proxy):
 *
 * ```ts
 * const adapter = engineAdapterFor('vllm');
 * const leg = adapter.legFor(dispatch);                 // e.g. { ok: true, leg: 'handoff_prefill' }
 * const req = adapter.buildEngineRequest(leg.leg, { body, dispatch });
 * // POST stringifyWithBigInt(req.body) with req.headers to the engine
 * const parsed = adapter.parsePrefillResponse(engineJson); // handoff/bootstrap prefill only
 * const abort = adapter.abortPlan(dispatch.engine_request_id); // close + optional HTTP call
 * ```
 */
export interface EngineAdapter {
  readonly kind: EngineKind;
  /** Body key carrying the engine request id: `request_id` (vLLM) or `rid` (SGLang). */
  readonly requestIdField: 'request_id' | 'rid';
  /**
   * Client-body keys an engine would act on for P/D; refused when they come next to an envelope
   * (the envelope is the only way to steer this engine's KV transfer).
   */
  readonly reservedFields: readonly string[];
  /** Which leg a dispatch asks this engine for, or a 400 naming `_motor_dispatch.*`. */
  legFor(dispatch: Pick<MotorDispatch, 'role' | 'dispatch_mode'>): AdapterResult<{ leg: LegKind }>;
  /** The engine-native body and headers for one leg. */
  buildEngineRequest(leg: LegKind, input: BuildEngineRequestInput): AdapterResult<EngineRequest>;
  /** Reads payload and usage from the engine's JSON answer to a prefill leg. */
  parsePrefillResponse(leg: LegKind, responseBody: unknown): AdapterResult<ParsedPrefill>;
  /** How to abort the engine request with this id. */
  abortPlan(engineRequestId: string): AbortPlan;
}
