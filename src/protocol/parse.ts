import type { z } from 'zod';
import {
  dispatchEndpointSchema,
  dispatchEndpointsSchema,
  dispatchStopRequestSchema,
  dispatchStopResponseSchema,
  motorDispatchSchema,
  prefillResultSchema,
  type DispatchEndpoint,
  type DispatchEndpoints,
  type DispatchStopRequest,
  type DispatchStopRequestInput,
  type DispatchStopResponse,
  type DispatchStopResponseInput,
  type MotorDispatch,
  type MotorDispatchInput,
  type PrefillResult,
  type PrefillResultInput,
} from './schemas.js';

/** A validation failure naming the offending field, e.g. `_motor_dispatch.attempt_seq`. */
export interface ProtocolIssue {
  /** Dotted path from the root given to the parser (`prefix`), e.g. `_motor_dispatch.endpoints.prefill.url`. */
  path: string;
  message: string;
}

export type ParseResult<T> =
  { ok: true; value: T } | { ok: false; error: ProtocolIssue; issues: ProtocolIssue[] };

function formatPath(prefix: string, path: readonly PropertyKey[]): string {
  let out = prefix;
  for (const key of path) {
    out += typeof key === 'number' ? `[${key}]` : out === '' ? String(key) : `.${String(key)}`;
  }
  return out === '' ? '(root)' : out;
}

function parseWith<T>(schema: z.ZodType<T>, input: unknown, prefix: string): ParseResult<T> {
  const result = schema.safeParse(input);
  if (result.success) return { ok: true, value: result.data };
  const issues = result.error.issues.map((issue) => ({
    path: formatPath(prefix, issue.path),
    message: issue.message,
  }));
  return { ok: false, error: issues[0]!, issues };
}

/** One-line text for an error response: `field: message`. */
export function describeIssue(issue: ProtocolIssue): string {
  return `${issue.path}: ${issue.message}`;
}

export const parseDispatchEndpoint = (input: unknown, prefix = ''): ParseResult<DispatchEndpoint> =>
  parseWith(dispatchEndpointSchema, input, prefix);
export const parseDispatchEndpoints = (input: unknown, prefix = ''): ParseResult<DispatchEndpoints> =>
  parseWith(dispatchEndpointsSchema, input, prefix);
export const parseMotorDispatch = (input: unknown, prefix = '_motor_dispatch'): ParseResult<MotorDispatch> =>
  parseWith(motorDispatchSchema, input, prefix);
export const parsePrefillResult = (
  input: unknown,
  prefix = '_motor_prefill_result',
): ParseResult<PrefillResult> => parseWith(prefillResultSchema, input, prefix);
export const parseDispatchStopRequest = (input: unknown, prefix = ''): ParseResult<DispatchStopRequest> =>
  parseWith(dispatchStopRequestSchema, input, prefix);
export const parseDispatchStopResponse = (input: unknown, prefix = ''): ParseResult<DispatchStopResponse> =>
  parseWith(dispatchStopResponseSchema, input, prefix);

class ProtocolValidationError extends Error {
  constructor(readonly issue: ProtocolIssue) {
    super(describeIssue(issue));
    this.name = 'ProtocolValidationError';
  }
}

function build<T>(schema: z.ZodType<T>, input: unknown, what: string): T {
  const result = parseWith(schema, input, what);
  if (!result.ok) throw new ProtocolValidationError(result.error);
  return result.value;
}

/**
 * Builders for Motor's own messages: validate, fill defaults, and return the object with exactly the
 * seed's keys in the seed's order (so `JSON.stringify` of it is what pydantic's `model_dump_json` emits).
 * They throw on invalid input: a malformed message built by Motor itself is a bug, not bad input.
 */
export const buildMotorDispatch = (input: MotorDispatchInput): MotorDispatch =>
  build(motorDispatchSchema, input, '_motor_dispatch');
export const buildPrefillResult = (input: PrefillResultInput): PrefillResult =>
  build(prefillResultSchema, input, '_motor_prefill_result');
export const buildDispatchStopRequest = (input: DispatchStopRequestInput): DispatchStopRequest =>
  build(dispatchStopRequestSchema, input, 'stop request');
export const buildDispatchStopResponse = (input: DispatchStopResponseInput): DispatchStopResponse =>
  build(dispatchStopResponseSchema, input, 'stop response');

export { ProtocolValidationError };
