import type { ServerResponse } from 'node:http';
import { sendError } from '../../common/http.js';
import type { MotorError } from '../motor-error.js';

/** Renders a gateway error as `{"error":{…}}` (a response already under way is cut instead). */
export function renderError(
  res: ServerResponse,
  err: MotorError,
  extraHeaders: Record<string, string> = {},
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  for (const [k, v] of Object.entries(extraHeaders)) res.setHeader(k, v);
  sendError(res, err.status, err.message, err.type, err.param, err.code);
}
