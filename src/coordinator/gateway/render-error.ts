import type { ServerResponse } from 'node:http';
import { renderError as renderHttpError } from '../../common/http-error.js';
import type { MotorError } from '../../common/motor-error.js';

/**
 * Renders a gateway error as `{"error":{…}}` (a response already under way is cut instead). Extra
 * headers are set on the response first, so they stay ahead of `content-type` as they always were.
 */
export function renderError(
  res: ServerResponse,
  err: MotorError,
  extraHeaders?: Readonly<Record<string, string>>,
): void {
  if (extraHeaders !== undefined && !res.headersSent) {
    for (const [k, v] of Object.entries(extraHeaders)) res.setHeader(k, v);
  }
  renderHttpError(res, err);
}
