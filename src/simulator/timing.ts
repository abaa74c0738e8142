/**
 * Timing model. All model delays (prefill, decode steps, KV transfer) are multiplied by
 * `timeScale`; at 0 no timers are used at all. Wall-clock limits (leases, waits, timeouts) are not
 * scaled. An engine step (step-budget.ts) carries the running decodes and up to
 * max-num-batched-tokens of prefill chunks:
 *
 *   prefill part = prefillOverheadMs + chunk tokens × prefillMsPerToken   (0 without prefill tokens)
 *   decode step  = itlMs × (1 + loadSlowdown × (running − 1)) × slowDecodeFactor
 *   step         = decode step (when decodes run) + prefill part
 */
export interface TimingParams {
  timeScale: number;
  prefillOverheadMs: number;
  prefillMsPerToken: number;
  itlMs: number;
  loadSlowdown: number;
  kvTransferMsPerBlock: number;
}

/** The prefill part of one engine step carrying `tokens` prefill tokens (all chunks together). */
export function prefillStepMs(p: TimingParams, tokens: number): number {
  if (tokens <= 0) return 0;
  return (p.prefillOverheadMs + tokens * p.prefillMsPerToken) * p.timeScale;
}

export function decodeStepMs(p: TimingParams, running: number, slowFactor: number): number {
  return p.itlMs * (1 + p.loadSlowdown * Math.max(0, running - 1)) * slowFactor * p.timeScale;
}

export function transferMs(p: TimingParams, blocks: number): number {
  return blocks * p.kvTransferMsPerBlock * p.timeScale;
}

export class AbortedError extends Error {
  constructor(readonly reason: string) {
    super(`aborted: ${reason}`);
  }
}

/** Resolves after `ms` (wall clock), or rejects with AbortedError as soon as `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new AbortedError(String(signal.reason ?? 'aborted')));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new AbortedError(String(signal!.reason ?? 'aborted')));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Waits until `signal` aborts (rejects with AbortedError). Used by the hang-forever fault. */
export function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const fire = (): void => reject(new AbortedError(String(signal.reason ?? 'aborted')));
    if (signal.aborted) fire();
    else signal.addEventListener('abort', fire, { once: true });
  });
}

/**
 * A simulated model delay: sleeps when `ms` > 0; at 0 (time-scale 0) it stays synchronous, so no
 * timer or promise is created, but an abort still stops the request.
 */
export function delay(ms: number, signal: AbortSignal): Promise<void> | void {
  if (ms > 0) return sleep(ms, signal);
  if (signal.aborted) throw new AbortedError(String(signal.reason));
}

export const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Deadline-based pacing: each step adds its duration to a virtual deadline and only sleeps once the
 * deadline is ≥ 1 ms ahead, so sub-millisecond steps still average out to the right rate.
 */
export class Pacer {
  private deadline: number;

  /** `now` is injectable so tests do not depend on how fast the machine runs them. */
  constructor(private readonly now: () => number = () => performance.now()) {
    this.deadline = now();
  }

  /** Returns the number of ms to sleep now (0 = continue at once). */
  advance(stepMs: number): number {
    if (stepMs <= 0) return 0;
    this.deadline += stepMs;
    const ahead = this.deadline - this.now();
    if (ahead < 1) {
      if (ahead < -50) this.deadline = this.now(); // fell far behind: do not burst
      return 0;
    }
    return ahead;
  }
}

interface Waiter {
  resolve: () => void;
  reject: (err: Error) => void;
  cancelled: boolean;
}

/** `max-num-seqs` running slots with a FIFO waiting queue. */
export class Scheduler {
  running = 0;
  private queue: Waiter[] = [];
  private head = 0;
  private readonly watchers = new Set<() => void>();

  constructor(readonly maxNumSeqs: number) {}

  get waiting(): number {
    return this.queue.length - this.head - this.cancelledCount;
  }
  private cancelledCount = 0;

  /** Resolves when a slot is held; rejects with AbortedError if `signal` aborts while queued. */
  acquire(signal: AbortSignal): Promise<void> {
    if (this.running < this.maxNumSeqs && this.waiting === 0) {
      this.running++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const w: Waiter = { resolve, reject, cancelled: false };
      this.queue.push(w);
      signal.addEventListener(
        'abort',
        () => {
          if (w.cancelled) return;
          w.cancelled = true;
          this.cancelledCount++;
          reject(new AbortedError(String(signal.reason ?? 'aborted')));
        },
        { once: true },
      );
    });
  }

  /**
   * Resolves once a slot is free and nobody is queued, without taking it (rejects on abort): when
   * vLLM's scheduler would pick a waiting remote-prefill request and start its KV load.
   */
  whenFree(signal: AbortSignal): Promise<void> {
    const free = (): boolean => this.running < this.maxNumSeqs && this.waiting === 0;
    if (free()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const done = (): void => {
        this.watchers.delete(check);
        signal.removeEventListener('abort', onAbort);
      };
      const check = (): void => {
        if (!free()) return;
        done();
        resolve();
      };
      const onAbort = (): void => {
        done();
        reject(new AbortedError(String(signal.reason ?? 'aborted')));
      };
      this.watchers.add(check);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  release(): void {
    this.running--;
    while (this.head < this.queue.length && this.running < this.maxNumSeqs) {
      const w = this.queue[this.head++]!;
      if (w.cancelled) {
        this.cancelledCount--;
        continue;
      }
      w.cancelled = true; // consumed; a later abort must not reject it
      this.running++;
      w.resolve();
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    for (const check of [...this.watchers]) check();
  }
}
