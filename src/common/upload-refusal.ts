/**
 * An engine that refuses a request body (over its own size limit) answers 413 and closes before it
 * has read the rest. undici relays that 413 when the answer reaches it first (the usual case, tested
 * on loopback); when the close wins instead — the kernel resets the connection while Motor is still
 * writing — the leg fails with EPIPE / ECONNRESET / "other side closed" and no status, and undici
 * gives no way to tell how much of the body the engine took (`bytesWritten` counts buffered bytes).
 *
 * The rule, one home: such a connection error on a leg whose body is at least
 * {@link UPLOAD_REFUSAL_MIN_CHARS} long is the request's (`upload_refused`, 413, not retried) and is
 * charged to nobody: neither the instance's circuit breaker nor its passive health. A body that
 * large is far over a socket buffer, so the error almost surely struck during the upload, and an
 * engine that really died is still found by the health probes and by every smaller request. Smaller
 * bodies keep today's `connection_error` (retried, charged to the instance). The engine proxy applies
 * the same rule to its own engine call (a 413 `body_too_large` to the coordinator, not a 502).
 */

/** Leg bodies of at least this many characters (JSON: ≥ as many bytes) get the rule. */
export const UPLOAD_REFUSAL_MIN_CHARS = 1024 * 1024;

/** Errors an early close during the upload surfaces as (Node's socket errors, undici's SocketError). */
const UPLOAD_ERRORS: ReadonlySet<string> = new Set(['EPIPE', 'ECONNRESET', 'UND_ERR_SOCKET']);

/** Whether `err`, on a request with no engine answer yet and a body of `bodyChars` (string length or bytes), is an upload refusal. */
export function isUploadRefusal(err: unknown, bodyChars: number): boolean {
  if (bodyChars < UPLOAD_REFUSAL_MIN_CHARS) return false;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && UPLOAD_ERRORS.has(code);
}
