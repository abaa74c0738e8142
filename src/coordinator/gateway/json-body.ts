import type { IncomingMessage, ServerResponse } from 'node:http';
import { BodyTooLargeError, parseJson, readBody } from '../../common/http.js';
import { MotorError } from '../motor-error.js';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../../common/body-reader.js';

export type JsonBody = { value: unknown } | { error: MotorError; headers?: Record<string, string> } | null;

/** The parsed body, or the error to answer with; null when the client went away mid-body. */
export async function readJsonBody(
  req: IncomingMessage,
  res: ServerResponse,
  maxBodyBytes: number,
): Promise<JsonBody> {
  let buf: Buffer;
  try {
    buf = await readBody(req, maxBodyBytes);
  } catch (err) {
    if (err instanceof BodyTooLargeError)
      return { error: new MotorError('body_too_large', err.message), headers: { connection: 'close' } };
    res.destroy();
    return null;
  }
  const parsed = parseJson(buf);
  if (!parsed.ok) return { error: new MotorError('invalid_request', parsed.message) };
  // JSON.parse accepts any depth, but re-serialising a very deep body overflows the stack (500).
  if (nestedDeeperThan(parsed.value, MAX_JSON_DEPTH)) {
    return {
      error: new MotorError('invalid_request', `request body is nested deeper than ${MAX_JSON_DEPTH} levels`),
    };
  }
  return { value: parsed.value };
}
