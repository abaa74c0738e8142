import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * Structured JSON logs on stdout, written asynchronously (a non-blocking sonic-boom destination, no
 * synchronous write per line; pino flushes what is pending when the process exits) so logging never
 * blocks the request path. Per-request lines carry `root_request_id`.
 * Every server prints one `{"msg":"listening","url":...}` line once its socket is bound; tests and
 * `motor up` wait for that line instead of sleeping.
 */
export function createLogger(name: string, level: string = process.env.MOTOR_LOG_LEVEL ?? 'info'): Logger {
  return pino({ name, level, base: { pid: process.pid } }, pino.destination({ dest: 1, sync: false }));
}
