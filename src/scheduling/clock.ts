/** Time source and timer factory; inject a {@link ManualClock} in tests. */
export interface Clock {
  now(): number;
  setTimeout(callback: () => void, delayMs: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export type TimerHandle = { readonly __timer: unique symbol } | object;

/** Wall clock backed by `Date.now` and unref'd Node timers (a pending timer never holds the process open). */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(callback, delayMs) {
    const timer = setTimeout(callback, Math.max(0, delayMs));
    timer.unref();
    return timer;
  },
  clearTimeout(handle) {
    clearTimeout(handle as NodeJS.Timeout);
  },
};

interface ManualTimer {
  readonly dueMs: number;
  readonly seq: number;
  readonly callback: () => void;
  cancelled: boolean;
}

/** Deterministic clock for tests: time moves only through {@link advance}, which fires due timers in order. */
export class ManualClock implements Clock {
  private nowMs: number;
  private seq = 0;
  private timers: ManualTimer[] = [];

  constructor(startMs = 1_000_000) {
    this.nowMs = startMs;
  }

  now(): number {
    return this.nowMs;
  }

  setTimeout(callback: () => void, delayMs: number): TimerHandle {
    const timer: ManualTimer = {
      dueMs: this.nowMs + Math.max(0, delayMs),
      seq: this.seq++,
      callback,
      cancelled: false,
    };
    this.timers.push(timer);
    return timer;
  }

  clearTimeout(handle: TimerHandle): void {
    (handle as ManualTimer).cancelled = true;
    this.timers = this.timers.filter((t) => t !== handle);
  }

  /** Number of timers still pending (tests assert nothing leaks). */
  get pendingTimers(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, firing every timer that falls due, in due order. */
  advance(ms: number): void {
    const target = this.nowMs + ms;
    for (;;) {
      let next: ManualTimer | undefined;
      for (const t of this.timers) {
        if (
          t.dueMs <= target &&
          (!next || t.dueMs < next.dueMs || (t.dueMs === next.dueMs && t.seq < next.seq))
        )
          next = t;
      }
      if (!next) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.nowMs = Math.max(this.nowMs, next.dueMs);
      if (!next.cancelled) next.callback();
    }
    this.nowMs = target;
  }
}
