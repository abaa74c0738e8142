import type { IncomingMessage, ServerResponse } from 'node:http';
import { BodyTooLargeError, readBody } from '../common/http.js';
import { ProxyError, sendError } from './proxy-error.js';

/** The whole request body, or null after answering 413 (or when the client went away). */
export async function readBodyOrRefuse(
  req: IncomingMessage,
  res: ServerResponse,
  maxBodyBytes: number,
): Promise<Buffer | null> {
  try {
    return await readBody(req, maxBodyBytes);
  } catch (err) {
    if (err instanceof BodyTooLargeError) {
      // The rest of the body is never read, so the connection cannot carry another request.
      res.setHeader('connection', 'close');
      sendError(res, new ProxyError('body_too_large', err.message));
    }
    return null;
  }
}
