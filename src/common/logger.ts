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

/**
 * The `listening` line's field that names a second server of one process (`management`). Not `name`:
 * pino puts the logger's `name` on every line, and a second `name` key made the line's JSON carry the
 * key twice. `spawnMotor` (src/cluster/motor-child.ts) files URLs by this field.
 */
export const LISTENING_SERVER_KEY = 'server';

/**
 * Logs the `listening` line and writes it out at once (whoever started the process waits for it);
 * `server` names a process's second server (the main one has none).
 */
export function logListening(log: Logger, fields: Record<string, unknown>, server?: string): void {
  log.info(server === undefined ? fields : { ...fields, [LISTENING_SERVER_KEY]: server }, 'listening');
  log.flush();
}
