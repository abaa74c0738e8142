import type { IncomingMessage } from 'node:http';
import type { BodyAllowance, BodyReader } from '../../common/body-reader.js';
import { frameErrors } from '../../common/frame-errors.js';
import { HttpError, type ThrowableHttpError } from '../../common/http-error.js';
import { jsonSource, type JsonSource } from '../../common/json-splice.js';
import { ERROR_CODES, MotorError, type MotorErrorCode } from '../../common/motor-error.js';

export interface BodyRefusal {
  error: MotorError;
  headers?: Readonly<Record<string, string>>;
}
/** The parsed body and, when its bytes can stand for it, its source for splicing leg bodies. */
export type JsonBody = { value: unknown; source: JsonSource | null } | BodyRefusal;

/** The gateway's body refusals, each naming the setting that decides it (not mistaken for an engine's). */
export const GATEWAY_BODY_ERRORS = frameErrors({
  bodyTooLarge: (limit) =>
    new HttpError(413, `request body exceeds ${limit} bytes (the coordinator's limit, server.maxBodyBytes)`, {
      code: 'body_too_large',
      headers: { connection: 'close' },
    }),
  tooManyKeys: (limit) =>
    new HttpError(413, `request body has more than ${limit} JSON keys (server.maxJsonKeys)`, {
      code: 'body_too_large',
    }),
  uploadTooSlow: (rate) =>
    new HttpError(
      408,
      `request body arrived slower than ${rate.bytesPerSecond} bytes/s over ${rate.windowMs} ms (server.minUploadBytesPerSecond)`,
      { code: 'upload_too_slow', headers: { connection: 'close' } },
    ),
  overBodyBudget: () =>
    new HttpError(
      503,
      'server overloaded: request bodies in flight fill server.maxInflightBodyBytes (or this client’s share, server.clientBodyShare); retry later',
      { code: 'overloaded', headers: { connection: 'close', 'retry-after': '1' } },
    ),
});

/** A frame error as the `MotorError` the gateway counts and renders (its status kept). */
export function bodyRefusal(err: ThrowableHttpError): BodyRefusal {
  const code =
    typeof err.code === 'string' && err.code in ERROR_CODES
      ? (err.code as MotorErrorCode)
      : 'invalid_request';
  return { error: new MotorError(code, err.message, { status: err.status }), headers: err.headers };
}

/**
 * The parsed body, or the refusal to answer with as a `MotorError` (413 with `connection: close`,
 * 413 for too many keys, 400 for invalid or too deeply nested JSON, 503 when a body outgrows
 * `allowance` while arriving, 408 when it arrives too slowly), so routes count it like their other refusals. A client gone mid-body throws
 * `ClientGoneError`: the HTTP frame destroys the response. The body's bytes are kept as its
 * `JsonSource` (json-splice.ts): legs copy them instead of serialising the body again.
 */
export async function readJsonBody(
  bodies: BodyReader,
  req: IncomingMessage,
  allowance?: BodyAllowance,
): Promise<JsonBody> {
  const members: number[] = [];
  const body = await readJsonBytes(bodies, req, allowance, members);
  if ('error' in body) return body;
  return { value: body.value, source: jsonSource(body.bytes, members, body.value) };
}

/**
 * The body's bytes and their parse, bounded and refused as {@link readJsonBody}'s, for a route that
 * forwards the bytes themselves. `members` receives the top-level members' offsets when given.
 */
export async function readJsonBytes(
  bodies: BodyReader,
  req: IncomingMessage,
  allowance?: BodyAllowance,
  members?: number[],
): Promise<{ value: unknown; bytes: Buffer } | BodyRefusal> {
  try {
    const bytes = await bodies.raw(req, allowance);
    return { value: bodies.parseJson(bytes, members), bytes };
  } catch (err) {
    if (!(err instanceof HttpError)) throw err;
    return bodyRefusal(err);
  }
}
