import type { ServerResponse } from 'node:http';
import { sendJson } from '../../../common/http.js';
import type { MotorError } from '../../../common/motor-error.js';
import { event } from './stream-events.js';

/**
 * Anthropic's error `type` per HTTP status (docs.anthropic.com/en/api/errors; the SDK's
 * `ErrorType` union in `@anthropic-ai/sdk` 1.17 resources/shared.d.ts). Motor's 503 (no capacity) is
 * Anthropic's `overloaded_error`; Anthropic itself sends that with 529.
 */
export function anthropicErrorType(status: number): string {
  if (status === 400 || status === 405 || status === 422) return 'invalid_request_error';
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 503 || status === 529) return 'overloaded_error';
  if (status === 504) return 'timeout_error';
  return 'api_error';
}

export const anthropicErrorBody = (err: MotorError): Record<string, unknown> => ({
  type: 'error',
  error: { type: anthropicErrorType(err.status), message: err.message },
});

/** `{"type":"error","error":{"type","message"}}` with the error's status. */
export function renderAnthropicError(
  res: ServerResponse,
  err: MotorError,
  headers: Readonly<Record<string, string>> = {},
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, err.status, anthropicErrorBody(err), { ...headers });
}

/** The `error` event that ends a committed Messages stream. */
export const anthropicStreamError = (err: MotorError): string => event('error', anthropicErrorBody(err));
