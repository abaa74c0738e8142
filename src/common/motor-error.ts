/**
 * The coordinator's one error type. Every failure carries a stable `code`; the table maps it to the
 * HTTP status, the OpenAI error `type` and whether a new attempt may help. Only the gateway renders
 * errors (as `{"error":{"message","type","param","code"}}`). `clientMessage`: what a client is told
 * instead of the message of an error an instance caused, whose text names the instance, its URL or
 * the engine's own 5xx words (coordinator/client-errors.ts; the log and metrics keep the full one). It lives in common/ so that
 * observability labels its metrics with the same codes without importing coordinator code.
 */
export const ERROR_CODES = {
  invalid_request: { status: 400, type: 'invalid_request_error', retryable: false },
  unauthorized: { status: 401, type: 'authentication_error', retryable: false },
  not_found: { status: 404, type: 'not_found_error', retryable: false },
  model_not_found: { status: 404, type: 'invalid_request_error', retryable: false },
  method_not_allowed: { status: 405, type: 'invalid_request_error', retryable: false },
  body_too_large: { status: 413, type: 'invalid_request_error', retryable: false },
  /** The client's body arrived slower than `server.minUploadBytesPerSecond`: cut, its budget returned. */
  upload_too_slow: { status: 408, type: 'invalid_request_error', retryable: false },
  /** An engine rejected the request (4xx): its status and body reach the client unchanged. */
  engine_rejected: { status: 400, type: 'invalid_request_error', retryable: false },
  /**
   * An engine refused a leg body as too large: it answered 413, or closed the connection while a
   * large leg body was being sent (its body limit, most likely; common/upload-refusal.ts). The
   * request's, charged to no instance; the logged message names the engine's limit and Motor's, the
   * client's names the two settings to look at.
   */
  upload_refused: {
    status: 413,
    type: 'invalid_request_error',
    retryable: false,
    clientMessage:
      "an engine refused the leg body as too large: the request fit Motor's own limit " +
      "(server.maxBodyBytes) but the leg adds fields, so the engine's limit is the lower one; send a " +
      "smaller request or raise the engine's body limit",
  },
  /** No instance pair can serve the request (topology, missing capability). */
  no_route: { status: 503, type: 'server_error', retryable: false },
  /** Admission: the caller's API key exceeded its rate limit (with `Retry-After`). */
  rate_limited: { status: 429, type: 'rate_limit_error', retryable: false },
  /** Admission: the coordinator's concurrency limit and queue are full, or the queue wait timed out (with `Retry-After`). */
  overloaded: { status: 503, type: 'server_error', retryable: false },
  /** An engine answered 408/429/5xx. */
  engine_unavailable: {
    status: 503,
    type: 'server_error',
    retryable: true,
    clientMessage: 'no engine could take the request now (busy or unavailable); retry later',
  },
  /** The picked instance was drained or paused before its leg was sent: not the instance's fault. */
  instance_withdrawn: {
    status: 503,
    type: 'server_error',
    retryable: true,
    clientMessage: 'the engine picked for the request stopped taking new work; retry',
  },
  engine_error: {
    status: 502,
    type: 'server_error',
    retryable: true,
    clientMessage: 'an engine failed while serving the request',
  },
  /** Connection refused/reset, socket closed mid-response, truncated stream. */
  connection_error: {
    status: 502,
    type: 'server_error',
    retryable: true,
    clientMessage: 'the connection to an engine failed',
  },
  /** An engine answered something that breaks the protocol (bad PrefillResult, not JSON). */
  protocol_error: {
    status: 502,
    type: 'server_error',
    retryable: true,
    clientMessage: 'an engine answered something the coordinator could not read',
  },
  /**
   * The decode engine preempted the request (vllm-ascend recompute scheduler, `stop_reason:
   * "recomputed"`): retried before commit, an error frame after; not an engine fault.
   */
  decode_recomputed: {
    status: 503,
    type: 'server_error',
    retryable: true,
    clientMessage: 'the decode engine preempted the request; retry',
  },
  first_token_timeout: { status: 504, type: 'server_error', retryable: true },
  idle_timeout: { status: 504, type: 'server_error', retryable: false },
  deadline_exceeded: { status: 504, type: 'server_error', retryable: false },
  client_disconnect: { status: 499, type: 'invalid_request_error', retryable: false },
  /** A stream client left its socket full (not reading) for `timeouts.clientStallMs`: cut, charged to nobody. */
  client_stalled: { status: 499, type: 'invalid_request_error', retryable: false },
  /**
   * A request came back to a coordinator it already went through (coordinator/hop-header.ts), or an
   * instance answered that 508 to a leg: an instance URL points at a coordinator.
   */
  loop_detected: {
    status: 508,
    type: 'invalid_request_error',
    retryable: false,
    clientMessage: 'an instance sent the request back to a Motor coordinator it came through',
  },
  /** The response store (Redis) cannot be reached: `store: true` Responses requests are refused. */
  store_unavailable: { status: 503, type: 'server_error', retryable: false },
  internal: { status: 500, type: 'server_error', retryable: false },
} as const satisfies Record<
  string,
  { status: number; type: string; retryable: boolean; clientMessage?: string }
>;

export type MotorErrorCode = keyof typeof ERROR_CODES;

/** An engine's own error response, relayed verbatim. */
export interface EngineReply {
  status: number;
  body: Buffer;
  contentType: string;
}

export class MotorError extends Error {
  readonly status: number;
  readonly type: string;
  readonly retryable: boolean;

  constructor(
    readonly code: MotorErrorCode,
    message: string,
    opts: {
      param?: string | null;
      status?: number;
      retryable?: boolean;
      reply?: EngineReply;
      instanceId?: string;
      stoppedByPeer?: boolean;
      clientNote?: string;
    } = {},
  ) {
    super(message);
    this.name = 'MotorError';
    const entry = ERROR_CODES[code];
    this.status = opts.status ?? entry.status;
    this.type = entry.type;
    this.retryable = opts.retryable ?? entry.retryable;
    this.param = opts.param ?? null;
    this.reply = opts.reply;
    this.instanceId = opts.instanceId;
    this.stoppedByPeer = opts.stoppedByPeer ?? false;
    this.clientNote = opts.clientNote;
  }

  /** Motor's own words about the failure (why it was not migrated), kept after a generic `clientMessage`. */
  readonly clientNote: string | undefined;

  /**
   * The engine proxy refused or ended the leg because its peer leg failed first (409
   * `dispatch_stopped`): the peer's own answer carries the real error.
   */
  readonly stoppedByPeer: boolean;

  readonly param: string | null;
  /** Set for `engine_rejected`: the engine's reply to pass through. */
  readonly reply: EngineReply | undefined;
  /** The instance that failed, so a retry can avoid it. */
  readonly instanceId: string | undefined;
}

/**
 * Error for an engine's non-200 reply: 4xx (except 408/429) pass through, the rest may be retried.
 * `bodyChars`: the length of the leg body sent, named when the engine refuses it as too large.
 */
export function errorForEngineStatus(
  instanceId: string,
  leg: string,
  reply: EngineReply,
  bodyChars?: number,
): MotorError {
  const { status } = reply;
  const detail = engineMessage(reply);
  if (status === 409 && engineErrorCode(reply) === 'dispatch_stopped') {
    return new MotorError('engine_error', `${leg} leg was stopped by its peer: ${detail}`, {
      instanceId,
      stoppedByPeer: true,
    });
  }
  if (status === 401 || status === 403) {
    // Motor's engine credentials were refused, not the client's: never relayed as the client's 401.
    // Retryable on another instance and counted against this one (its breaker opens on repeats).
    return new MotorError(
      'engine_error',
      `${leg} engine ${instanceId} answered ${status}: the engine API key is missing or wrong ` +
        "(instance apiKey / apiKeyEnv, or the engine proxy's --engine-api-key)",
      { instanceId },
    );
  }
  if (status === 508) {
    // A Motor coordinator refused the leg as a loop (hop-header.ts): no other instance would help.
    return new MotorError(
      'loop_detected',
      `${leg} instance ${instanceId} sent the request back to a Motor coordinator it came through: ${detail}`,
      { instanceId },
    );
  }
  if (status === 413) {
    // The body passed Motor's own limit, and the leg adds fields: relayed alone, the engine's
    // "request body exceeds 4194304 bytes" would contradict the limit the client was told about.
    const size = bodyChars !== undefined ? `the ${bodyChars}-character ` : 'the ';
    return new MotorError(
      'upload_refused',
      `${leg} engine ${instanceId} refused ${size}leg body as too large (engine: ${JSON.stringify(detail)}); ` +
        "the request fit Motor's own limit (server.maxBodyBytes) but the leg adds fields, so the engine's " +
        "limit is the lower one: send a smaller request or raise the engine's body limit",
      { instanceId },
    );
  }
  if (status >= 400 && status < 500 && status !== 408 && status !== 429) {
    return new MotorError('engine_rejected', detail, { status, reply, instanceId });
  }
  const message = `${leg} engine ${instanceId} answered ${status}${detail ? `: ${detail}` : ''}`;
  if (status === 408 || status === 429 || status === 503) {
    return new MotorError('engine_unavailable', message, {
      status: status === 408 ? 503 : status,
      instanceId,
    });
  }
  return new MotorError('engine_error', message, { instanceId });
}

function engineErrorCode(reply: EngineReply): unknown {
  try {
    return (JSON.parse(reply.body.toString('utf8')) as { error?: { code?: unknown } }).error?.code;
  } catch {
    return undefined;
  }
}

function engineMessage(reply: EngineReply): string {
  const text = reply.body.toString('utf8', 0, Math.min(reply.body.length, 2000));
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    if (typeof parsed.error === 'string') return parsed.error;
    if (parsed.error && typeof parsed.error.message === 'string') return parsed.error.message;
    if (typeof parsed.message === 'string') return parsed.message;
  } catch {
    // not JSON
  }
  return text.trim();
}
