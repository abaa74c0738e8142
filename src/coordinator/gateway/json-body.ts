import type { IncomingMessage } from 'node:http';
import type { BodyReader } from '../../common/body-reader.js';
import { HttpError } from '../../common/http-error.js';
import { MotorError } from '../../common/motor-error.js';

export type JsonBody = { value: unknown } | { error: MotorError; headers?: Readonly<Record<string, string>> };

/**
 * The parsed body, or the refusal to answer with as a `MotorError` (413 with `connection: close`,
 * 400 for invalid or too deeply nested JSON), so routes count it like their other refusals. A client
 * gone mid-body throws `ClientGoneError`: the HTTP frame destroys the response.
 */
export async function readJsonBody(bodies: BodyReader, req: IncomingMessage): Promise<JsonBody> {
  try {
    return { value: await bodies.json(req) };
  } catch (err) {
    if (!(err instanceof HttpError)) throw err;
    if (err.status === 413) {
      // Motor's own limit, named so it is not mistaken for an engine's
      const message = `${err.message} (the coordinator's limit, server.maxBodyBytes)`;
      return { error: new MotorError('body_too_large', message), headers: err.headers };
    }
    return { error: new MotorError('invalid_request', err.message), headers: err.headers };
  }
}
