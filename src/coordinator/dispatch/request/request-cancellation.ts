import { MotorError } from '../../../common/motor-error.js';
import { Cancellation } from './cancellation.js';

/** The part of the client's `ServerResponse` that tells whether the client went away. */
export interface ClientResponse {
  once(event: 'close', listener: () => void): unknown;
  readonly writableFinished: boolean;
}

/**
 * The one cancellation of a client request, from admission to the last byte: the client going away
 * before its response ended, or the overall deadline. The admission queue, the backoff between
 * attempts and the current attempt all wait on it.
 */
export class RequestCancellation extends Cancellation {
  private deadline: NodeJS.Timeout | null = null;
  private controller: AbortController | null = null;

  /** Watches the client's response: closed before it finished = the client went away. */
  constructor(res: ClientResponse) {
    super();
    res.once('close', () => {
      if (!res.writableFinished)
        this.cancel(new MotorError('client_disconnect', 'the client went away'), 'client_disconnect');
    });
  }

  /** The client cannot be written to: it went away, or it stalled and was cut (attempt.ts). */
  get clientGone(): boolean {
    const code = this.reason?.code;
    return code === 'client_disconnect' || code === 'client_stalled';
  }

  get deadlineHit(): boolean {
    return this.reason?.code === 'deadline_exceeded';
  }

  /** Starts the overall deadline (`timeouts.totalMs`; 0 = none). */
  startDeadline(totalMs: number): void {
    if (totalMs <= 0 || this.cancelled) return;
    this.deadline = setTimeout(
      () =>
        this.cancel(
          new MotorError('deadline_exceeded', `request exceeded its ${totalMs} ms deadline`),
          'timeout',
        ),
      totalMs,
    );
  }

  /** An AbortSignal view, made on demand: only a request that has to queue for admission needs one. */
  signal(): AbortSignal {
    if (!this.controller) {
      const controller = new AbortController();
      this.controller = controller;
      this.onCancel(() => controller.abort());
    }
    return this.controller.signal;
  }

  /** Waits `ms` (a retry's backoff), ending early when the request is cancelled. */
  sleep(ms: number): Promise<void> {
    if (ms <= 0 || this.cancelled) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.off(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.onCancel(wake);
    });
  }

  /** The request is over: the deadline stops counting. */
  close(): void {
    if (this.deadline) clearTimeout(this.deadline);
    this.deadline = null;
  }

  override cancel(...args: Parameters<Cancellation['cancel']>): void {
    this.close();
    super.cancel(...args);
  }
}
