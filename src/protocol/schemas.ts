import { z } from 'zod';
import { MOTOR_DISPATCH_SCHEMA_VERSION, PREFILL_RESULT_OBJECT } from './constants.js';
import {
  DispatchRole,
  DispatchStopReason,
  DispatchStopState,
  enumValues,
  isDispatchStopReason,
  PrefillHandoffMode,
  PrefillResultStatus,
} from './enums.js';

/**
 * Zod schemas mirroring the seed's pydantic models: same keys (snake_case, as on the wire), same
 * defaults, same bounds. Unknown keys are dropped, as pydantic's default `extra="ignore"` does.
 */

const SUPPORTED_MAJOR = MOTOR_DISPATCH_SCHEMA_VERSION.split('.', 1)[0];

function schemaVersion(what: string) {
  return z
    .string()
    .default(MOTOR_DISPATCH_SCHEMA_VERSION)
    .refine((value) => value.split('.', 1)[0] === SUPPORTED_MAJOR, {
      error: (issue) => `Unsupported ${what} schema major version: ${String(issue.input)}`,
    });
}

const nonEmpty = (): z.ZodString => z.string().min(1);
const nonNegativeInt = (): z.ZodInt => z.int().min(0);
const jsonObject = (): z.ZodRecord<z.ZodString, z.ZodUnknown> => z.record(z.string(), z.unknown());

export const dispatchEndpointSchema = z
  .object({
    instance_id: nonNegativeInt().describe('Scheduler instance identifier for the target engine'),
    endpoint_id: nonNegativeInt().describe('Endpoint identifier within the instance'),
    url: nonEmpty().describe('Base HTTP URL for dispatch and stop calls to the engine'),
  })
  .describe('Network location of a scheduled engine endpoint for cross-engine dispatch');

export const dispatchEndpointsSchema = z
  .object({
    prefill: dispatchEndpointSchema
      .nullable()
      .default(null)
      .describe('Prefill engine endpoint; omitted for decode-only or single-node roles'),
    decode: dispatchEndpointSchema
      .nullable()
      .default(null)
      .describe('Decode engine endpoint; omitted for prefill-only or single-node roles'),
  })
  .describe('Paired prefill and decode endpoints for a single P/D dispatch attempt');

export const motorDispatchSchema = z
  .object({
    schema_version: schemaVersion('motor dispatch').describe(
      'Dispatch envelope schema version; major version must match coordinator support',
    ),
    root_request_id: nonEmpty().describe('Client-visible request id assigned by the coordinator'),
    engine_request_id: nonEmpty().describe(
      'Per-attempt engine request id, typically `{root_request_id}#a{attempt_seq}`',
    ),
    pair_id: nonEmpty().describe('Stable id linking prefill and decode peers for one attempt'),
    attempt_seq: z.int().min(1).describe('Monotonic attempt index within a root request, starting at 1'),
    role: z
      .enum(enumValues(DispatchRole))
      .describe('Engine role handling this request: prefill, decode, or single'),
    dispatch_mode: nonEmpty().describe(
      'Coordinator dispatch plan name, e.g. concurrent_engine_sync or prefill_handoff_decode',
    ),
    endpoints: dispatchEndpointsSchema.describe(
      'Peer endpoint addresses used for stop signals and handoff coordination',
    ),
  })
  .describe('Motor metadata embedded in inference request bodies under `_motor_dispatch`');

export const prefillResultSchema = z
  .object({
    object: z
      .string()
      .default(PREFILL_RESULT_OBJECT)
      .describe('Object type discriminator for prefill results'),
    schema_version: schemaVersion('motor prefill result').describe(
      'Prefill result schema version; major version must match coordinator support',
    ),
    root_request_id: nonEmpty().describe('Client-visible request id assigned by the coordinator'),
    engine_request_id: nonEmpty().describe(
      'Per-attempt engine request id correlated with the paired MotorDispatch',
    ),
    pair_id: nonEmpty().describe('Stable id linking prefill and decode peers for one attempt'),
    attempt_seq: z.int().min(1).describe('Monotonic attempt index within a root request, starting at 1'),
    status: z
      .enum(enumValues(PrefillResultStatus))
      .describe('Whether prefill was prepared, completed, or skipped'),
    handoff_mode: z
      .enum(enumValues(PrefillHandoffMode))
      .describe('Trigger, handoff, or bootstrap coordination mode'),
    payload: jsonObject()
      .default(() => ({}))
      .describe('Engine-specific prefill handoff data, e.g. KV handles'),
    usage: jsonObject()
      .nullable()
      .default(null)
      .describe(
        'Prefill usage block (carries prompt_tokens_details for cached-token reporting); kept separate from ' +
          'payload because payload is consumed verbatim as kv_transfer_params',
      ),
    expires_at_ms: nonNegativeInt()
      .nullable()
      .default(null)
      .describe('Optional Unix timestamp in milliseconds after which the cached result is stale'),
  })
  .describe('Prefill output envelope embedded under `_motor_prefill_result` for handoff decode');

export const dispatchStopRequestSchema = z
  .object({
    root_request_id: nonEmpty().describe('Client-visible request id assigned by the coordinator'),
    engine_request_id: z
      .string()
      .nullable()
      .default(null)
      .describe('Optional per-attempt engine request id for finer-grained stop matching'),
    attempt_seq: z.int().min(1).describe('Attempt index within the root request to stop'),
    pair_id: nonEmpty().describe('Pair id linking the prefill and decode peers for the attempt'),
    reason: z
      .string()
      .default(DispatchStopReason.OTHER)
      .describe('Why the stop was requested; normalized via normalizedReason()'),
    sent_at_ms: nonNegativeInt()
      .nullable()
      .default(null)
      .describe('Optional Unix timestamp in milliseconds when the stop request was sent'),
  })
  .describe('Request body for coordinator-initiated peer engine stop');

export const dispatchStopResponseSchema = z
  .object({
    root_request_id: z.string().describe('Client-visible request id echoed from the stop request'),
    attempt_seq: z.int().describe('Attempt index echoed from the stop request'),
    accepted: z.boolean().describe('Whether the engine accepted and processed the stop request'),
    state: z
      .enum(enumValues(DispatchStopState))
      .describe('Current attempt state after processing the stop request'),
    message: z.string().default('').describe('Optional human-readable detail about the stop outcome'),
  })
  .describe('Response body confirming whether a dispatch stop was accepted');

export type DispatchEndpoint = z.output<typeof dispatchEndpointSchema>;
export type DispatchEndpoints = z.output<typeof dispatchEndpointsSchema>;
export type MotorDispatch = z.output<typeof motorDispatchSchema>;
export type PrefillResult = z.output<typeof prefillResultSchema>;
export type DispatchStopRequest = z.output<typeof dispatchStopRequestSchema>;
export type DispatchStopResponse = z.output<typeof dispatchStopResponseSchema>;

/** Inputs accepted by the serialisers: defaulted fields may be left out. */
export type MotorDispatchInput = z.input<typeof motorDispatchSchema>;
export type PrefillResultInput = z.input<typeof prefillResultSchema>;
export type DispatchStopRequestInput = z.input<typeof dispatchStopRequestSchema>;
export type DispatchStopResponseInput = z.input<typeof dispatchStopResponseSchema>;

/** The seed's `PrefillResult.matches_dispatch`. */
export function matchesDispatch(
  result: Pick<PrefillResult, 'root_request_id' | 'pair_id' | 'attempt_seq'>,
  dispatch: Pick<MotorDispatch, 'root_request_id' | 'pair_id' | 'attempt_seq'>,
): boolean {
  return (
    result.root_request_id === dispatch.root_request_id &&
    result.pair_id === dispatch.pair_id &&
    result.attempt_seq === dispatch.attempt_seq
  );
}

/** The seed's `DispatchStopRequest.normalized_reason`: unknown reasons become `other`. */
export function normalizedReason(request: Pick<DispatchStopRequest, 'reason'>): DispatchStopReason {
  return isDispatchStopReason(request.reason) ? request.reason : DispatchStopReason.OTHER;
}
