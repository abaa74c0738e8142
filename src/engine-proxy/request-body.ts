import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BodyReader } from '../common/body-reader.js';
import { HttpError } from '../common/http-error.js';

/**
 * The whole request body, read with the proxy's limits; its refusals (413, client gone) are thrown
 * for the HTTP frame. A 413 also sets `connection: close` (the rest of the body is never read, so the
 * connection cannot carry another request) on the response itself, so that it stays the first header
 * of the answer as it always was (an error's own headers are written after `content-type`).
 */
export async function readRequestBody(
  bodies: BodyReader,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<Buffer> {
  try {
    return await bodies.raw(req);
  } catch (err) {
    if (err instanceof HttpError && err.status === 413) res.setHeader('connection', 'close');
    throw err;
  }
}

/** `readRequestBody`, parsed as JSON (invalid JSON is refused with a 400, thrown for the frame). */
export async function readRequestJson(
  bodies: BodyReader,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<unknown> {
  return bodies.parseJson(await readRequestBody(bodies, req, res));
}
