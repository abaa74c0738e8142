import type { ServerResponse } from 'node:http';
import { frameErrors, type FrameErrors } from '../common/frame-errors.js';
import { HttpError, renderError, type RenderableError } from '../common/http-error.js';
import type { AdapterError } from '../engine-adapters/index.js';
import { isUploadRefusal } from '../common/upload-refusal.js';

/**
 * The engine proxy's one error type. Every refusal carries a stable `code`; the table maps it to the
 * HTTP status, the OpenAI error `type`, and whether the code itself goes on the wire (`wire`). Codes
 * on the wire are part of the Motor protocol (the coordinator reads `dispatch_stopped`, and the rest
 * explain a refused attempt); every other refusal answers `"code": null`, as it always has.
 */
export const PROXY_ERROR_CODES = {
  /** Bad JSON, a bad envelope or metaserver body, a field an adapter refuses, a peer not allowed. */
  invalid_request: { status: 400, type: 'invalid_request_error', wire: false },
  /** The envelope's role is not one this proxy's role serves. */
  role_mismatch: { status: 400, type: 'invalid_request_error', wire: true },
  /** The envelope's dispatch_mode is not among this engine's dispatch capabilities. */
  missing_capability: { status: 400, type: 'invalid_request_error', wire: true },
  /** The request target is not origin-form (`*`, `http://host/…`, `//host/…`). */
  bad_request_target: { status: 400, type: 'invalid_request_error', wire: false },
  /** A peer-only route called without the right `x-motor-peer-secret`. */
  unauthenticated: { status: 401, type: 'authentication_error', wire: false },
  not_found: { status: 404, type: 'not_found_error', wire: false },
  body_too_large: { status: 413, type: 'invalid_request_error', wire: false },
  /** The same attempt is already running here. */
  attempt_in_flight: { status: 409, type: 'invalid_request_error', wire: true },
  /** The same attempt already ran to completion (or was stopped) here. */
  attempt_finished: { status: 409, type: 'invalid_request_error', wire: true },
  /** The attempt was stopped (`/v1/dispatch/stop`, a tombstone, or its peer failed). */
  dispatch_stopped: { status: 409, type: 'invalid_request_error', wire: true },
  too_many_attempts: { status: 503, type: 'server_error', wire: true },
  prepared_store_full: { status: 503, type: 'server_error', wire: false },
  /** Connection refused or reset, or the engine's answer broke off. */
  engine_unreachable: { status: 502, type: 'server_error', wire: false },
  /** The engine answered 200 with something a leg cannot use (a prefill without kv_transfer_params). */
  bad_engine_answer: { status: 502, type: 'server_error', wire: false },
  /** A bootstrap decode's prefill peer is unreachable or reported no bootstrap address. */
  peer_unavailable: { status: 502, type: 'server_error', wire: false },
  internal: { status: 500, type: 'server_error', wire: false },
} as const satisfies Record<string, { status: number; type: string; wire: boolean }>;

export type ProxyErrorCode = keyof typeof PROXY_ERROR_CODES;

export class ProxyError extends Error {
  readonly status: number;
  readonly type: string;
  readonly param: string | null;

  constructor(
    readonly code: ProxyErrorCode,
    message: string,
    opts: { param?: string | null; status?: number } = {},
  ) {
    super(message);
    this.name = 'ProxyError';
    this.status = opts.status ?? PROXY_ERROR_CODES[code].status;
    this.type = PROXY_ERROR_CODES[code].type;
    this.param = opts.param ?? null;
  }

  /** An adapter's refusal keeps its status: 4xx blames the request, 5xx the engine's answer. */
  static fromAdapter(err: Pick<AdapterError, 'status' | 'message' | 'param'>): ProxyError {
    const code = err.status >= 500 ? 'bad_engine_answer' : 'invalid_request';
    return new ProxyError(code, err.message, { param: err.param, status: err.status });
  }

  /** `bodyChars`: the length of the body sent; a large upload cut by the engine is the request's (413). */
  static engineUnreachable(cause: unknown, bodyChars = 0): ProxyError {
    if (isUploadRefusal(cause, bodyChars)) {
      const why = `${(cause as { code: string }).code} ${(cause as Error).message}`;
      return new ProxyError(
        'body_too_large',
        `the engine closed the connection while receiving the ${bodyChars}-character request body (${why}): ` +
          "it is probably over the engine's own size limit; send a smaller request",
      );
    }
    return new ProxyError('engine_unreachable', `engine unreachable: ${(cause as Error).message}`);
  }

  /** The `code` of the rendered body: the table's code when it is on the wire, else null. */
  get wireCode(): ProxyErrorCode | null {
    return wireCodeOf(this.code);
  }

  /** The refusal as the HTTP frame renders it (`code` is the table key; the wire gets `wireCode`). */
  get rendered(): RenderableError {
    return {
      status: this.status,
      message: this.message,
      type: this.type,
      param: this.param,
      code: this.wireCode,
    };
  }
}

/** Renders a refusal as `{"error":{"message","type","param","code"}}`, the only way the proxy refuses. */
export function sendError(res: ServerResponse, err: ProxyError): void {
  renderError(res, err.rendered);
}

/**
 * The HTTP frame's own refusals (body too large, invalid JSON, an unexpected failure) in the proxy's
 * words, with status, type and wire code from the table. Unknown routes pass through (`noRoute`) and
 * bodies have no depth limit, so the frame's 404 / 405 / too-deep answers never occur.
 */
export const PROXY_FRAME_ERRORS: FrameErrors = frameErrors({
  // The rest of the body is never read: the connection cannot carry another request.
  bodyTooLarge: (limitBytes) =>
    frameError('body_too_large', `request body exceeds ${limitBytes} bytes`, CLOSE_CONNECTION),
  invalidJson: (message) => frameError('invalid_request', message),
  internal: () => frameError('internal', 'internal engine proxy error'),
});

const CLOSE_CONNECTION = Object.freeze({ connection: 'close' });

function frameError(
  code: ProxyErrorCode,
  message: string,
  headers?: Readonly<Record<string, string>>,
): HttpError {
  return new HttpError(PROXY_ERROR_CODES[code].status, message, {
    type: PROXY_ERROR_CODES[code].type,
    code: wireCodeOf(code),
    headers,
  });
}

function wireCodeOf(code: ProxyErrorCode): ProxyErrorCode | null {
  return PROXY_ERROR_CODES[code].wire ? code : null;
}
