import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * Structured JSON logs on stdout. pino writes asynchronously so logging never blocks the request path.
 * Every server prints one `{"msg":"listening","url":...}` line once its socket is bound; tests and
 * `motor up` wait for that line instead of sleeping.
 */
export function createLogger(name: string, level: string = process.env.MOTOR_LOG_LEVEL ?? 'info'): Logger {
  return pino({ name, level, base: { pid: process.pid } });
}
