import { HttpError, type ThrowableHttpError } from './http-error.js';

/**
 * The errors the HTTP frame itself produces, one factory each, so every server states its wording in
 * one place. Called only on error paths. The defaults are the gateway's wording and codes; a server
 * overrides what it answers differently (`frameErrors({...})`).
 */
export interface FrameErrors {
  /** No route for the path. */
  notFound(method: string, path: string): ThrowableHttpError;
  /** The path has routes, not for this method; `allow` is the `Allow` header value. */
  methodNotAllowed(method: string, path: string, allow: string): ThrowableHttpError;
  bodyTooLarge(limitBytes: number): ThrowableHttpError;
  /** `message` is the parser's, prefixed: `invalid JSON body: …`. */
  invalidJson(message: string): ThrowableHttpError;
  tooDeep(maxDepth: number): ThrowableHttpError;
  /** More JSON keys than the server parses (found before parsing). */
  tooManyKeys(maxKeys: number): ThrowableHttpError;
  /** A body's arrival outgrew what the server's body budget (or the client's share of it) had left. */
  overBodyBudget(): ThrowableHttpError;
  /** A body arrived slower than the server's minimum upload rate; the rest is not read. */
  uploadTooSlow(rate: { bytesPerSecond: number; windowMs: number }): ThrowableHttpError;
  /** Anything unexpected a handler threw (logged by the frame). */
  internal(): ThrowableHttpError;
}

/** The rest of an oversized body is not read: the connection cannot be reused. */
const CLOSE = Object.freeze({ connection: 'close' });

export const DEFAULT_FRAME_ERRORS: FrameErrors = Object.freeze({
  notFound: (method: string, path: string) =>
    new HttpError(404, `no route for ${method} ${path}`, { code: 'not_found' }),
  methodNotAllowed: (method: string, path: string, allow: string) =>
    new HttpError(405, `method ${method} not allowed on ${path}`, {
      code: 'method_not_allowed',
      headers: { allow },
    }),
  bodyTooLarge: (limitBytes: number) =>
    new HttpError(413, `request body exceeds ${limitBytes} bytes`, {
      code: 'body_too_large',
      headers: CLOSE,
    }),
  invalidJson: (message: string) => new HttpError(400, message, { code: 'invalid_request' }),
  tooDeep: (maxDepth: number) =>
    new HttpError(400, `request body is nested deeper than ${maxDepth} levels`, { code: 'invalid_request' }),
  tooManyKeys: (maxKeys: number) =>
    new HttpError(413, `request body has more than ${maxKeys} JSON keys`, {
      code: 'body_too_large',
    }),
  overBodyBudget: () =>
    new HttpError(503, 'server overloaded: request bodies in flight use the whole body budget', {
      code: 'overloaded',
      headers: { connection: 'close', 'retry-after': '1' },
    }),
  uploadTooSlow: (rate: { bytesPerSecond: number; windowMs: number }) =>
    new HttpError(
      408,
      `request body arrived slower than ${rate.bytesPerSecond} bytes/s over ${rate.windowMs} ms`,
      { code: 'upload_too_slow', headers: CLOSE },
    ),
  internal: () => new HttpError(500, 'internal error', { code: 'internal' }),
});

/** The default errors with a server's own wording for some of them. */
export function frameErrors(overrides: Partial<FrameErrors>): FrameErrors {
  return { ...DEFAULT_FRAME_ERRORS, ...overrides };
}
