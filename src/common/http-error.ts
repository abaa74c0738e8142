import type { ServerResponse } from 'node:http';
import { errorTypeForStatus, sendJson, openAiError } from './http.js';

/**
 * Anything the HTTP frame can render as `{"error":{"message","type","param","code"}}`. `HttpError`
 * is the frame's own; domain errors with the same fields (the coordinator's `MotorError`, the
 * registry's `RegistryError`) fit as they are.
 */
export interface RenderableError {
  readonly status: number;
  readonly message: string;
  /** OpenAI error type; by default derived from the status (`errorTypeForStatus`). */
  readonly type?: string;
  readonly param?: string | null;
  readonly code?: string | number | null;
  /** Extra response headers, e.g. `allow`, `www-authenticate`, `connection: close`. */
  readonly headers?: Readonly<Record<string, string>>;
}

/** An error that can be thrown and then rendered. */
export type ThrowableHttpError = Error & RenderableError;

export interface HttpErrorDetails {
  type?: string;
  param?: string | null;
  code?: string | number | null;
  headers?: Readonly<Record<string, string>>;
}

/** The frame's error: thrown by handlers or the body reader, rendered by the frame. */
export class HttpError extends Error implements RenderableError {
  readonly type: string | undefined;
  readonly param: string | null;
  readonly code: string | number | null;
  readonly headers: Readonly<Record<string, string>> | undefined;

  constructor(
    readonly status: number,
    message: string,
    details: HttpErrorDetails = {},
  ) {
    super(message);
    this.name = 'HttpError';
    this.type = details.type;
    this.param = details.param ?? null;
    this.code = details.code ?? null;
    this.headers = details.headers;
  }
}

/**
 * Answers with the error, or destroys the response when its headers are already out. The error's own
 * headers and `extraHeaders` (e.g. a `www-authenticate` challenge shared by every 401) are set first,
 * ahead of `content-type` and `content-length`, where every server always wrote them.
 */
export function renderError(
  res: ServerResponse,
  err: RenderableError,
  extraHeaders?: Readonly<Record<string, string>>,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (err.headers !== undefined) setHeaders(res, err.headers);
  if (extraHeaders !== undefined) setHeaders(res, extraHeaders);
  const body = openAiError(
    err.message,
    err.type ?? errorTypeForStatus(err.status),
    err.param ?? null,
    err.code ?? null,
  );
  sendJson(res, err.status, body);
}

function setHeaders(res: ServerResponse, headers: Readonly<Record<string, string>>): void {
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
}
