import { pino, type Logger } from 'pino';

export type { Logger };

/** Lines are gathered up to this many bytes before a write (one write per ~10 access-log lines). */
const LOG_BATCH_BYTES = 4096;
/** …and written at least this often, so a quiet process's lines still appear promptly. */
const LOG_FLUSH_MS = 100;

/**
 * Structured JSON logs on stdout, written asynchronously and in batches (a non-blocking sonic-boom
 * destination that writes when 4 KiB are pending or every 100 ms): a write per line would cost each
 * request a thread-pool write and an extra event-loop wake-up. pino writes what is pending
 * synchronously when the process exits. Per-request lines carry `root_request_id`.
 * Every server prints one `{"msg":"listening","url":...}` line once its socket is bound (see
 * `logListening`); tests and `motor up` wait for that line instead of sleeping.
 */
export function createLogger(name: string, level: string = process.env.MOTOR_LOG_LEVEL ?? 'info'): Logger {
  return pino(
    { name, level, base: { pid: process.pid } },
    pino.destination({ dest: 1, sync: false, minLength: LOG_BATCH_BYTES, periodicFlush: LOG_FLUSH_MS }),
  );
}

/** Logs the `listening` line and writes it out at once (whoever started the process waits for it). */
export function logListening(log: Logger, fields: Record<string, unknown>): void {
  log.info(fields, 'listening');
  log.flush();
}
